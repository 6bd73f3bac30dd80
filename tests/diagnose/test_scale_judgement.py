"""Judging what the loss-scale families print: a real GradScaler cascade (13 skips from step
350, the loss from 1 to ~47) written in each framework's own words must be an fp16-overflow
incident at its first skip with fp16-overflow as the top cause; the same scaler's routine
probes (one skip and one halving after each growth) must stay quiet. And the shapes a log
gives the judgement: a scale logged less often than it grows (only net falls seen), messages
placed at the end of their logging interval, the scale at its floor."""

import sys
from pathlib import Path

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.diagnose.detectors.cascades import scaler_events, scaler_events_reference
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import read_run

sys.path.insert(0, str(Path(__file__).parents[1]))
from scale_logs import CASCADE_AT, FAMILIES, record, write  # noqa: E402


def _incidents(log):
    return [(i.kind, i.step, i.hypotheses[0].pattern if i.hypotheses else None) for i in analyze(log).incidents]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_real_cascade_is_an_fp16_overflow_at_its_first_skip(family, tmp_path):
    every = FAMILIES[family].__defaults__[0]
    log = read_run(write(tmp_path, FAMILIES[family](record("overflow"))))
    found = _incidents(log)
    assert len(found) == 1, (family, found)
    kind, step, top = found[0]
    assert top == "fp16-overflow", (family, found)
    # at the first skip, as finely as the log can place it: a message between two lines is on
    # one of the interval's steps, a scale logged every N steps fell somewhere in those N
    assert CASCADE_AT - every < step <= CASCADE_AT + every // 2, (family, found)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_same_scaler_probing_is_quiet(family, tmp_path):
    log = read_run(write(tmp_path, FAMILIES[family](record("healthy"))))
    assert _incidents(log) == [], family


def _deepspeed(rows, every):
    return FAMILIES["deepspeed_stage1"](rows, every=every)


def test_a_cascade_whose_first_skip_opens_the_interval_is_no_probe(tmp_path):
    """The cascade's first skip (350) is on the line at 350; its next six messages, printed before
    the next line, are placed on that interval's last steps: no line between says the steps in
    between ran clean, so 350 is the cascade's start, not a routine probe before it."""
    log = read_run(write(tmp_path, _deepspeed(record("overflow"), 10)))
    th = Thresholds()
    events = scaler_events(log, th)
    assert [e.step for e in events.cascades] == [CASCADE_AT]
    assert scaler_events_reference(log, th).cascades == events.cascades


def test_a_probe_with_a_clean_line_after_it_is_still_a_probe(tmp_path):
    """A skip and its halving, then a line that says the steps after it ran clean, then the
    cascade: the cascade starts after the probe."""
    rows = record("overflow")
    for r in rows:                      # a probe 4 steps before the cascade, logged every step
        if r["step"] == CASCADE_AT - 4:
            r["skipped"] = 1
    lines = FAMILIES["mindspore"](rows)
    log = read_run(write(tmp_path, lines))
    cascades = scaler_events(log, Thresholds()).cascades
    assert [c.step for c in cascades] == [CASCADE_AT]


def test_a_scale_logged_less_often_than_it_grows(tmp_path):
    """icefall logs every 50 batches, GradScaler grows every 40: between two lines the scale may
    have doubled and halved; only the net fall shows (262144 at 350 -> 1024 at 400). The fall
    after the probe-sized one at 350 is the cascade; dated at 350, not at the line that saw it."""
    log = read_run(write(tmp_path, FAMILIES["icefall"](record("overflow"))))
    cascades = scaler_events(log, Thresholds()).cascades
    assert [c.step for c in cascades] == [CASCADE_AT]
    assert cascades[0].notes.scale_to == 1024.0


def test_a_scale_driven_to_its_floor_and_the_run_stops(tmp_path):
    """icefall's warnings while the scale keeps halving, then its exit: a persistent overflow."""
    lines = []
    scale = 1.0
    for b in range(0, 2000, 50):
        if b >= 1000:
            scale /= 4
        lines.append(f"Epoch 1, batch {b}, loss[loss=0.5, over 3000.00 frames. ], tot_loss[loss=0.5, over 600000.00 "
                     f"frames. ], batch size: 32, lr: 4.50e-02, grad_scale: {scale}")
        if scale < 0.01:
            lines.append(f"Grad scale is small: {scale}")
    lines.append(f"RuntimeError: grad_scale is too small, exiting: {scale / 4}")
    log = read_run(write(tmp_path, lines))
    found = _incidents(log)
    assert found and found[0][2] == "fp16-overflow" and 1000 <= found[0][1] <= 1050, found


