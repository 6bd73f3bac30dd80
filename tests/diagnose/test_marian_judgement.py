"""Judging Marian NMT's logs end to end: the real GradScaler run of `tests/data/scale/` (a cascade
from update 350; its healthy twin) written as Marian 1.12 prints it with `--log-level debug`
(marian-nmt/marian-dev 1.12.0 src/training/scheduler.h: the display line, the window's mean
cost; graph_group.cpp / graph_group_sync.cpp: the cost-scaling and skip messages) is an
fp16-overflow at the cascade and quiet when healthy; a NaN cost is a NaN at its update; a
relaunch is seen as a restart."""

import math
import sys
from pathlib import Path

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run

sys.path.insert(0, str(Path(__file__).parents[1]))
from scale_logs import CASCADE_AT, record, write  # noqa: E402

TS = "[2022-02-08 10:00:00] "
DISPLAY = "Ep. {} : Up. {} : Sen. {} : {} : Time {:.2f}s : {:.2f} words/s : gNorm {:.4f} : L.r. {:.4e}"
START = "Training with cost scaling - factor: {}, frequency: {}, multiplier: {}, minimum: {}"
SKIP = "Seen NaN in gradient, skipping update, resetting gradient"
REDUCED = "Seen NaN/Inf after {} gradient updates. Reduced cost-scaling factor to {}"
INCREASED = "No NaN/Inf after {} gradient updates. Increasing cost-scaling factor to {}"
RESTORED = "[training] Master parameters and optimizers restored from training checkpoint {} and {}"


def _cost(mean: float, labels: int, batch: int, total: int) -> str:
    """formatLoss: ce-sum with --disp-label-counts (the default of the transformer presets)."""
    return f"Cost {mean:.8f} * {labels:,} @ {batch:,} after {total:,}"


def marian(rows, every=10, losses=None):
    """Marian 1.12 around the scaler's rows: the messages inside an update, the display line
    after it every `every` updates (the mean cost of the window, `costSum / costCount`)."""
    yield TS + "[config] precision:"
    yield TS + "[config]   - float16"
    yield TS + "[config]   - float32"
    yield TS + START.format(f"{rows[0]['scale']:g}", 40, 2, 1)
    yield TS + "Training started"
    window, since = [], 0          # nanSeen_ + noNanSeen_: updates since the last change
    for r in (r for r in rows if r["step"] >= 1):      # Marian's first update is Up. 1
        since += 1
        if r["skipped"]:
            yield TS + SKIP
            yield TS + REDUCED.format(since, f"{r['after']:g}")
            since = 0
        elif r["after"] > r["scale"]:
            yield TS + INCREASED.format(since, f"{r['after']:g}")
            since = 0
        window.append(r["loss"] if losses is None else losses(r))
        if r["step"] % every == 0:
            up = r["step"]
            mean = sum(window) / len(window)
            yield TS + DISPLAY.format(1, up, f"{up * 64:,}", _cost(mean, len(window) * 3300, 3300, up * 3300),
                                      12.5, 26400.0, 1.0, 3e-4)
            window = []


def _incidents(log):
    return [(i.kind, i.step, i.hypotheses[0].pattern if i.hypotheses else None) for i in analyze(log).incidents]


def test_a_cost_scaling_cascade_is_an_fp16_overflow(tmp_path):
    log = read_run(write(tmp_path, marian(record("overflow"))) / "train.log")
    assert log.source.format == "marian" and log.dtype == "fp16"
    found = _incidents(log)
    assert len(found) == 1, found
    kind, step, top = found[0]
    assert top == "fp16-overflow" and CASCADE_AT - 10 < step <= CASCADE_AT, found


@pytest.mark.parametrize("every", [10, 100, 250])
def test_the_healthy_scaler_is_quiet(tmp_path, every):
    """Its routine probes, a display line every 100 or 250 updates: each skip on its own update
    (the counts Marian prints), not a train of skips before the next line."""
    log = read_run(write(tmp_path, marian(record("healthy"), every=every)) / "train.log")
    assert log.frame.overflows.sum() > 0          # its routine probes were read
    assert _incidents(log) == []


def test_a_nan_cost_is_a_nan_at_its_update(tmp_path):
    rows = [r for r in record("healthy") if r["step"] <= 300]
    log = read_run(write(tmp_path, marian(rows, losses=lambda r: math.nan if r["step"] > 250 else r["loss"]))
                   / "train.log")
    found = _incidents(log)
    assert found and found[0][:2] == ("nan", 260), found


def test_a_relaunch_is_counted_as_a_restart(tmp_path):
    rows = record("healthy")
    lines = list(marian([r for r in rows if r["step"] <= 200]))
    lines += [TS + RESTORED.format("model.npz", "model.npz.optimizer.npz")]
    lines += [x for x in marian([r for r in rows if r["step"] > 200]) if "[config]" not in x]
    log = read_run(write(tmp_path, lines) / "train.log")
    assert len(log.segments()) == 2
    assert log.source.extras["resumes"] == [{"step": 210, "dialect": "marian.restored"}]
    b0 = next(c for c in analyze(log).checks if c.id == "B0")     # "Did the run restart?"
    assert b0.status == "fail" and b0.detail.startswith("1 restart(s): step 200 ")


@pytest.mark.parametrize("name", ["overflow", "healthy"])
def test_the_scale_follows_the_scaler(tmp_path, name):
    rows = record(name)
    log = read_run(write(tmp_path, marian(rows)) / "train.log")
    scale = log.frame.set_index("step").loss_scale.dropna()
    assert scale.iloc[0] == rows[0]["scale"] and scale.iloc[-1] == rows[-1]["after"]
