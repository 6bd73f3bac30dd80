"""Logs of the loss-scale families, written with each framework's own format strings around a
real scaler run: `tests/data/scale/gradscaler-*.json` are a real `torch.amp.GradScaler`
(growth interval 40, initial scale 65536) on the second trainer's fp16 runs (seed 2, TUNING):
`overflow`, a cascade from step 350 (13 skips, the loss up from 1 to ~47); `healthy`, one
routine probe (a skip and a halving) after each growth.

A row's `scale` is the scale that step ran with, `skipped` whether its update was skipped; the
scale after a step is the next row's. Each writer prints a framework's messages for a skipped
step before that step's progress line (the scaler speaks inside the step, the trainer after it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

DATA = Path(__file__).parent / "data" / "scale"
CASCADE_AT = 350          # the first skip of the cascade in `overflow`


def record(name: str) -> list[dict]:
    """The run's rows: step, loss, scale (the one the step ran with), skipped, after (the scale
    after the step)."""
    d = json.loads((DATA / f"gradscaler-{name}.json").read_text())
    rows = [dict(step=s, loss=l, scale=c, skipped=k) for s, l, c, k in
            zip(d["step"], d["loss"], d["scale"], d["skipped"])]
    for r, nxt in zip(rows, rows[1:] + rows[-1:]):
        r["after"] = nxt["scale"] if nxt is not r else r["scale"] / (2 if r["skipped"] else 1)
    return rows


def write(tmp: Path, lines: Iterator[str], name: str = "train.log") -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / name).write_text("".join(line + "\n" for line in lines))
    return tmp


def hysteresis(rows: list[dict], interval: int = 40, keep: int = 2) -> Iterator[tuple[dict, str | None, float]]:
    """ColossalAI's / InternLM's `DynamicGradScaler.update` (hysteresis 2, backoff 0.5, growth 2
    every `interval` clean steps) driven by the real run's overflows: per row, (row, what it
    did: 'backoff' / 'growth' / None, the scale after it)."""
    scale, hyst, growth = 65536.0, 0, 0
    for r in rows:
        did = None
        if r["skipped"]:
            hyst, growth = hyst + 1, 0
            if hyst >= keep:
                scale, did = scale / 2, "backoff"
        else:
            growth += 1
            if growth == interval:
                growth, hyst, scale, did = 0, 0, scale * 2, "growth"
        yield r, did, scale


def bmtrain(rows, every=10):
    """OpenBMB/BMTrain v0.2 optim_manager.py; CPM-Bee's `| Iter: ... | loss: ... | lr: ..., scale: ...`."""
    for r in rows:
        if r["skipped"]:
            yield "Gradient overflow, change scale from %lf to %lf" % (r["scale"], r["scale"] / 2)
        if r["step"] % every == 0:
            yield "| Iter: {:6d} | loss: {:.4f} | lr: {:.4e}, scale: {:10.4f} | time: {:.4f}".format(
                r["step"], r["loss"], 1e-4, r["after"], 1.25)


def colossalai(rows, every=10):
    """ColossalAI's DynamicGradScaler (hysteresis 2) and low-level ZeRO's skip; the tqdm bar of its
    examples (examples/language/llama pretrain.py: `pbar.set_postfix({"loss": ...})`)."""
    for r, did, scale in hysteresis(rows):
        if did == "backoff":
            yield f"Overflow occurs, the loss scale is adjusted to {scale}"
        elif did == "growth":
            yield f"No overflow for consecutive {40} steps, the loss scale is adjusted to {scale}"
        if r["skipped"]:
            yield "Found overflow. Skip step"
        if r["step"] % every == 0:
            yield (f"Epoch 0: {r['step'] * 100 // 500:3d}%|#######   | {r['step']}/500 [01:40<00:43,  3.50it/s, "
                   f"loss={r['loss']:.4g}]")


