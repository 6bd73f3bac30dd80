"""Text-log dialects, each from lines shaped like the real tools print them."""


import numpy as np
import pytest

from postmortem.run import read_run


def log_file(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_megatron_nan_loss_omitted_and_rank_prefixes(tmp_path):
    lines = []
    for it in range(10, 60, 10):
        loss = "" if it == 40 else f" lm loss: {2.0 + it / 1000:E} |"
        nan = 10 if it == 40 else 0
        lines.append(f"[default7]: iteration {it:8d}/  100000 | consumed samples: {it * 8:12d} | "
                     f"learning rate: 3.000E-04 | global batch size:     8 |{loss} loss scale: 65536.0 "
                     f"| grad norm: {0.5 if it != 40 else float('nan')} | number of skipped iterations:"
                     f"   0 | number of nan iterations: {nan:3d} |")
    lines.insert(3, " validation loss at iteration 30 | lm loss value: 2.100000E+00 | lm loss PPL: 8.1E+00 |")
    log = read_run(log_file(tmp_path, "train.log", "\n".join(lines) + "\n"))
    f = log.frame
    assert log.source.format == "megatron"
    assert log.nan_mask("loss").tolist() == [False, False, False, True, False]   # omitted = NaN
    assert log.nan_mask("grad_norm")[3] and f.nan_iterations.iloc[3] == 10
    assert f.loss.iloc[0] == pytest.approx(2.01) and f.val_loss.iloc[2] == pytest.approx(2.1)
    assert f.lr.iloc[0] == pytest.approx(3e-4) and f.loss_scale.iloc[0] == 65536


def test_deepspeed_overflow_cascade(tmp_path):
    text = "\n".join([
        "[2023-04-18 01:46:52,554] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1",
        "[2023-04-18 01:46:52,554] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 3 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1",
        "[2023-04-18 01:46:53,259] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
        "[2023-04-18 01:46:59,142] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=2, lr=[9.6e-06, 9.6e-06], mom=[(0.9, 0.95), (0.9, 0.95)]",
        "[2023-04-18 01:47:06,590] [INFO] [logging.py:96:log_dist] [Rank 0] step=20, skipped=2, lr=[9.5e-06, 9.5e-06], mom=[(0.9, 0.95), (0.9, 0.95)]",
        "[2023-04-18 01:47:06,590] [INFO] [stage_1_and_2.py] [deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 32768.0, reducing to 16384.0",
        "[2023-04-18 01:47:07,590] [INFO] [logging.py:96:log_dist] [Rank 0] step=30, skipped=3, lr=[9.4e-06, 9.4e-06], mom=[(0.9, 0.95), (0.9, 0.95)]",
    ]) + "\n"
    log = read_run(log_file(tmp_path, "ds.log", text))
    f = log.frame
    assert log.source.format == "deepspeed"
    # each skipped step its own (the hysteresis skip on 9, the halving on 10, the steps just
    # before the step line after them); rank 3's line is not counted
    assert f.step.tolist() == [9, 10, 20, 30]
    assert f.overflows.fillna(0).tolist() == [1, 1, 0, 1]
    assert f.loss_scale.tolist()[1] == 32768 and f.loss_scale.tolist()[3] == 16384
    # hysteresis keeps the scale; the one before the first halving (its `Attempted loss scale`)
    # is kept on the step before it
    assert f.loss_scale.tolist()[0] == 65536
    assert f.skipped.dropna().tolist() == [2, 0, 1] and f.skipped_total.dropna().tolist() == [2, 2, 3]


def test_fairseq_json_and_simple(tmp_path):
    js = "\n".join(
        f'2021-01-01 00:00:0{i} | INFO | train_inner | {{"epoch": 1, "update": 0.00{i}, "loss": "{l}", '
        f'"nll_loss": "1.2", "lr": "0.0001", "gnorm": "{g}", "loss_scale": "128", "num_updates": "{i * 100}"}}'
        for i, (l, g) in enumerate([("9.1", "1.5"), ("8.2", "1.4"), ("nan", "inf"), ("7.9", "1.1")], 1))
    js += '\n2021-01-01 00:01:00 | INFO | valid | {"epoch": 1, "valid_loss": "7.5", "num_updates": "400"}\n'
    log = read_run(log_file(tmp_path, "fairseq.log", js))
    f = log.frame
    assert log.source.format == "fairseq" and f.step.tolist() == [100, 200, 300, 400]
    assert log.nan_mask("loss").tolist() == [False, False, True, False]
    assert np.isinf(f.grad_norm.iloc[2]) and f.loss_scale.iloc[0] == 128
    assert f.val_loss.iloc[3] == 7.5
    simple = "\n".join(f"| epoch 001:   {i} / 356 loss=9.{i}, nll_loss=8.0, ppl=256, gnorm=1.{i}, "
                       f"lr=0.0005, num_updates={i}, loss_scale=64" for i in range(1, 6))
    log = read_run(log_file(tmp_path, "simple.log", simple + "\n"))
    assert log.frame.loss.tolist() == [9.1, 9.2, 9.3, 9.4, 9.5] and log.frame.grad_norm.iloc[0] == 1.1


def test_nanogpt(tmp_path):
    text = ("step 0: train loss 10.9876, val loss 10.9912\n"
            + "".join(f"iter {i}: loss {3 - i / 100:.4f}, time 12.3ms, mfu {4.5 if i else -100.0:.2f}%\n"
                      for i in range(5))
            + "iter 5: loss nan, time 12.0ms, mfu 4.50%\n")
    log = read_run(log_file(tmp_path, "nanogpt.txt", text))
    f = log.frame
    assert log.source.format == "nanogpt"
    assert f.val_loss.iloc[0] == pytest.approx(10.9912) and f.loss.iloc[1] == pytest.approx(2.99)
    assert log.nan_mask("loss")[-1] and f.mfu_pct.iloc[0] == -100


def test_torchtitan_with_ansi_colours(tmp_path):
    text = "".join(f"[rank0]:[titan] 2024-09-03 16:02:57,123 - root - INFO - \x1b[31mstep: {i:2}  "
                   f"\x1b[32mloss: {9 - i:7.4f}  \x1b[33mgrad_norm: {1.2:7.4f}  \x1b[34mmemory: 30.1GiB"
                   f"(38.0%)  \x1b[35mtps: 12,345  \x1b[36mmfu: 40.1%\x1b[39m\n" for i in range(1, 6))
    log = read_run(log_file(tmp_path, "titan.log", text))
    f = log.frame
    assert log.source.format == "torchtitan"
    assert f.loss.tolist() == [8, 7, 6, 5, 4] and f.tps.iloc[0] == 12345
    assert f.grad_norm.iloc[0] == pytest.approx(1.2) and f.mfu_pct.iloc[0] == pytest.approx(40.1)


def test_hf_console_dicts_with_tqdm(tmp_path):
    text = ("  0%|          | 0/30 [00:00<?, ?it/s]\r 33%|███▎      | 10/30 [00:05<00:10]"
            "{'loss': 2.1, 'grad_norm': 1.5, 'learning_rate': 5e-05, 'epoch': 0.33}\n"
            "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4e-05, 'epoch': 0.67}\n"
            "{'eval_loss': 1.9, 'eval_runtime': 3.2, 'epoch': 0.67}\n"
            "{'loss': 1.8, 'grad_norm': 1.1, 'learning_rate': 3e-05, 'epoch': 1.0}\n"
            "{'train_runtime': 30.1, 'train_loss': 1.3, 'epoch': 1.0}\n")
    log = read_run(log_file(tmp_path, "console.log", text))
    f = log.frame
    assert log.source.format == "hf-console"
    assert f.step.tolist() == [1, 2, 3] and f.loss.tolist() == [2.1, 0.0, 1.8]
    assert log.nan_mask("grad_norm").tolist() == [False, True, False]
    assert f.val_loss.iloc[1] == 1.9 and log.source.extras["summary"]["train_loss"] == "1.3"


def _hf_frame(n: int, total: int) -> str:
    """tqdm's frame as format_meter writes it: `{l_bar}{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}]`."""
    return f"\r{100 * n // total:3d}%|{'#' * (10 * n // total):<10}| {n}/{total} [00:{n % 60:02d}<01:23,  3.10it/s]"


def _hf_console(steps: int = 60, every: int = 10, total: int = 200) -> str:
    """HF Trainer's console: ProgressCallback's bar updated at each step end, `on_log` writing
    each dict with `training_bar.write` (bar cleared, dict printed, bar redrawn), an evaluation
    bar of its own total, and a DeepSpeed scaler message glued to a frame."""
    out = ""
    for n in range(1, steps + 1):
        out += _hf_frame(n, total)
        if n == 33:
            out += ("[2023-05-01 10:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] "
                    "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768\n")
            out += _hf_frame(n, total)
        if n % every == 0:
            out += "\r" + " " * 80 + "\r{'loss': %.4f, 'learning_rate': 4.5e-05, 'epoch': %.2f}\n" % (2 - n / 100, n / total)
            out += _hf_frame(n, total)
        if n == 40:
            out += "".join(_hf_frame(k, 7) for k in range(1, 8))
            out += "\r{'eval_loss': 1.5, 'eval_runtime': 3.2, 'epoch': 0.2}\n" + _hf_frame(n, total)
    return out


def test_hf_console_steps_are_the_training_bars_counter(tmp_path):
    log = read_run(log_file(tmp_path, "console.log", _hf_console()))
    f = log.frame
    assert log.source.format == "hf-console"
    assert f.dropna(subset=["loss"]).step.tolist() == [10, 20, 30, 40, 50, 60]
    assert f.loc[f.step == 40, "val_loss"].iloc[0] == 1.5          # the eval bar's 1..7 is not the step
    assert f.loc[f.step == 33, "loss_scale"].iloc[0] == 32768       # glued to frame 33: step 33
    assert not any("ordinal" in w for w in log.source.warnings)
    assert "training bar" in log.source.extras["step_from"]


def test_llmc_resume_makes_segments(tmp_path):
    text = "".join(f"s:{i} trl:{3 - i / 1000:.4f} lr:0.000430 norm:0.27\n" for i in range(100))
    text += "".join(f"s:{i} trl:{3 - i / 1000:.4f} lr:0.000430 norm:0.27\n" for i in range(50, 120))
    log = read_run(log_file(tmp_path, "main.log", text))
    assert [(s["first_step"], s["last_step"]) for s in log.segments()] == [(0, 99), (50, 119)]


# Text logs not written in UTF-8: each generated in its encoding, read without --format.

def _pipe_log() -> str:
    lines = [f"| epoch   1 | {i:5d}/ 2983 batches | lr 20.0000 | ms/batch  7.65 | loss {12 - i / 1000:.2f} | "
             f"précision {i / 1000:.3f} | coût {i / 100:.2f}" for i in range(200, 1200, 200)]
    return "Début de l’entraînement — « run 7 »\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize("encoding, said", [
    ("latin-1", "cp1252"), ("cp1252", "cp1252"), ("utf-16", "UTF-16 LE"), ("utf-16-be", "UTF-16 BE"),
    ("utf-8-sig", None), ("utf-32", "UTF-32 LE"),
])
def test_text_log_in_any_encoding(tmp_path, encoding, said):
    text = _pipe_log()
    if encoding == "latin-1":
        text = text.replace("’", "'").replace("—", "-")      # latin-1 has neither
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data                               # the BOM Python leaves out for -be
    p = tmp_path / "train.log"
    p.write_bytes(data)
    log = read_run(p)
    f = log.frame
    assert f.step.tolist() == [200, 400, 600, 800, 1000]
    assert f.loss.tolist() == [11.8, 11.6, 11.4, 11.2, 11.0] and f["précision"].tolist()[-1] == 1.0
    assert f["coût"].tolist() == [2.0, 4.0, 6.0, 8.0, 10.0]
    warned = [w for w in log.source.warnings if "not UTF-8" in w]
    assert (said in warned[0]) if said else not warned


