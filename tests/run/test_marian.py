"""Marian NMT's training logs, release by release, built from the format strings of
marian-nmt/marian-dev src/training/scheduler.h (the display and validation lines),
src/training/graph_group.cpp and graph_group_sync.cpp (cost scaling, skipped updates,
restores) and src/common/config.cpp (`[config] ` dump), behind spdlog's `[%Y-%m-%d %T] `."""

import math

import pytest

from postmortem.run import read_run, textlogs

TS = "[2022-02-08 10:00:00] "

# scheduler.h, as each release prints the display line
V1 = "Ep. {} : Up. {} : Sen. {} : Cost {:.2f} : Time {} : {:.2f} words/s : L.r. {:.4e}"          # v1.0-1.4
V15 = "Ep. {} : Up. {} : Sen. {} : Cost {:.8f} * {} after {} : Time {:.2f}s : {:.2f} words/s : L.r. {:.4e}"  # 1.7
V18 = "Ep. {} : Up. {} : Sen. {} : {} : Time {:.2f}s : {:.2f} words/s : L.r. {:.4e}"             # 1.8-1.10
V111 = "Ep. {} : Up. {} : Sen. {} : {} : Time {:.2f}s : {:.2f} words/s : gNorm {:.4f} : L.r. {:.4e}"  # 1.11+
VALID_V1 = "[valid] {} : {} : {} : new best"
VALID = "[valid] Ep. {} : Up. {} : {} : {} : stalled {} times (last best: {})"
# graph_group.cpp / graph_group_sync.cpp 1.11.0, 1.12.0 (LOG(debug, ...))
START = "Training with cost scaling - factor: {}, frequency: {}, multiplier: {}, minimum: {}"
SKIP = "Seen NaN in gradient, skipping update, resetting gradient"
REDUCED = "Seen NaN/Inf after {} gradient updates. Reduced cost-scaling factor to {}"
INCREASED = "No NaN/Inf after {} gradient updates. Increasing cost-scaling factor to {}"
RESTORED = ("[training] Master parameters and optimizers restored from training checkpoint {} and {}")


def cost(value, labels=3305233, batch=3412, total=33052330):
    """formatLoss (1.8.0+), ce-sum with --disp-label-counts."""
    return f"Cost {value:.8f} * {labels:,} @ {batch:,} after {total:,}"


def line(release, up, loss, gnorm=1.0, lr=3e-4):
    if release == "1.4":
        return V1.format(1, up, up * 64, loss, "35.46s", 8012.33, lr)
    if release == "1.7":
        return V15.format(1, up, f"{up * 64:,}", loss, f"{up * 3000:,}", f"{up * 30000:,}", 71.52, 46213.37, lr)
    if release == "1.10":
        return V18.format("1.000", up, f"{up * 64:,}", cost(loss), 71.52, 46213.37, lr)
    if release == "1.10 ce-mean-words":           # formatLoss: the mean alone, `Cost nan` as v1.0's
        return V18.format(1, up, f"{up * 64:,}", f"Cost {loss:.8f}", 71.52, 46213.37, lr)
    return V111.format(1, up, f"{up * 64:,}", cost(loss), 71.52, 46213.37, gnorm, lr)


def config(precision):
    return [TS + "[config] after-epochs: 0", TS + "[config] precision:"] + \
           [TS + f"[config]   - {p}" for p in precision] + [TS + "[config] quiet: false"]


def curve(up):
    return 4.0 * math.exp(-up / 4000) + 2.0


