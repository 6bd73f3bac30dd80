"""Four trainer families whose logs carry fp16 loss-scale and NaN trouble, read from lines built
from each one's own format strings: Coqui TTS's step blocks (`| > amp_scaler: 32768.0`, its
restarts), WeNet's `Batch {epoch}/{batch}` lines, SpeechBrain's FileTrainLogger epochs and
NVIDIA DLLogger as DeepLearningExamples prints it (`DLL ... - PARAMETER loss_scale : X`, the
`DLLL {json}` stream)."""

from __future__ import annotations

import json
import math

import pytest

from postmortem.run import read_run

BOLD, END, UNDER = "\033[1m", "\033[0m", "\033[4m"
INDENT = "     | > "


# --- Coqui TTS ---------------------------------------------------------------------------

def coqui_step(step: int, batches: int, global_step: int, losses: dict[str, float], release: str) -> str:
    """One step block. coqui-ai/Trainer v0.0.36 trainer/logging/console_logger.py
    `print_train_step`: "{}   --> TIME: {} -- STEP: {}/{} -- GLOBAL_STEP: {}{}\\n" then
    "{}{}: {}  ({})\\n".format(indent, key, str(value), str(avg)) per key (`amp_scaler`,
    `grad_norm` among them), `current_lr` without an average; coqui-ai/TTS v0.1
    TTS/utils/logging/console_logger.py: "{}   --> STEP: {}/{} -- GLOBAL_STEP: {}{}\\n" and
    "{}{}: {:.5f}  ({:.5f})\\n"."""
    if release == "trainer":
        text = "{}   --> TIME: {} -- STEP: {}/{} -- GLOBAL_STEP: {}{}\n".format(
            BOLD, "2023-05-01 10:00:00", step, batches, global_step, END)
        for key, value in losses.items():
            text += "{}{}: {}  ({})\n".format(INDENT, key, str(value), str(value))
        text += "{}{}: {} \n".format(INDENT, "current_lr", str(0.0001))
    else:
        text = "{}   --> STEP: {}/{} -- GLOBAL_STEP: {}{}\n".format(BOLD, step, batches, global_step, END)
        for key, value in losses.items():
            text += "{}{}: {:.5f}  ({:.5f})\n".format(INDENT, key, value, value)
        text += "{}{}: {:.5f} \n".format(INDENT, "current_lr", 0.0001)
    return "\n" + text


def coqui_epoch(epoch: int) -> str:
    return "\n{}{} > EPOCH: {}/{}{}".format(UNDER, BOLD, epoch, 1000, END) + "\n --> /runs/ljspeech" + \
        f"\n\n{BOLD} > TRAINING (2023-05-01 10:00:00) {END}"


def coqui_eval(loss: float, eval_steps: int = 2) -> str:
    """`print_eval_start`, `print_eval_step` ("{}   --> STEP: {}{}\\n" + the keys) and
    `print_epoch_end` ("{}{}:{} {} {}({}{})\\n": the means, each with its change)."""
    text = f"\n{BOLD} > EVALUATION {END}\n\n"
    for s in range(eval_steps):
        text += f"{BOLD}   --> STEP: {s}{END}\n" + "{}{}: {}  ({})\n".format(INDENT, "loss", str(loss), str(loss))
    text += "\n  {}--> EVAL PERFORMANCE{}\n".format(BOLD, END)
    text += "{}{}:{} {} {}({}{})\n".format(INDENT, "avg_loader_time", "", str(0.01), END, "+", str(0.0))
    text += "{}{}:{} {} {}({}{})\n".format(INDENT, "avg_loss", "\033[92m", str(loss), END, "", str(-0.01))
    return text