def test_utf16_deepspeed_log_read_by_its_line_reader(tmp_path):
    text = ("[2023-04-18 01:46:53,259] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 "
            "Skipping step. Attempted loss scale: 65536, reducing to 32768\n" +
            "".join(f"[2023-04-18 01:46:59,142] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, skipped=1, "
                    f"lr=[9.6e-06, 9.6e-06], mom=[(0.9, 0.95), (0.9, 0.95)]\n" for s in (10, 20, 30)))
    p = tmp_path / "ds.log"
    p.write_bytes(text.encode("utf-16"))
    log = read_run(p)
    # the attempted scale of the first message on the step before it (9)
    assert log.source.format == "deepspeed" and log.frame.step.tolist() == [9, 10, 20, 30]
    assert log.frame.loss_scale.tolist()[:2] == [65536, 32768] and log.frame.lr.dropna().tolist() == [9.6e-06] * 3
    assert any("UTF-16 LE" in w for w in log.source.warnings)


def test_utf8_log_with_a_stray_byte_stays_utf8(tmp_path):
    """A tqdm bar's UTF-8 blocks and one byte that is not UTF-8: read as UTF-8, the byte replaced."""
    lines = [f"Epoch 0:  50%|█████     | {i}/10 [00:01<00:01, loss={3 - i / 10:.2f}]" for i in range(1, 6)]
    data = ("\n".join(lines) + "\n").encode() + b"caf\xe9 step 6 loss=2.40\n"
    p = tmp_path / "train.log"
    p.write_bytes(data)
    log = read_run(p)
    assert log.frame.loss.tolist()[:5] == [2.9, 2.8, 2.7, 2.6, 2.5]
    assert any("UTF-8 with 1 byte(s)" in w for w in log.source.warnings)


