"""Reader gaps left by the scale sessions, each from the framework's own format strings:
MindSpore Pangu's callback line keeps its loss, ColossalAI's `[n/N] Loss:` line has its step,
InternEvo's `grad_norm={'0_default': ..}` dict no longer loses the line's `loss_scale`, and
mindyolo's gradient-accumulation drop line is a skipped step."""

from __future__ import annotations

import math

import pytest

from postmortem.run import read_run
from postmortem.run.metriclines.overflow import find_event


def _read(tmp_path, lines: list[str]):
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return read_run(p).frame


# mindspore-ai/models official/nlp/Pangu_alpha/src/callbacks.py (LossCallBack.step_end)
PANGU = "time: {} local_rank: {}, epoch: {}, step: {}, loss is {}, overflow is {}, loss scale is {}"


def test_pangu_callback_line_keeps_its_loss_and_its_overflow(tmp_path):
    lines, scale = [], 65536.0
    for step in range(1, 31):
        overflow = step in (10, 11)
        if overflow:
            scale /= 2
        loss = math.nan if step == 20 else 7.25 - 0.01 * step
        lines.append(PANGU.format("2022-03-01 10:00:00", 0, 1, step, loss, overflow, scale))
    f = _read(tmp_path, lines).set_index("step")
    assert f.loc[1, "loss"] == pytest.approx(7.24) and f.loc[30, "loss"] == pytest.approx(6.95)
    assert math.isnan(f.loc[20, "loss"]) and f.loss.notna().sum() == 29      # the NaN row kept
    assert f.loc[10, "overflows"] == 1 and f.loc[11, "overflows"] == 1 and f.overflows.notna().sum() == 2
    assert f.loc[11, "loss_scale"] == 16384.0
    assert list(f.index) == list(range(1, 31))


def test_pangu_loss_printed_as_an_array(tmp_path):
    # a copy that prints the callback's loss array (`loss is [7.25]`) rather than its mean
    lines = [PANGU.format("2022-03-01 10:00:00", 0, 1, s, f"[{7.25 - 0.01 * s:.2f}]", False, 65536.0)
             for s in range(1, 11)]
    f = _read(tmp_path, lines).set_index("step")
    assert f.loc[5, "loss"] == pytest.approx(7.20) and f.loss.notna().sum() == 10


# hpcaitech/ColossalAI examples/language/gpt/gemini/train_gpt_demo.py (and opt, palm): logger.info(
# f"[{n + 1}/{NUM_STEPS}] Loss:{loss.item():.3f}, Step time: {step_time:.3f}s, TFLOPS: ..., FWD time:
# {fwd_time:.3f}s, BWD time: {bwd_time:.3f}s, OPTIM time: {optim_time:.3f}s", ranks=[0]), the memory line
# `get_mem_info(prefix=f"[{n + 1}/{NUM_STEPS}] Optimizer step ")` before it; colossalai's logger
# prints `colossalai - colossalai - INFO: ` in front
CAI = ("colossalai - colossalai - INFO: [{n}/{N}] Loss:{loss:.3f}, Step time: 1.234s, TFLOPS: 50.125, "
       "FWD time: 0.400s, BWD time: 0.700s, OPTIM time: 0.134s")
CAI_MEM = "colossalai - colossalai - INFO: [{n}/{N}] Optimizer step , GPU memory usage: 1234.56 MB, CPU memory usage: 3456.78 MB"


@pytest.mark.parametrize("prefix", ["", "[11/27/22 10:00:00] INFO     "])
def test_colossalai_n_of_N_is_the_step(prefix, tmp_path):
    lines = []
    for n in range(1, 21):
        loss = math.nan if n == 15 else 10.8 - 0.1 * n
        lines.append(prefix + CAI_MEM.format(n=n, N=20))
        lines.append(prefix + CAI.format(n=n, N=20, loss=loss))
    f = _read(tmp_path, lines).set_index("step")
    assert list(f.index) == list(range(1, 21))
    assert f.loc[3, "loss"] == pytest.approx(10.5) and math.isnan(f.loc[15, "loss"])


def test_colossalai_n_of_N_in_a_sentence_is_no_step(tmp_path):
    """Control: a fraction in prose (`[1/3] Loading shards`) is no counter: no name and colon after it."""
    from postmortem.run.metriclines.pairs import parse
    assert "iter" not in parse("[1/3] Loading checkpoint shards from disk").counters