def _megatron(it, loss, scale, skipped):
    """Megatron-LM's training_log fields (`loss scale: {:.1f}`, `number of skipped iterations: {:3d}`:
    the skips since the line before, the counter reset at every line)."""
    return (" iteration {:8d}/{:8d} |".format(it, 500) + " elapsed time per iteration (ms): 800.1 |"
            + " learning rate: {:.3E} |".format(1e-4) + " lm loss: {:.6E} |".format(loss)
            + " loss scale: {:.1f} |".format(scale) + " number of skipped iterations: {:3d} |".format(skipped))


def test_a_cascade_that_grows_until_the_run_stops_is_counted_per_line(tmp_path):
    """1, 2, 4, 8 and then 10 skips per line at the floor until the log ends: Megatron's counter
    is per line, not a cumulative one to difference (which read 1, 1, 2, 4, 2, 0, 0 and lost the
    steps skipped at the floor: the persistent overflow)."""
    from postmortem.diagnose.nan import skip_counts
    from postmortem.diagnose.scaler import persistent

    per_line = [0] * 30 + [1, 2, 4, 8, 10, 10, 10]
    lines, scale = [], 65536.0
    for i, k in enumerate(per_line):
        scale = max(scale / 2 ** k, 1.0)
        lines.append(_megatron((i + 1) * 10, 2.0 - 0.01 * i + (5.0 if k >= 8 else 0.0), scale, k))
    log = read_run(write(tmp_path, lines))
    assert skip_counts(log).tolist() == [float(k) for k in per_line]
    floor = [e for e in persistent(log, Thresholds(), skip_counts(log)) if e.notes.persistent == "floor"]
    assert [e.step for e in floor] == [350] and floor[0].notes.skipped == 30      # 10 a line at 1


def _deepspeed_bleed(scales: list[float], every: int = 100, stop: bool = True) -> list[str]:
    """A DeepSpeed run (v0.10+ loss_scaler.py's OVERFLOW line, the engine's log_dist step line and
    the HF Trainer's dict) overflowing once every `every` steps at the scales given (the scale each
    overflow attempted), then, where `stop`, its exit at the minimum."""
    lines, skipped, k = [], 0, 0
    for s in range(1, every * (len(scales) + 2)):
        if s % every == every // 2 and k < len(scales):
            lines.append("[2024-01-01 10:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! "
                         f"Rank 0 Skipping step. Attempted loss scale: {int(scales[k])}, reducing to "
                         f"{int(max(scales[k] / 2, 1))}")
            skipped, k = skipped + 1, k + 1
        if s % 10 == 0:
            lines.append(f"[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, "
                         f"skipped={skipped}, lr=[0.0001], mom=[(0.9, 0.999)]")
            lines.append(str({"loss": round(2.0 - s * 2e-4, 4), "learning_rate": 0.0001, "epoch": 0.1}))
    if stop:
        lines.append("Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.")
    return lines


def test_a_scale_bled_to_its_floor_one_overflow_at_a_time(tmp_path):
    """One overflow every 100 steps, never a growth between them (DeepSpeed's window is 1000):
    each looks like a routine probe, but the scale falls 65536 -> 1 and the run stops. A
    persistent overflow where the scale reached its floor."""
    log = read_run(write(tmp_path, _deepspeed_bleed([2.0 ** (16 - i) for i in range(16)])))
    found = _incidents(log)
    assert found == [("spike", 1550, "fp16-overflow")], found
    b3 = next(c for c in analyze(log).checks if c.id == "B3")
    assert b3.status == "fail" and "never grew back" in b3.detail and "65536" in b3.detail


@pytest.mark.parametrize("scales,stop", [
    ([65536.0] * 16, False),                                    # probes, the scale regrown before each
    ([2.0 ** (16 - i) for i in range(6)], False),               # a drift down to 2048 that holds
])
def test_probes_and_a_drift_that_holds_are_quiet(scales, stop, tmp_path):
    assert _incidents(read_run(write(tmp_path, _deepspeed_bleed(scales, stop=stop)))) == []
