"""The loss-scale families nobody had named: BMTrain, ColossalAI's and InternLM's scalers,
ESPnet, icefall, MindSpore's model zoo, DeepSpeed v0.3's ZeRO stage 1, Megatron-LM v1's
FP16_Optimizer. Each log is written with the framework's own format strings around a real
GradScaler run (tests/scale_logs.py); the reader must find its skips and its scale where the
run had them. And the alias table: a loss scale or a skip counter behind any logger's prefix."""

import sys
from pathlib import Path

import numpy as np
import pytest

from postmortem.run import read_run
from postmortem.run.aliases import canonical_name
from postmortem.run.metriclines.overflow import find_event

sys.path.insert(0, str(Path(__file__).parents[1]))
from scale_logs import CASCADE_AT, FAMILIES, hysteresis, record, write  # noqa: E402

SKIPS = [r["step"] for r in record("overflow") if r["skipped"]]
# the families that say every skipped step (icefall's lines only log the scale)
SAY_EACH_SKIP = ["bmtrain", "colossalai", "internlm", "espnet", "mindspore", "mindspore_bert", "deepspeed_stage1",
                 "megatron_v1", "torch_npu"]


def _skips(log) -> np.ndarray:
    f = log.frame
    col = "overflows" if "overflows" in f else "skipped"
    return f[col].to_numpy(dtype=float, na_value=np.nan)


@pytest.mark.parametrize("family", SAY_EACH_SKIP)
def test_every_skip_of_the_real_run_is_read(family, tmp_path):
    log = read_run(write(tmp_path, FAMILIES[family](record("overflow"))))
    f = log.frame
    said = _skips(log)
    assert np.nansum(said) == len(SKIPS) == 13, (family, np.nansum(said))
    # no skip before the first one, none after the last: each on a step of its logging interval
    # (a message between two lines is placed on the interval's last steps)
    every = FAMILIES[family].__defaults__[0]
    steps = f.step.to_numpy()[np.nan_to_num(said) > 0]
    assert steps.min() >= SKIPS[0] and steps.max() <= SKIPS[-1] + every, (family, steps)
    # the scale after the cascade: the run's 1024-2048 (ColossalAI's hysteresis: every other skip)
    scale = f.loss_scale.to_numpy(dtype=float, na_value=np.nan)
    after = scale[(f.step.to_numpy() > CASCADE_AT) & np.isfinite(scale)]
    low = min(s for _, _, s in hysteresis(record("overflow"))) if family in ("colossalai", "internlm") else 1024.0
    assert after.min() == low, (family, after.min())


def test_icefall_batch_lines_give_the_steps_and_the_grad_scale(tmp_path):
    rows = record("overflow")
    log = read_run(write(tmp_path, FAMILIES["icefall"](rows)))
    f = log.frame
    assert f.step.tolist() == list(range(0, 500, 50))
    assert f.loss_scale.tolist() == [r["after"] for r in rows if r["step"] % 50 == 0]
    # and its warning and its exit name the scale
    assert find_event("2023-01-01 10:00:00,000 WARNING [train.py:880] (0/4) Grad scale is small: 0.0078125")[
        "dialect"] == "icefall.small"
    ev = find_event("RuntimeError: grad_scale is too small, exiting: 7.62939453125e-06")
    assert ev["dialect"] == "icefall.too_small" and ev["kind"] == "skipped"


def test_icefall_epochs_go_on_counting(tmp_path):
    lines = [f"Epoch {e}, batch {b}, loss[loss=0.5, over 3000.00 frames. ], tot_loss[loss=0.5, over 600000.00 "
             f"frames. ], batch size: 32, lr: 4.50e-02, grad_scale: 32.0" for e in (1, 2) for b in range(0, 500, 50)]
    steps = read_run(write(tmp_path, lines)).frame.step.tolist()
    assert steps[:10] == list(range(0, 500, 50)) and len(set(steps)) == 20 and steps == sorted(steps)


