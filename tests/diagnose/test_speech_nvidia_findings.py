"""End to end on four trainer families' own lines (tests/run/test_speech_nvidia_families.py reads
them): Coqui TTS's `amp_scaler` and DeepLearningExamples BERT's `PARAMETER loss_scale` halving
in a run are an fp16-overflow cascade; WeNet's NaN, SpeechBrain's exhausted patience and
Tacotron2's `loss is NaN` are a NaN at their step; a clean log of each is quiet; Coqui's restore
is a restart the checklist counts."""

from __future__ import annotations

import math

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run

BOLD, END = "\033[1m", "\033[0m"
INDENT = "     | > "


def _check(result, cid: str):
    return next(c for c in result.checks if c.id == cid)


def coqui(tmp_path, n=300, cascade_at=None, restart_at=None, restored=None):
    """coqui-ai/Trainer console_logger.py `print_epoch_start` / `print_train_step` (str values),
    trainer.py `restore_model`'s ` > Model restored from step %i`."""
    steps = list(range(1, n + 1)) if restart_at is None else (
        list(range(1, restart_at + 1)) + list(range(restored + 1, n + 1)))
    parts, scale, last = [], 32768.0, 0
    for g in steps:
        if g <= last:
            parts += [" > Restoring from %s ..." % f"checkpoint_{restored}.pth", " > Model restored from step %i" % restored]
        if g <= last or (g - 1) % 100 == 0:
            parts.append("\n{}{} > EPOCH: {}/{}{}".format("\033[4m", BOLD, (g - 1) // 100, 1000, END))
        last = g
        if cascade_at is not None and cascade_at <= g < cascade_at + 10:
            scale /= 2
        loss = 3.0 * math.exp(-g / 150) + 0.5 + 0.01 * math.sin(g)
        text = "{}   --> TIME: {} -- STEP: {}/{} -- GLOBAL_STEP: {}{}\n".format(
            BOLD, "2023-05-01 10:00:00", (g - 1) % 100, 100, g, END)
        for key, value in {"loss": loss, "amp_scaler": scale, "grad_norm": 1.5}.items():
            text += "{}{}: {}  ({})\n".format(INDENT, key, str(value), str(value))
        parts.append("\n" + text + "{}{}: {} \n".format(INDENT, "current_lr", str(0.0001)))
    p = tmp_path / "trainer_0_log.txt"
    p.write_text("\n".join(parts) + "\n")
    return p


def bert(tmp_path, n=300, cascade_at=None):
    """DeepLearningExamples BERT run_pretraining.py through dllogger's StdOutBackend (utils.py
    `format_step`), the scale after each overflow as a PARAMETER line."""
    lines, scale = [], 65536.0
    for s in range(1, n + 1):
        loss = 7.5 * math.exp(-s / 200) + 1.5 + 0.01 * math.sin(s)
        lines.append("DLL 2020-06-01 12:00:00.000000 - " + "Training Epoch: {} ".format(0)
                     + "Training Iteration: {} ".format(s) + " " + " ".join(
                         "{} : {} {}".format(k, v, "") for k, v in
                         {"average_loss": loss, "step_loss": loss, "learning_rate": 0.0001}.items()))
        if cascade_at is not None and cascade_at <= s < cascade_at + 10:
            scale /= 2
            lines.append("DLL 2020-06-01 12:00:00.000000 - " + "PARAMETER" + " " + "{} : {} {}".format(
                "loss_scale", scale, ""))
    p = tmp_path / "bert.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def wenet(tmp_path, nan_at=None):
    """wenet v2.2.1 executor.py: 'TRAIN Batch {}/{} loss {:.6f} ' ... 'lr {:.8f} rank {}'."""
    lines = []
    for e in range(4):
        for b in range(0, 1000, 50):
            step = e * 1000 + b
            loss = 80.0 * math.exp(-step / 1500) + 20.0 + 0.2 * math.sin(step)
            if nan_at is not None and step >= nan_at:
                loss = float("nan")
            lines.append("2021-03-01 10:00:00,123 DEBUG " + 'TRAIN Batch {}/{} loss {:.6f} '.format(e, b, loss)
                         + 'loss_att {:.6f} '.format(loss * 0.7) + 'lr {:.8f} rank {}'.format(0.0004, 0))
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def speechbrain(tmp_path, stopped=False):
    """speechbrain FileTrainLogger epoch lines; core.py's exhausted patience."""
    lines = []
    for e in range(1, 31):
        lines.append("epoch: {}, lr: {:.2e} - train loss: {:.2f} - valid loss: {:.2f}, valid CER: {:.2f}".format(
            e, 8e-4, 1.2 + 30 / (e + 10), 1.3 + 30 / (e + 10), 10 + 20 / e))
    if stopped:
        lines += ["speechbrain.core - Patience not yet exhausted."] * 3
        lines.append("ValueError: Loss is not finite and patience is exhausted. To debug, wrap `fit()` with "
                     "autograd's `detect_anomaly()`, e.g.")
    p = tmp_path / "train_log.txt"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_coqui_amp_scaler_cascade_is_fp16_overflow(tmp_path):
    result = analyze(read_run(coqui(tmp_path, cascade_at=200)))
    assert _check(result, "B3").status == "fail"
    inc = result.incidents[0]
    assert inc.step == 200 and inc.hypotheses[0].pattern == "fp16-overflow"


def test_bert_loss_scale_cascade_is_fp16_overflow(tmp_path):
    result = analyze(read_run(bert(tmp_path, cascade_at=200)))
    assert _check(result, "B3").status == "fail"
    inc = result.incidents[0]
    assert inc.step == 200 and inc.hypotheses[0].pattern == "fp16-overflow"


def test_clean_logs_of_each_family_are_quiet(tmp_path):
    for i, make in enumerate((coqui, bert, wenet, speechbrain)):
        d = tmp_path / str(i)
        d.mkdir()
        run = read_run(make(d))
        result = analyze(run)
        assert result.incidents == [], make.__name__
        assert run.metrics and "loss" in run.metrics     # read, with its loss: quiet for what it is
        assert _check(result, "B3").status != "fail"


def test_wenet_nan_is_found_at_its_batch(tmp_path):
    run = read_run(wenet(tmp_path, nan_at=2300))
    inc = analyze(run).incidents[0]
    assert inc.kind == "nan"
    # epoch 2, batch 300: 300 steps after its epoch's first line
    first_of_epoch2 = run.frame.step.iloc[40]
    assert inc.step == first_of_epoch2 + 300


def test_speechbrain_exhausted_patience_is_a_nan_in_the_next_epoch(tmp_path):
    inc = analyze(read_run(speechbrain(tmp_path, stopped=True))).incidents[0]
    assert inc.kind == "nan" and inc.step == 31


def test_coqui_restore_is_a_restart_the_checklist_counts(tmp_path):
    run = read_run(coqui(tmp_path, n=300, restart_at=220, restored=200))
    assert len(run.segments()) == 2
    assert run.source.extras["resumes"] == [{"step": 200, "dialect": "coqui.restored"}]
    result = analyze(run)
    assert _check(result, "B0").status == "fail"
