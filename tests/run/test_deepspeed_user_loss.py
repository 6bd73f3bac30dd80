"""A DeepSpeed log where the training script prints the loss: the engine's step/skipped/lr and
the script's loss in one table, on the engine's steps, NaN rows kept.

Lines are built from the format strings: the engine's `_report_progress`
(microsoft/DeepSpeed deepspeed/runtime/engine.py, v0.3.x to v0.14: `log_dist(f"step={step},
skipped={self.skipped_steps}, lr={lr}, mom={mom}", ranks=[0])`, label `global_steps + 1` in
`_take_model_step`) behind log_dist's logger prefix (deepspeed/utils/logging.py: v0.3
`logging.py:60`, v0.9+ `logging.py:96`); the fp16 loss scaler's
`[deepspeed] OVERFLOW! Rank {rank} Skipping step. Attempted loss scale: {prev}, reducing to {new}`
(deepspeed/runtime/fp16/loss_scaler.py, v0.10+); the scripts' own prints:
microsoft/DeepSpeedExamples DeepSpeed-Chat step1 main.py
`print(f"Epoch: {epoch}, Step: {step}, Rank: {torch.distributed.get_rank()}, loss = {loss}")`
(step: the dataloader's, restarting each epoch), training/cifar/cifar10_deepspeed.py
`print(f"[{epoch + 1 : d}, {i + 1 : 5d}] loss: {running_loss / args.log_interval : .3f}")`,
and the common `print(f"Epoch: {epoch} | Step: {step} | Loss: {loss.item():.4f}")` after
`model_engine.step()` with `step = model_engine.global_steps`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from postmortem.run import read_run, textlogs

PREFIX = {"v0.3": "[2021-03-01 10:00:00,123] [INFO] [logging.py:60:log_dist] [Rank 0] ",
          "v0.14": "[2024-05-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] "}


def _engine(release: str, step: int, skipped: int, lr: float) -> str:
    lrs, mom = [lr, lr], [(0.9, 0.95), (0.9, 0.95)]
    return PREFIX[release] + f"step={step}, skipped={skipped}, lr={lrs}, mom={mom}"


def _overflow(prev: float, new: float) -> str:
    return ("[2024-05-01 10:00:01,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] "
            f"OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {prev}, reducing to {new}")


def _losses(n: int, nan_at: int | None = None) -> list[float]:
    return [math.nan if k == nan_at else 3.0 - 0.01 * k for k in range(n)]


def _read(tmp_path, lines: list[str]):
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    assert textlogs.sniff(path)[0] == "deepspeed"
    run = read_run(path)
    return run.frame


@pytest.mark.parametrize("release", ["v0.3", "v0.14"])
def test_the_scripts_global_step_lines_keep_their_steps(release, tmp_path):
    # steps_per_print 10, the script prints model_engine.global_steps every 10 steps
    loss = _losses(10, nan_at=7)
    lines = []
    for k in range(1, 11):
        step = 10 * k
        lines.append(_engine(release, step, 0, 1e-4))
        lines.append(f"Epoch: 0 | Step: {step} | Loss: {loss[k - 1]:.4f}")
    frame = _read(tmp_path, lines)
    got = dict(zip(frame["step"], frame["loss"]))
    assert sorted(int(s) for s in got) == list(range(10, 101, 10))
    assert got[80] != got[80]                       # the NaN row is kept, on its step
    assert got[10] == pytest.approx(3.0) and got[100] == pytest.approx(2.91)
    assert dict(zip(frame["step"], frame["lr"]))[50] == pytest.approx(1e-4)
    assert len(frame) == 10                         # one row a step: engine and script together


def test_dataloader_steps_that_restart_each_epoch_go_on_the_engines_clock(tmp_path):
    # DeepSpeed-Chat step1: Step is the dataloader's (0..4 each epoch), the engine prints every 5
    lines, k = [], 0
    for epoch in range(3):
        for step in range(5):
            k += 1
            loss = math.nan if k == 12 else 2.0 - 0.01 * k
            lines.append(f"Epoch: {epoch}, Step: {step}, Rank: 0, loss = {loss}")
            if k % 5 == 0:      # the row is printed before model.step(); the engine's label
                lines.append(_engine("v0.14", k, 0, 3e-5))   # (global_steps + 1) during it
    frame = _read(tmp_path, lines)
    steps = [int(s) for s in frame["step"]]
    assert steps == sorted(steps), "no step goes back: the epochs do not read as restarts"
    got = dict(zip(frame["step"], frame["loss"]))
    assert sorted(int(s) for s in got) == list(range(16))    # 15 rows + the last engine line
    nan_steps = [int(s) for s, v in got.items() if v != v]
    # the 12th micro-batch (optimizer step 12, GA 1), between engine lines 10 and 15: within
    # one step of it (the script's print before or after step() is not in the log)
    # (step 15 is the engine's line alone: no loss logged there)
    assert set(nan_steps) - {15} in ({11}, {12})
    assert dict(zip(frame["step"], frame["lr"]))[15] == pytest.approx(3e-5)


def test_overflow_messages_and_the_scripts_loss_together(tmp_path):
    # cifar10_deepspeed's print every 2 micro-batches, fp16 overflows on steps 3 and 4
    lines = []
    skipped = 0
    for step in range(1, 9):
        if step in (3, 4):
            skipped += 1
            lines.append(_overflow(2.0 ** (17 - step), 2.0 ** (16 - step)))
        if step % 2 == 0:
            lines.append(_engine("v0.14", step, skipped, 1e-3))
            loss = math.nan if step == 4 else 2.3 - 0.01 * step
            lines.append(f"[ 1, {step : 5d}] loss: {loss : .3f}")
    frame = _read(tmp_path, lines)
    got = dict(zip(frame["step"], frame["loss"]))
    finite = {int(s): v for s, v in got.items() if v == v}
    assert sorted(finite) == [2, 6, 8]
    assert any(v != v for v in got.values())
    skipped_col = dict(zip(frame["step"], frame["skipped"]))
    assert np.nansum([v for v in skipped_col.values()]) == 2
    assert "loss_scale" in frame.columns


def test_without_the_scripts_lines_nothing_changes(tmp_path):
    lines = [_engine("v0.3", 10 * k, 0, 1e-4) for k in range(1, 6)]
    frame = _read(tmp_path, lines)
    assert "loss" not in frame.columns
    assert [int(s) for s in frame["step"]] == [10, 20, 30, 40, 50]


def test_a_tqdm_bar_with_the_loss_in_its_postfix(tmp_path):
    # the script's bar over its dataloader (tqdm/std.py format_meter: `{desc}: {percentage:3.0f}%|{bar}|
    # {n}/{total} [{elapsed}<{remaining}, {rate_fmt}{postfix}]`, set_postfix(loss=...)), redrawn with \r,
    # restarting each epoch; the engine prints every 4 steps between the frames
    frames, k = [], 0
    for epoch in range(2):
        for n in range(1, 9):
            k += 1
            loss = math.nan if k == 11 else 2.5 - 0.01 * k
            frames.append(f"Epoch {epoch}: {n * 100 // 8:3d}%|#####     | {n}/8 [00:0{n}<00:04,  2.00it/s, loss={loss:.3g}]")
            if k % 4 == 0:
                frames.append("\n" + _engine("v0.14", k, 0, 2e-4) + "\n")
    path = tmp_path / "train.log"
    path.write_text("\r".join(frames) + "\n")
    assert textlogs.sniff(path)[0] == "deepspeed"
    frame = read_run(path).frame
    steps = [int(s) for s in frame["step"]]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    got = dict(zip(frame["step"], frame["loss"]))
    assert sum(v == v for v in got.values()) == 15                 # 16 frames, one NaN
    assert [int(s) for s, v in got.items() if v != v and s in range(9, 13)] in ([10], [11])


def test_the_nan_the_script_printed_is_the_incident(tmp_path):
    """The whole command on a DeepSpeed log whose loss only the script prints: the NaN from step
    150 (with the scaler's overflows from there) is found on its step; main said 'no column
    looks like the loss' and found only the cascade."""
    import json
    import subprocess
    import sys

    lines, skipped, scale = [], 0, 65536
    for step in range(1, 301):
        if step >= 150:
            skipped += 1
            lines.append(_overflow(scale, max(scale // 2, 1)))
            scale = max(scale // 2, 1)
        if step % 10 == 0:
            lines.append(_engine("v0.14", step, skipped, 3e-4))
        loss = math.nan if step >= 150 else 3.0 * math.exp(-step / 200) + 0.5
        lines.append(f"Epoch: 0 | Step: {step} | Loss: {loss:.4f}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, "-m", "postmortem", "analyze", str(path), "--json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    incidents = json.loads(out.stdout)["incidents"]
    assert incidents[0]["kind"] == "nan" and incidents[0]["step"] == 150
    assert incidents[0]["hypotheses"][0]["pattern"] == "fp16-overflow"