def write(tmp_path, lines, name="train.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("release", ["1.4", "1.7", "1.10", "1.10 ce-mean-words", "1.12"])
def test_each_releases_display_line_is_read_with_its_update(tmp_path, release):
    lines = [TS + f"[marian] Marian v{release.split()[0]}.0", TS + "Training started"]
    lines += [TS + line(release, up, curve(up) if up != 2500 else math.nan, gnorm=0.5 + up / 1e5)
              for up in range(100, 3001, 100)]
    p = write(tmp_path, lines)
    assert textlogs.sniff(p)[0] == "marian"
    run = read_run(p)
    f = run.frame.set_index("step")
    assert run.source.format == "marian" and len(f) == 30
    digits = 2 if release == "1.4" else 8
    assert f.loc[1200, "loss"] == pytest.approx(round(curve(1200), digits))
    assert f.loc[3000, "lr"] == pytest.approx(3e-4) and math.isnan(f.loc[2500, "loss"])
    # the release's own entry names the loss, its NaN line too (`Cost nan` fits two shapes)
    entry = {"1.4": "update_v1", "1.12": "update_gnorm"}.get(release, "update")
    assert run.source.extras["series_dialects"]["loss"] == [f"marian.{entry}"]
    if release == "1.12":
        assert f.loc[2000, "grad_norm"] == pytest.approx(0.52)
    else:
        assert "grad_norm" not in run.frame


def test_validation_lines_of_both_shapes_are_the_evals_at_their_update(tmp_path):
    old = [TS + line("1.4", up, curve(up)) for up in range(100, 1001, 100)]
    old += [TS + VALID_V1.format(1000, "cross-entropy", 95.25)]
    run = read_run(write(tmp_path, old, "old.log"))
    assert run.frame.set_index("step").loc[1000, "val_loss"] == 95.25
    new = [TS + line("1.12", up, curve(up)) for up in range(100, 1001, 100)]
    new += [TS + VALID.format(1, 1000, "perplexity", 11.8123, 1, 11.0213)]
    run = read_run(write(tmp_path, new, "new.log"))
    assert run.frame.set_index("step").loc[1000, "val_perplexity"] == pytest.approx(11.8123)


def cascade_log(halvings=12, at=2000):
    """1.12 with --log-level debug: 256 doubled once, then `halvings` skipped updates in a row."""
    lines = config(["float16", "float32"]) + [TS + START.format(256, 1000, 2, 1), TS + "Training started"]
    factor = 256
    for up in range(100, 4001, 100):
        if up == 1100:
            factor *= 2
            lines.append(TS + INCREASED.format(1000, factor))
        if up == at + 100:
            for _ in range(halvings):
                factor /= 2
                lines += [TS + SKIP, TS + REDUCED.format(1, f"{factor:g}")]
        lines.append(TS + line("1.12", up, curve(up)))
    return lines


def test_cost_scaling_is_the_loss_scale_and_a_skipped_update_an_overflow(tmp_path):
    run = read_run(write(tmp_path, cascade_log()))
    f = run.frame.set_index("step")
    assert run.dtype == "fp16"
    scale = f.loss_scale.dropna()
    assert scale.loc[0] == 256 and scale.loc[1100] == 512          # the first factor, then the increase
    assert scale.iloc[-1] == 512 / 2 ** 12
    # twelve skips printed before the line of update 2100: updates 2089..2100, one each
    assert f.overflows.sum() == 12 and f.overflows.dropna().index.min() == 2089
    said = run.source.extras["series_dialects"]
    assert said["overflows"] == ["marian.skip_nan_gradient"]
    assert "marian.cost_scaling.reduced" in said["loss_scale"]


@pytest.mark.parametrize("message", [
    "Seen NaN/Inf in gradient, skipping update, reducing cost-scaling factor to {}",          # 2496bd21
    "NaN/Inf percentage 0.05 in gradients, skipping update, reducing cost-scaling factor to {}"])  # c91243e6
def test_fp16_branch_says_skip_and_scale_in_one_line(tmp_path, message):
    lines = [TS + line("1.10", up, curve(up)) for up in range(100, 1001, 100)]
    lines.insert(5, TS + message.format(16384))
    run = read_run(write(tmp_path, lines))
    f = run.frame.set_index("step")
    assert f.overflows.sum() == 1 and f.loc[600, "loss_scale"] == 16384


def test_a_nan_cost_is_a_nan_loss_at_its_update(tmp_path):
    lines = [TS + line("1.12", up, curve(up) if up < 1500 else float("nan")) for up in range(100, 2001, 100)]
    assert "Cost nan * " in lines[14] or "Cost -nan * " in lines[14]
    f = read_run(write(tmp_path, lines)).frame.set_index("step")
    assert math.isnan(f.loc[1500, "loss"]) and f.loc[1400, "loss"] == pytest.approx(curve(1400))


def test_a_skipped_update_of_1_10_is_the_next_update_with_its_nan_loss(tmp_path):
    """graph_group_sync.cpp 1.9.0/1.10.0: `scheduler_->numberOfBatches()` counts the updates done."""
    lines = [TS + line("1.10", up, curve(up)) for up in range(100, 1001, 100)]
    lines.insert(4, TS + "[training] skipping {}-th update due to loss being {}".format(437, "nan"))
    f = read_run(write(tmp_path, lines)).frame.set_index("step")
    assert math.isnan(f.loc[438, "loss"]) and f.loc[438, "overflows"] == 1
    assert f.loc[500, "loss"] == pytest.approx(curve(500))


@pytest.mark.parametrize("release", ["1.4", "1.12"])
def test_a_relaunch_is_a_second_segment(tmp_path, release):
    lines = [TS + "Training started"] + [TS + line(release, up, curve(up)) for up in range(100, 1001, 100)]
    if release == "1.12":       # the restore message, then the launch's own words
        lines += [TS + RESTORED.format("model.npz", "model.npz.optimizer.npz"),
                  TS + START.format(256, 1000, 2, 1)]
    else:
        lines += [TS + "Loading model from model/model.npz"]
    lines += [TS + "Training started"] + [TS + line(release, up, curve(up)) for up in range(1100, 2001, 100)]
    run = read_run(write(tmp_path, lines))
    assert len(run.segments()) == 2 and len(run.source.resumes) == 1
    assert [s["rows"] for s in run.segments()][1] >= 10


def test_precision_in_the_config_dump_is_the_dtype(tmp_path):
    body = [TS + line("1.12", up, curve(up)) for up in range(100, 1001, 100)]
    assert read_run(write(tmp_path, config(["float32", "float32"]) + body, "a.log")).dtype == "fp32"
    run = read_run(write(tmp_path, config(["float16", "float32"]) + body, "b.log"))
    assert run.dtype == "fp16" and "precision: float16" in run.source.extras["dtype_from"]
    assert read_run(write(tmp_path, body, "c.log")).dtype is None


def test_lr_report_off_and_the_scale_at_its_minimum(tmp_path):
    """`--lr-report` is off by default (no `L.r.`); ba91b391's warning at the minimum factor
    (the shape of marian-nmt/marian issue #386: NaN costs with the factor at its floor)."""
    display = V111.rsplit(" : L.r.", 1)[0]
    at_min = "NaN/Inf percentage {:.2f} in {} gradient updates, but cost-scaling factor {} is already at minimum"
    lines = []
    for up in range(500, 5001, 500):
        c = float("nan") if up in (3500, 4000) else curve(up)
        lines.append(TS + display.format(8, up, f"{up * 180:,}", f"Cost {c:.8f}", 111.03, 191311.12, 0.6068))
        if up == 4000:
            lines.append(TS + at_min.format(0.7, 10, f"{2 ** -17:g}"))
        if up % 2500 == 0:
            lines.append(TS + VALID.format(8, up, "translation", 49.5, 3, 49.7))
    run = read_run(write(tmp_path, lines))
    f = run.frame.set_index("step")
    assert run.source.format == "marian" and "lr" not in run.frame
    assert math.isnan(f.loc[3500, "loss"]) and f.loc[3000, "grad_norm"] == pytest.approx(0.6068)
    assert f.loss_scale.dropna().tolist() == [pytest.approx(7.62939e-06)]
    assert f.loc[5000, "val_translation"] == 49.5


def test_the_valid_log_beside_the_log_is_read_once(tmp_path):
    """`--log train.log --valid-log valid.log`: the validator's logger writes both files
    (src/common/logging.cpp createLoggers), so valid.log is a copy of train.log's [valid] lines."""
    lines = []
    for up in range(100, 3001, 100):
        lines.append(TS + line("1.12", up, curve(up)))
        if up % 1000 == 0:
            lines.append(TS + VALID.format(1, up, "ce-mean-words", round(curve(up) + 0.1, 4), 0, 0))
    write(tmp_path, lines)
    write(tmp_path, [x for x in lines if "[valid]" in x], "valid.log")
    run = read_run(tmp_path)
    f = run.frame.set_index("step")
    assert run.source.format == "marian" and len(run.segments()) == 1
    assert f.loc[2000, "loss"] == pytest.approx(curve(2000))
    assert f.loc[2000, "val_ce-mean-words"] == pytest.approx(round(curve(2000) + 0.1, 4))
    assert any("valid.log holds Marian's validation lines" in w for w in run.source.warnings)


def simulate(skips, updates=3000, disp=500, factor=256.0, freq=1000, first=1, head=()):
    """Marian 1.12 with --log-level debug, as graph_group.cpp counts: `nanSeen_ + noNanSeen_`
    since the last change is printed with each change (a skip and its reduction before the
    update's display line, a rise after it); the display every `disp` updates."""
    lines, since = list(head) + [TS + START.format(f"{factor:g}", freq, 2, 1), TS + "Training started"], 0
    clean = 0
    for up in range(first, first + updates):
        since += 1
        if up in skips:
            factor /= 2
            lines += [TS + SKIP, TS + REDUCED.format(since, f"{factor:g}")]
            since = clean = 0
        else:
            clean += 1
        if up % disp == 0:
            lines.append(TS + line("1.12", up, curve(up)))
        if up not in skips and clean % freq == 0:
            factor *= 2
            lines.append(TS + INCREASED.format(since, f"{factor:g}"))
            since = clean = 0
    return lines


def test_each_skip_on_its_own_update_from_the_counts(tmp_path):
    """Routine probes between display lines 500 apart: each skip and each rise on its own
    update (the counts chain from update 0), not on the last updates before the next line."""
    run = read_run(write(tmp_path, simulate({730, 1900, 2050})))
    f = run.frame.set_index("step")
    assert f.overflows.dropna().index.tolist() == [730, 1900, 2050]
    scale = f.loss_scale.dropna()
    assert list(zip(scale.index, scale)) == [(0, 256), (730, 128), (1730, 256), (1900, 128), (2050, 64)]
    assert "their own updates" in run.source.extras["events_placed"]


def test_a_restored_launch_starts_from_the_last_display_update(tmp_path):
    first = simulate({730}, updates=2000)
    again = simulate({2200, 2830}, updates=1000, first=2001,
                     head=[TS + RESTORED.format("model.npz", "model.npz.optimizer.npz")])
    f = read_run(write(tmp_path, first + again)).frame
    skips = f[f.overflows > 0]
    assert list(zip(skips.segment, skips.step)) == [(0, 730), (1, 2200), (1, 2830)]


def test_counts_the_display_lines_contradict_keep_the_placement_before_the_next_line(tmp_path):
    lines = simulate({730}, updates=1000)
    lines = [x.replace("after 730 gradient", "after 7 gradient") for x in lines]    # a cut log
    f = read_run(write(tmp_path, lines)).frame.set_index("step")
    assert f.overflows.dropna().index.tolist() == [1000]


def test_every_mpi_process_logging_the_skip_is_one_skip(tmp_path):
    """graph_group_sync.cpp logs the skip on every process, graph_group.cpp the reduction on
    the main one (`isMainProcess()`), each behind logging.cpp's `[%Y-%m-%d %T mpi:{}] `."""
    lines = []
    for x in simulate({730, 1900}):
        if SKIP in x:
            lines += [x.replace(TS, f"[2022-02-08 10:00:00 mpi:{r}] ") for r in range(4)]
        else:
            lines.append(x.replace(TS, "[2022-02-08 10:00:00 mpi:0] "))
    f = read_run(write(tmp_path, lines)).frame.set_index("step")
    assert f.overflows.dropna().to_dict() == {730: 1, 1900: 1}