def internlm(rows, every=10):
    """InternLM's DynamicGradScaler (hysteresis 2), HybridZeroOptimizer's skip, and its metrics
    line (InternLM v0.2 train.py `record_current_batch_training_metrics`: `f"{key}={value} "` for
    tflops, step, loss, `tgs (tokens/gpu/second)`, lr, loss_scale, grad_norm (a float before the
    per-group dict), micro_num, ...)."""
    for r, did, scale in hysteresis(rows):
        if did == "backoff":
            yield f"2023-07-01 10:00:00,000\tWARNING hybrid_zero_optim.py:582 in step -- Overflow occurs, the loss scale is adjusted to {scale}"
        if r["skipped"]:
            yield "2023-07-01 10:00:00,000\tWARNING hybrid_zero_optim.py:590 in step -- Overflow occurs, please check it."
        if r["step"] % every == 0:
            yield (f"2023-07-01 10:00:00,000\tINFO train.py:317 in record_current_batch_training_metrics -- "
                   f"tflops=180.5 step={r['step']} loss={r['loss']} tgs (tokens/gpu/second)=3012.45 lr=0.0003 "
                   f"loss_scale={scale} grad_norm=1.2 micro_num=4 num_consumed_tokens={r['step'] * 8192} "
                   f"inf_nan_skip_batches=0")


def espnet(rows, every=20):
    """ESPnet2's skip warning and its reporter line (`loss_scale=` when a GradScaler runs)."""
    for r in rows:
        if r["skipped"]:
            yield ("[host] 2023-01-01 10:00:00,000 (trainer:640) WARNING: The grad norm is "
                   "tensor(inf, device='cuda:0'). Skipping updating the model.")
        if r["step"] and r["step"] % every == 0:
            yield (f"[host] 2023-01-01 10:00:00,000 (trainer:732) INFO: 1epoch:train:{r['step'] - every + 1}-"
                   f"{r['step']}batch: iter_time=1.234e-04, forward_time=0.105, loss_ctc={r['loss'] * 1.5:.3f}, "
                   f"loss={r['loss']:.3f}, backward_time=0.100, optim_step_time=0.051, "
                   f"optim0_lr0=1.000e-04, train_time=1.502, loss_scale={r['after']:.3f}")


def icefall(rows, every=50):
    """icefall's batch line (`grad_scale: {scaler._scale.item()}`), every `log_interval` batches,
    and its warning below 0.01."""
    for r in rows:
        if r["step"] % 100 == 0 and r["after"] < 0.01:
            yield f"2023-01-01 10:00:00,000 WARNING [train.py:880] (0/4) Grad scale is small: {r['after']}"
        if r["step"] % every == 0:
            yield (f"2023-01-01 10:00:00,000 INFO [train.py:886] (0/4) Epoch 1, batch {r['step']}, "
                   f"loss[loss={r['loss']:.4g}, simple_loss={r['loss'] * 0.8:.4g}, over 3000.00 frames. ], "
                   f"tot_loss[loss={r['loss']:.4g}, over 600000.00 frames. ], batch size: 32, "
                   f"lr: {4.5e-2:.2e}, grad_scale: {r['after']}")


def mindspore(rows, every=1):
    """The MindSpore model zoo's LossCallBack: loss, overflow and scale every step."""
    for r in rows:
        if r["step"] % every == 0:
            yield ("time: {} local_rank: {}, epoch: {}, step: {}, loss is {}, overflow is {}, loss scale is {}"
                   .format("2022-03-01 10:00:00", 0, 1, r["step"], r["loss"], bool(r["skipped"]), r["after"]))


def mindspore_bert(rows, every=1):
    """The MindSpore BERT recipe's LossCallBack: `str(net_outputs)`, (loss, overflow, scale) Tensors."""
    for r in rows:
        if r["step"] % every == 0:
            yield ("epoch: {}, step: {}, outputs are {}".format(
                1, r["step"], f"(Tensor(shape=[1], dtype=Float32, value= [ {r['loss']:.8e}]), Tensor(shape=[], "
                f"dtype=Bool, value= {bool(r['skipped'])}), Tensor(shape=[], dtype=Float32, value= {int(r['after'])}))"))