def _internevo(step: int, loss: float, scale: float, groups: int) -> str:
    """InternEvo's metrics line (InternLM/InternEvo internlm/train/pipeline.py
    `record_current_batch_training_metrics`: `line += f"{key}={value} "`; grad_norm is the dict of
    the param groups' norms, `{'0_default': .., '1_fp32': ..}`), behind its logger's prefix."""
    norms = {"0_default": 1.25, "1_fp32": 0.0, "2_moe_ep_size_4": 0.138}
    keys = {"tflops": 180.5, "step": step, "loss": loss, "tgs (tokens/gpu/second)": 3012.45, "lr": 0.0003,
            "loss_scale": scale, "grad_norm": dict(list(norms.items())[:groups]), "micro_num": 4,
            "num_consumed_tokens": step * 8192, "inf_nan_skip_batches": 0, "num_samples_in_batch": 16,
            "largest_length": 2048, "largest_batch": 4, "smallest_batch": 4, "adam_beta2": 0.95,
            "fwd_bwd_time": 1.1}
    line = "".join(f"{k}={v} " for k, v in keys.items())
    return (f"2024-01-01 10:00:00,000\tINFO pipeline.py:413 in record_current_batch_training_metrics -- "
            f"{line}")


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_internevo_grad_norm_dict_keeps_the_loss_scale(groups, tmp_path):
    scales = [65536.0] * 5 + [32768.0] * 5
    f = _read(tmp_path, [_internevo(s, 7.0 - 0.1 * s, scales[s], groups) for s in range(10)])
    assert f.loss_scale.tolist() == scales
    assert f.loss.tolist() == pytest.approx([7.0 - 0.1 * s for s in range(10)])
    assert f.micro_num.tolist() == [4] * 10


# mindspore-lab/mindyolo mindyolo/utils/trainer_factory.py (Trainer.train_step, accumulate > 1), and its
# earlier forms (epochs and steps swapped; `Epoch: e, Step: i`), and train.py's StaticCell print
ACCUMULATE = {
    "trainer": "Epoch {e}/300, Step {i}/100, accumulate: 2, this step grad overflow, drop. Loss scale adjust to {s}",
    "swapped": "Epoch 300/{e}, Step 100/{i}, accumulate: 2, this step grad overflow, drop. Loss scale adjust to {s}",
    "colon": "Epoch: {e}, Step: {i}, accumulate: 2, this step grad overflow, drop. Loss scale adjust to {s}",
    "static cell": "Epoch: {e}, Step: {i}, this step grad overflow, drop. Cur loss scale is {s}",
}


def _mindyolo(step: int) -> str:
    return (f"2025-04-10 16:49:32,284 [INFO] Epoch 1/300, Step {step}/100, imgsize (640, 640), "
            f"loss: {2.5 - step / 1e3:.4f}, lbox: 0.1035, lobj: 0.0723, lcls: 0.1021, cur_lr: 0.008844999596476555")


@pytest.mark.parametrize("form", list(ACCUMULATE))
def test_mindyolo_accumulation_drop_is_found_in_every_form(form):
    message = ACCUMULATE[form].format(e=1, i=55, s=32768.0)
    ev = find_event(message)
    assert ev is not None and ev["dialect"] == "mindyolo.accumulate_drop" and ev["kind"] == "overflow"
    assert float(message[ev["scale"][0]:ev["scale"][1]]) == 32768.0


# (the swapped release prints its progress lines swapped too, `Step 100/i`: no step to place on)
@pytest.mark.parametrize("form", [f for f in ACCUMULATE if f != "swapped"])
def test_mindyolo_accumulation_drop_is_a_skipped_step(form, tmp_path):
    message = ACCUMULATE[form].format(e=1, i=55, s=32768.0)
    lines = []
    for s in range(10, 110, 10):
        lines.append(_mindyolo(s))
        if s == 50:
            lines.append(f"2025-04-10 16:54:20,197 [WARNING] {message}")
    f = _read(tmp_path, lines).set_index("step")
    assert f.overflows.sum() == 1 and f.overflows.notna().sum() == 1
    assert 50 < f.overflows.first_valid_index() <= 60
    assert f.loc[f.overflows.first_valid_index(), "loss_scale"] == 32768.0
    assert f.loss.notna().sum() == 10