@pytest.mark.parametrize("prefix", ["", "[rank3]: ", "2025-02-01 10:00:01.123 | INFO     | __main__:train:42 - ",
                                    " 40%|████      | 40/100 [00:10<00:15,  4.00it/s]\r"])
def test_a_name_printed_twice_in_one_line_keeps_both(tmp_path, prefix):
    # a custom trainer's print with two heads under one label (the loguru prefix is its
    # LOGURU_FORMAT; the tqdm frame tqdm/std.py format_meter's): the second value is no longer
    # lost to the first silently, it is loss1_2, and a NaN in it is kept
    lines = [f"{prefix}step {s} | loss1: {2 - s / 100:.4f} | loss1: {'nan' if s == 40 else f'{5 - s / 100:.4f}'} | lr: 1.0e-04"
             for s in range(10, 70, 10)]
    log = read_run(log_file(tmp_path, "train.log", "\n".join(lines) + "\n"))
    f = log.frame.set_index("step")
    assert f["loss1"].tolist() == pytest.approx([1.9, 1.8, 1.7, 1.6, 1.5, 1.4])
    assert f["loss1_2"].dropna().tolist() == pytest.approx([4.9, 4.8, 4.7, 4.5, 4.4])
    assert log.nan_mask("loss1_2").sum() == 1
    assert any("'loss1' is printed twice in one line" in w for w in log.source.warnings)