def deepspeed_stage1(rows, every=10):
    """DeepSpeed v0.3's ZeRO stage 1 overflow line and the engine's `step=, skipped=` line (no loss)."""
    skipped = 0
    for r in rows:
        if r["skipped"]:
            skipped += 1
            yield ("[deepspeed] fp16 dynamic loss scale overflow! Rank 0 Skipping step. Attempted loss scale: "
                   f"{int(r['scale'])}, reducing to {r['after']}")
        if r["step"] and r["step"] % every == 0:
            yield f"[Rank 0] step={r['step']}, skipped={skipped}, lr=[0.0001], mom=[(0.9, 0.999)]"


def megatron_v1(rows, every=10):
    """Megatron-LM v1's FP16_Optimizer message and its iteration line (`loss scale: {:.1f}`)."""
    skipped = 0
    for r in rows:
        if r["skipped"]:
            skipped += 1
            yield f"OVERFLOW! Skipping step. Attempted loss scale: {r['scale']}, reducing to {r['after']}"
        if r["step"] and r["step"] % every == 0:
            yield (" iteration {:8d}/{:8d} |".format(r["step"], 500) + " elapsed time per iteration (ms): 800.1 |"
                   + " learning rate: {:.3E} |".format(1e-4) + " lm loss: {:.6E} |".format(r["loss"])
                   + " loss scale: {:.1f} |".format(r["after"]) + " number of skipped iterations: {:3d} |".format(skipped))
            skipped = 0


def paddlefleetx(rows, every=10):
    """PaddleFleetX's training_step_end line: `loss_scale: %.9f,` and `found_inf: %.0f` (the logged
    step's own flag, not the interval's)."""
    for r in rows:
        if r["step"] % every == 0:
            yield ("[2023-01-01 10:00:00,000] [    INFO] - [train] epoch: [%d/%d], batch: [%d/%d], loss: %.9f, "
                   "avg_batch_cost: %.5f sec, speed: %.2f step/s, ips_total: %.0f tokens/s, ips: %.0f tokens/s, "
                   "%s learning rate: %.5e, found_inf: %.0f"
                   % (0, 1, r["step"], 500, r["loss"], 0.5, 2.0, 8000, 1000, "loss_scale: %.9f," % r["after"],
                      1e-4, r["skipped"]))


def torch_npu(rows, every=10):
    """Ascend torch_npu's GradScaler (Ascend/pytorch torch_npu/npu/amp/grad_scaler.py: `print("Gradient
    overflow. Skipping step")` in step, `"Loss scaler reducing loss scale to {}"` / `"... increasing ..."`
    in update) under the PyTorch ImageNet example's ProgressMeter line that the Ascend ModelZoo scripts
    print (`Epoch: [0][ 10/500]\tTime ...\tLoss ...`)."""
    for r in rows:
        if r["skipped"]:
            yield "Gradient overflow. Skipping step"
            yield "Loss scaler reducing loss scale to {}".format(r["after"])
        elif r["after"] > r["scale"]:
            yield "Loss scaler increasing loss scale to {}".format(r["after"])
        if r["step"] and r["step"] % every == 0:
            yield ("Epoch: [0][{:3d}/500]\tTime  0.131 ( 0.135)\tData  0.002 ( 0.003)\tLoss {:.4e} ({:.4e})\t"
                   "Acc@1  40.62 ( 33.63)\tAcc@5  66.41 ( 57.94)".format(r["step"], r["loss"], r["loss"]))


FAMILIES: dict[str, Callable] = {
    "bmtrain": bmtrain, "colossalai": colossalai, "internlm": internlm, "espnet": espnet,
    "icefall": icefall, "mindspore": mindspore, "mindspore_bert": mindspore_bert, "deepspeed_stage1": deepspeed_stage1,
    "megatron_v1": megatron_v1, "paddlefleetx": paddlefleetx,
    "torch_npu": torch_npu,
}