def test_espnet_prefix_and_its_rank_zero_warnings(tmp_path):
    """ESPnet's `[host] date (module:lineno) LEVEL:` is no metric; its skip warning comes from rank
    0 only, so the same words on consecutive lines are consecutive skips, not ranks."""
    warn = ("[gpu1] 2023-01-01 10:00:00,000 (trainer:640) WARNING: The grad norm is tensor(inf, "
            "device='cuda:0'). Skipping updating the model.")
    line = ("[gpu1] 2023-01-01 10:00:00,000 (trainer:732) INFO: 1epoch:train:{}-{}batch: iter_time=1.2e-04, "
            "loss={}, loss_scale={}")
    lines = [line.format(1, 100, 5.0, 65536.0), warn, warn, warn, warn, line.format(101, 200, 4.9, 4096.0)]
    log = read_run(write(tmp_path, lines))
    f = log.frame
    assert "trainer" not in f and f.step.max() == 200
    assert np.nansum(_skips(log)) == 4
    # a message every rank prints (ColossalAI's logger without `ranks`) said twice is still one
    lines = [line.format(1, 100, 5.0, 65536.0), "Found overflow. Skip step", "Found overflow. Skip step",
             line.format(101, 200, 4.9, 65536.0)]
    assert np.nansum(_skips(read_run(write(tmp_path / "ranks", lines)))) == 1


@pytest.mark.parametrize("line,kind,scale,prev", [
    ("Gradient overflow, change scale from 65536.000000 to 32768.000000", "overflow", 32768.0, 65536.0),
    ("Overflow occurs, the loss scale is adjusted to 32768.0", "scale", 32768.0, None),
    ("No overflow for consecutive 1000 steps, the loss scale is adjusted to 65536.0", "scale", 65536.0, None),
    ("Overflow occurs, please check it.", "skipped", None, None),
    ("[deepspeed] fp16 dynamic loss scale overflow! Rank 0 Skipping step. Attempted loss scale: 65536, "
     "reducing to 32768.0", "overflow", 32768.0, 65536.0),
    ("OVERFLOW! Skipping step. Attempted loss scale: 1.0E+00, reducing to 5.0E-01", "overflow", 0.5, 1.0),
    ("OVERFLOW within closure! Skipping step. Attempted loss scale: 1024.0, reducing to 512.0", "overflow", 512.0,
     1024.0),
    ("time: 2022-03-01 10:00:00 local_rank: 0, epoch: 1, step: 7, loss is 7.25, overflow is True, loss scale "
     "is 32768.0", "overflow", 32768.0, None),
])
def test_each_new_message_reads_its_scale(line, kind, scale, prev):
    ev = find_event(line)
    assert ev is not None and ev["kind"] == kind, (line, ev)
    for name, want in (("scale", scale), ("prev_scale", prev)):
        span = ev[name]
        assert (span is None) == (want is None) and (want is None or float(line[span[0]:span[1]]) == want)


@pytest.mark.parametrize("name", [
    "optim/loss_scale", "fp16/loss_scale", "train/grad_scale", "loss-scale", "Loss Scale", "lossscale", "scaler",
    "amp_scale", "cur_scale", "amp/scale", "grad_scaler/scale", "trainer.scaler", "Train/Samples/loss_scale",
    "optimizer/loss_scale"])
def test_a_loss_scale_behind_any_prefix(name):
    assert canonical_name(name) == "loss_scale"


@pytest.mark.parametrize("name,canon", [
    ("skipped_iter", "skipped"), ("train/num_skipped", "skipped"), ("num_skipped_steps", "skipped"),
    ("found_inf", "overflows"), ("overflow", "overflows"),
    # not a loss scale: a bare `scale` (an image's, an init's), Megatron's scale against samples
    ("scale", "scale"), ("image/scale", "image/scale"), ("loss-scale vs samples", "loss-scale vs samples"),
    ("model.scale", "model.scale"), ("lr_scale", "lr_scale")])
def test_skip_counters_and_what_is_no_scale(name, canon):
    assert canonical_name(name) == canon


def test_a_jsonl_with_a_prefixed_scale_and_an_overflow_flag(tmp_path):
    import json
    rows = [{"step": s, "train/loss": 2.0, "optim/loss_scale": 65536.0 / 2 ** max(0, min(s - 20, 8)),
             "overflow": 20 < s <= 28} for s in range(60)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    f = read_run(tmp_path).frame
    assert f.loss_scale.iloc[-1] == 256.0 and f.overflows.to_numpy(dtype=float).sum() == 8