def coqui_log(tmp_path, n=200, nan_at=None, cascade_at=None, release="trainer", per_epoch=50,
              restart_at=None, restored=None):
    """Epochs of `per_epoch` steps, each closed by an eval; the scaler halving on 12 steps
    from `cascade_at`, the loss NaN from `nan_at`; a relaunch after `restart_at` restored
    from step `restored` (the steps go on from restored + 1)."""
    parts, scale = [], 32768.0
    steps = list(range(1, n + 1))
    if restart_at is not None:
        steps = list(range(1, restart_at + 1)) + list(range(restored + 1, n + 1))
    last = 0
    for g in steps:
        if g <= last:     # the relaunch: coqui-ai/Trainer restore_model
            parts.append(" > Restoring from %s ..." % f"checkpoint_{restored}.pth")
            parts += [" > Restoring Model...", " > Restoring Optimizer...", " > Restoring Scaler..."]
            parts.append(" > Model restored from step %i" % restored)
        if g <= last or (g - 1) % per_epoch == 0:
            parts.append(coqui_epoch((g - 1) // per_epoch))
        last = g
        if cascade_at is not None and cascade_at <= g < cascade_at + 12:
            scale /= 2
        loss = 3.0 - g / 200 + 0.01 * math.sin(g)
        if nan_at is not None and g >= nan_at:
            loss = float("nan")
        parts.append(coqui_step((g - 1) % per_epoch, per_epoch, g, {
            "loss": loss, "log_mle": 0.3 * loss, "loss_dur": 0.7 * loss, "amp_scaler": scale,
            "grad_norm": 1.5 if loss == loss else 0}, release))
        if g % per_epoch == 0:
            parts.append(coqui_eval(loss + 0.1))
    p = tmp_path / "trainer_0_log.txt"
    p.write_text("\n".join(parts) + "\n")
    return p


@pytest.mark.parametrize("release", ["trainer", "tts"])
def test_coqui_amp_scaler_is_the_loss_scale(release, tmp_path):
    f = read_run(coqui_log(tmp_path, cascade_at=120, release=release)).frame
    assert f.step.tolist() == list(range(1, 201))
    assert f.loss_scale.iloc[0] == 32768.0 and f.loss_scale.iloc[-1] == 8.0
    assert f[f.step == 120].loss_scale.iloc[0] == 16384.0


def test_coqui_eval_is_the_val_loss_and_counts_no_step(tmp_path):
    f = read_run(coqui_log(tmp_path, n=100)).frame
    # the eval's `--> STEP: 0` blocks are its batches: the steps stay the global ones
    assert f.step.tolist() == list(range(1, 101))
    ev = f.dropna(subset=["val_loss"])
    assert ev.step.tolist() == [50, 100]
    assert ev.val_loss.tolist() == pytest.approx([3.0 - 50 / 200 + 0.01 * math.sin(50) + 0.1,
                                                  3.0 - 100 / 200 + 0.01 * math.sin(100) + 0.1])
    assert f.loss.notna().all()


def test_coqui_nan_row_at_its_step(tmp_path):
    f = read_run(coqui_log(tmp_path, nan_at=140, release="tts")).frame
    assert f[f.loss.isna()].step.min() == 140


def test_coqui_restore_opens_a_segment(tmp_path):
    run = read_run(coqui_log(tmp_path, n=160, restart_at=120, restored=100))
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(1, 120), (101, 160)]
    assert run.source.extras["resumes"] == [{"step": 100, "dialect": "coqui.restored"}]
    assert [c["dialect"] for c in run.source.extras["checkpoints"]] == ["coqui.restoring"]


# --- WeNet -------------------------------------------------------------------------------

WENET_PREFIX = "2021-03-01 10:00:00,123 DEBUG "


def wenet_train(epoch: int, batch: int, loss: float, release: str) -> str:
    """v2.2.1 wenet/utils/executor.py `Executor.train`; v3.1.0 wenet/utils/train_utils.py `log_per_step`."""
    if release == "v2":
        return (WENET_PREFIX + 'TRAIN Batch {}/{} loss {:.6f} '.format(epoch, batch, loss)
                + 'loss_att {:.6f} '.format(0.7 * loss) + 'loss_ctc {:.6f} '.format(1.3 * loss)
                + 'lr {:.8f} rank {}'.format(0.0004, 0))
    return (WENET_PREFIX + 'TRAIN | ' + 'steps/sec {:.3f}| '.format(2.5)
            + 'Batch {}/{} loss {:.6f} '.format(epoch, batch, loss) + '{} {:.6f} '.format("loss_att", 0.7 * loss)
            + '{} {:.6f} '.format("loss_ctc", 1.3 * loss) + '{} {:.6f} '.format("th_accuracy", 0.5)
            + 'lr {} grad_norm {:.6f} rank {}'.format("{:.4e}".format(1e-3), 12.0 if loss == loss else loss, 0))


def wenet_cv(epoch: int, batch: int, loss: float, release: str) -> str:
    if release == "v2":
        return (WENET_PREFIX + 'CV Batch {}/{} loss {:.6f} '.format(epoch, batch, loss)
                + 'loss_att {:.6f} '.format(0.7 * loss) + 'loss_ctc {:.6f} '.format(1.3 * loss)
                + 'history loss {:.6f}'.format(loss) + ' rank {}'.format(0))
    return (WENET_PREFIX + 'CV | ' + 'steps/sec {:.3f}| '.format(9.5)
            + 'Batch {}/{} loss {:.6f} '.format(epoch, batch, loss) + '{} {:.6f} '.format("loss_att", 0.7 * loss)
            + '{} {:.6f} '.format("loss_ctc", 1.3 * loss))


def wenet_log(tmp_path, release, epochs=3, nan_at=None, load=False):
    """`epochs` epochs of 500 batches, a line every 100 (log_interval), then a CV pass."""
    lines = [WENET_PREFIX.replace("DEBUG", "INFO") + "using accumulate grad, new batch size is 4 times bigger than before"]
    if load:
        lines.append(WENET_PREFIX.replace("DEBUG", "INFO")
                     + 'Checkpoint: loading from checkpoint %s for GPU' % "exp/conformer/2.pt")
    first = 1 if release == "v3" else 0      # v3 prints batch_idx + 1
    for e in range(epochs):
        for b in range(0, 500, 100):
            step = e * 500 + b
            loss = 120.0 - step / 20
            if nan_at is not None and step >= nan_at:
                loss = float("nan")
            lines.append(wenet_train(e, b + first, loss, release))
        lines += [wenet_cv(e, b + first, 60.0 - e, release) for b in (0, 100)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("release", ["v2", "v3"])
def test_wenet_epoch_and_batch(release, tmp_path):
    run = read_run(wenet_log(tmp_path, release))
    f = run.frame
    first = 1 if release == "v3" else 0
    train = f.dropna(subset=["loss"])
    # the batch counts from 0 again each epoch: epoch x N + batch, one segment
    assert len(run.segments()) == 1 and train.step.is_monotonic_increasing
    assert len(train) == 15 and train.loss.iloc[0] == 120.0
    assert train.step.iloc[5] - train.step.iloc[0] == train.step.iloc[10] - train.step.iloc[5]
    # the CV lines are the eval's, at the last train step of their epoch
    assert f.dropna(subset=["val_loss"]).val_loss.tolist() == [60.0, 59.0, 58.0]
    assert "loss_att" in f and train.step.iloc[0] == first


@pytest.mark.parametrize("release", ["v2", "v3"])
def test_wenet_nan_at_its_batch(release, tmp_path):
    f = read_run(wenet_log(tmp_path, release, nan_at=700)).frame
    train = f.dropna(subset=["lr"])
    nan_rows = train[train.loss.isna()]
    # epoch 1, batch 200 is the first NaN: 200 steps after its epoch's first line (batch 0)
    assert nan_rows.step.iloc[0] == train.step.iloc[7] == train.step.iloc[5] + 200


def test_wenet_checkpoint_load_is_said(tmp_path):
    run = read_run(wenet_log(tmp_path, "v2", load=True))
    assert [c["dialect"] for c in run.source.extras["checkpoints"]] == ["wenet.load"]


# --- SpeechBrain -------------------------------------------------------------------------

SB_PREFIX = "2024-05-02 10:11:12,345 - "


def sb_item(key: str, value, dataset: str | None = None) -> str:
    """speechbrain/utils/train_logger.py `FileTrainLogger._item_to_string` (precision 2)."""
    if isinstance(value, float) and 1.0 < value < 100.0:
        value = f"{value:.{2}f}"
    elif isinstance(value, float):
        value = f"{value:.{2}e}"
    if dataset is not None:
        key = f"{dataset} {key}"
    return f"{key}: {value}"


def sb_epoch(epoch: int, train: float, valid: float) -> str:
    """`FileTrainLogger.log_stats`: meta, then " - " + each dataset's stats, through its logger."""
    summary = ", ".join([sb_item("epoch", epoch), sb_item("lr", 1.0)])
    summary += " - " + ", ".join([sb_item("loss", train, "train")])
    summary += " - " + ", ".join([sb_item("loss", valid, "valid"), sb_item("CER", 12.3 - epoch / 10, "valid")])
    return SB_PREFIX + "speechbrain.utils.train_logger - INFO - " + summary


def sb_log(tmp_path, epochs=10, warned_in=None, stopped=False):
    lines = [SB_PREFIX + "speechbrain.core - INFO - Gradscaler enabled: `True`",
             SB_PREFIX + "speechbrain.utils.checkpoints - INFO - "
             + f"Loading a checkpoint from {'results/save/CKPT+2024-05-01+22-10-11+00'}"]
    warn = SB_PREFIX + "speechbrain.core - WARNING - " + "Patience not yet exhausted."
    for e in range(1, epochs + 1):
        if e == warned_in:
            lines += [warn, warn]
        lines.append(sb_epoch(e, 2.5 - e / 20, 2.6 - e / 20))
    if stopped:     # check_loss_isfinite: nonfinite_patience (3) spent, then the ValueError
        lines += [warn] * 3 + ["Traceback (most recent call last):", '  File "train.py", line 400, in <module>',
                               "ValueError: " + "Loss is not finite and patience is exhausted. "
                               "To debug, wrap `fit()` with autograd's `detect_anomaly()`, e.g."]
    p = tmp_path / "log.txt"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_speechbrain_epoch_line_train_loss_is_the_loss(tmp_path):
    run = read_run(sb_log(tmp_path))
    f = run.frame
    assert f.step.tolist() == list(range(1, 11))
    assert f.loss.tolist() == pytest.approx([2.5 - e / 20 for e in range(1, 11)], abs=0.006)
    assert f.val_loss.iloc[0] == 2.55
    assert [c["dialect"] for c in run.source.extras["checkpoints"]] == ["speechbrain.load"]


def test_speechbrain_patience_exhausted_is_a_nan_in_the_epoch_under_way(tmp_path):
    f = read_run(sb_log(tmp_path, stopped=True)).frame
    assert f[f.loss.isna()].step.tolist() == [11]


def test_speechbrain_skipped_nonfinite_batches_are_that_epochs_nan(tmp_path):
    run = read_run(sb_log(tmp_path, warned_in=6))
    f = run.frame
    assert len(run.segments()) == 1 and f.step.tolist() == list(range(1, 11))
    assert f[f.loss.isna()].step.tolist() == [6]
    assert f.val_loss.notna().all()


# --- NVIDIA DLLogger (DeepLearningExamples) ---------------------------------------------

DLL_TS = "2020-06-01 12:00:00.000000"


def format_step(step) -> str:
    """DeepLearningExamples PyTorch/LanguageModeling/BERT/utils.py `format_step`."""
    if isinstance(step, str):
        return step
    s = ""
    if len(step) > 0:
        s += "Training Epoch: {} ".format(step[0])
    if len(step) > 1:
        s += "Training Iteration: {} ".format(step[1])
    if len(step) > 2:
        s += "Validation Iteration: {} ".format(step[2])
    return s


def dll_line(step, data: dict, backend: str, step_format=format_step) -> str:
    """NVIDIA/dllogger v1.0.0 `StdOutBackend.log` (default metric format "{} : {} {}") and
    `JSONStreamBackend.log` ("DLLL {}".format(json.dumps(...)))."""
    if backend == "json":
        return "DLLL {}".format(json.dumps(dict(timestamp="1591012800.0", datetime=DLL_TS + "+00:00",
                                                elapsedtime="12.5", type="LOG", step=step, data=data)))
    return "{}{} {}".format("DLL {} - ".format(DLL_TS), step_format(step),
                            " ".join("{} : {} {}".format(m, v, "") for m, v in data.items()))


def bert_log(tmp_path, backend, release="2020", n=200, nan_at=None, cascade_at=None):
    """run_pretraining.py: PARAMETER lines, then a line per step (log_freq 1), the scale after
    each overflow (`dllogger.log(step="PARAMETER", data={"loss_scale": ...})`)."""
    lines = [dll_line("PARAMETER", {"SEED": 42}, backend), dll_line("PARAMETER", {"train_start": True}, backend),
             dll_line("PARAMETER", {"batch_size_per_gpu": 64}, backend)]
    scale, skipped = 65536.0, 0
    for s in range(1, n + 1):
        loss = 7.5 - s / 100
        if nan_at is not None and s >= nan_at:
            loss = float("nan")
        overflow = cascade_at is not None and cascade_at <= s < cascade_at + 12
        skipped += overflow
        data = ({"average_loss": loss, "step_loss": loss - 0.1, "learning_rate": 0.0001} if release == "2020"
                else {"average_loss": loss, "learning_rate": 0.0001, "skipped_steps": skipped})
        lines.append(dll_line((0, s), data, backend))
        if overflow:
            scale /= 2
            lines.append(dll_line("PARAMETER", {"loss_scale": scale}, backend))
    p = tmp_path / ("dllogger.json" if backend == "json" else "bert.log")
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("backend", ["stdout", "json"])
@pytest.mark.parametrize("release", ["2020", "2022"])
def test_bert_loss_scale_after_each_overflow(backend, release, tmp_path):
    f = read_run(bert_log(tmp_path, backend, release, cascade_at=120)).frame
    assert f.step.tolist() == list(range(1, 201))
    scaled = f.dropna(subset=["loss_scale"])
    # the scale printed after the step line of the step that overflowed is that step's
    assert scaled.step.iloc[-1] == 131 and scaled.loss_scale.iloc[-1] == 16.0
    assert f[f.step == 120].loss_scale.iloc[0] == 32768.0
    assert f.loss.notna().all()


@pytest.mark.parametrize("backend", ["stdout", "json"])
def test_bert_nan_at_its_step_and_a_clean_log_has_no_scale(backend, tmp_path):
    f = read_run(bert_log(tmp_path, backend, nan_at=150)).frame
    assert f[f.loss.isna()].step.min() == 150
    assert "loss_scale" not in f and "SEED" not in f


def test_dllogger_json_parameters_are_no_rows(tmp_path):
    f = read_run(bert_log(tmp_path, "json", n=20)).frame
    assert f.step.tolist() == list(range(1, 21)) and "train_start" not in f


def tacotron2_log(tmp_path, nan_in=None):
    """Tacotron2 train.py: `DLLogger.log(step=(epoch, i), data={...})`, one key a line, by the
    default step format (`str(step)`); `raise Exception("loss is NaN")` before the loss is logged."""
    lines = []
    for epoch in range(3):
        for i in range(50):
            it = epoch * 50 + i
            lines.append(dll_line((epoch, i), {"glob_iter/iters_per_epoch": f"{it}/50"}, "stdout", str))
            if nan_in is not None and it == nan_in:
                lines += ["Traceback (most recent call last):", '  File "train.py", line 554, in <module>',
                          "Exception: loss is NaN"]
                break
            lines.append(dll_line((epoch, i), {"train_loss": 1.5 - it / 200}, "stdout", str))
            lines.append(dll_line((epoch, i), {"train_items_per_sec": 51234.5}, "stdout", str))
        else:
            lines.append(dll_line((epoch,), {"val_loss": 1.4 - epoch / 20}, "stdout", str))
            continue
        break
    p = tmp_path / "nvlog.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_tacotron2_epoch_batch_steps_and_its_nan_exception(tmp_path):
    run = read_run(tacotron2_log(tmp_path, nan_in=70))
    f = run.frame
    # step=(epoch, i): i counts from 0 again each epoch, the run is one segment
    assert len(run.segments()) == 1 and f.step.is_monotonic_increasing
    assert f.dropna(subset=["val_loss"]).step.tolist() == [49]
    # iteration 70 (epoch 1, batch 20) raised before its loss was logged: the step after 69
    assert f[f.loss.isna()].step.tolist() == [70] and f.loss.notna().sum() == 70


def nnunet_log(tmp_path, backend, nan_at=None):
    """nnUNet nn_unet.py `validation_epoch_end`: `log_metrics(step=self.current_epoch, metrics=...)`
    with Dice, Val Loss, Max Dice, Best epoch (the best so far: no step) and Train Loss."""
    lines, best = [], 0
    for epoch in range(30):
        best = epoch if epoch < 12 else best          # the best epoch stays put from epoch 12
        train = round(0.45 - epoch / 200, 4) if epoch != nan_at else float("nan")
        metrics = {"Dice": round(80 + epoch / 5, 2), "Val Loss": round(0.5 - epoch / 200, 4),
                   "Max Dice": round(80 + best / 5, 2), "Best epoch": best, "Train Loss": train}
        lines.append(dll_line(epoch, metrics, backend, str))
    p = tmp_path / ("logs.json" if backend == "json" else "nnunet.log")
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("backend", ["stdout", "json"])
def test_nnunet_epoch_is_the_step_not_the_best_epoch(backend, tmp_path):
    f = read_run(nnunet_log(tmp_path, backend, nan_at=20)).frame
    assert f.step.tolist() == list(range(30))
    # `Train Loss` beside `Val Loss` is the epoch's train loss, not the train split at an eval
    assert f.loss.iloc[5] == pytest.approx(0.425) and f.val_loss.iloc[5] == pytest.approx(0.475)
    assert f[f.loss.isna()].step.tolist() == [20]
