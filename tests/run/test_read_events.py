"""The frameworks' messages kept as the run's events: every halving its own value, on the
step it belongs to, in the general reader and the DeepSpeed / fairseq line readers alike."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from postmortem.run import read_run

PREFIX = "[2024-01-01 10:00:0{i},000] [INFO] [loss_scaler.py:183:update_scale] "
DS = "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {a}, reducing to {b}"
HALVINGS = [(65536, 32768), (32768, 16384), (16384, 8192), (8192, 4096), (4096, 2048)]


def _write(tmp_path, name, lines):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_log_of_messages_alone_is_a_cascade_of_five(tmp_path):
    lines = [PREFIX.format(i=i) + DS.format(a=a, b=b) for i, (a, b) in enumerate(HALVINGS)]
    run = read_run(_write(tmp_path, "ds.log", lines))
    f = run.frame
    # the first message's attempted scale is kept on the step before it: five halvings, not four
    assert f.step.tolist() == [0, 1, 2, 3, 4, 5]
    assert f.loss_scale.tolist() == [65536, 32768, 16384, 8192, 4096, 2048]
    assert f.overflows.fillna(0).tolist() == [0] + [1] * 5 and f.skipped.fillna(0).tolist() == [0] + [1] * 5
    assert any("no step line" in w for w in run.source.warnings)


def test_fairseq_notes_alone(tmp_path):
    lines = [f"2023-06-13 17:37:4{i} | INFO | fairseq.trainer | NOTE: gradient overflow detected, "
             f"ignoring gradient, setting loss scale to: {b}.0" for i, (_, b) in enumerate(HALVINGS)]
    f = read_run(_write(tmp_path, "fs.log", lines)).frame
    assert f.loss_scale.tolist() == [32768, 16384, 8192, 4096, 2048]


def test_five_halvings_between_two_progress_lines(tmp_path):
    lines = ["iteration 100 | loss 2.50 | lr 1.0E-04"]
    lines += [PREFIX.format(i=i) + DS.format(a=a, b=b) for i, (a, b) in enumerate(HALVINGS)]
    lines += ["iteration 110 | loss 2.40 | lr 1.0E-04", "iteration 120 | loss 2.30 | lr 1.0E-04"]
    run = read_run(_write(tmp_path, "mixed.log", lines))
    f = run.frame.set_index("step")
    # the steps just before the line after them, one each
    assert f.loss_scale.dropna().index.tolist() == [105, 106, 107, 108, 109, 110]
    assert f.loss_scale.dropna().tolist() == [65536, 32768, 16384, 8192, 4096, 2048]
    assert f.overflows.sum() == 5 and f.loc[110, "loss"] == 2.40
    assert run.source.extras["events_placed"]


def test_more_halvings_than_steps_share_one(tmp_path):
    lines = ["step 10 | loss 2.5"] + [DS.format(a=a, b=b) for a, b in HALVINGS] + ["step 12 | loss 2.4"]
    run = read_run(_write(tmp_path, "crowd.log", lines))
    f = run.frame.set_index("step")
    assert f.overflows.sum() == 5 and f.loc[11, "overflows"] == 4 and f.loc[12, "loss_scale"] == 2048
    assert any("outnumber the steps" in w for w in run.source.warnings)


def test_a_scale_of_inf_nan_or_zero_is_read(tmp_path):
    lines = ["step 10 | loss 2.5", DS.format(a="inf", b="inf"), "step 20 | loss 2.4",
             "NOTE: overflow detected, setting loss scale to: nan", "step 30 | loss 2.3",
             DS.format(a=1, b=0), "step 40 | loss 2.2"]
    run = read_run(_write(tmp_path, "odd.log", lines))
    f = run.frame.set_index("step")
    assert math.isinf(f.loc[20, "loss_scale"]) and f.loc[40, "loss_scale"] == 0
    assert math.isnan(f.loc[30, "loss_scale"]) and run.nan_mask("loss_scale").sum() == 1
    assert f.overflows.sum() == 3


def test_deepspeed_fused_optimizer_says_one_overflow_three_times(tmp_path):
    p = "[2023-11-06 11:54:09,446] [INFO] [fused_optimizer.py:347:_update_scale] "
    lines = ["step 3 | loss 2.5", p, "Grad overflow on iteration 4",
             p + "Reducing dynamic loss scale from 65536 to 32768.0",
             "[2023-11-06 11:54:09,446] [INFO] [logging.py:96:log_dist] [Rank 0] Overflow detected. "
             "Skipping step. Attempted loss scale: 65536, reducing to 32768.0",
             "step 4 | loss 2.4", "step 5 | loss 2.3"]
    f = read_run(_write(tmp_path, "fused.log", lines)).frame.set_index("step")
    assert f.overflows.sum() == 1 and f.loc[4, "loss_scale"] == 32768


def test_ranks_other_than_the_first_not_counted(tmp_path):
    lines = ["step 10 | loss 2.5", DS.format(a=8, b=4), DS.format(a=8, b=4).replace("Rank 0", "Rank 3"),
             "step 20 | loss 2.4"]
    run = read_run(_write(tmp_path, "ranks.log", lines))
    assert run.frame.overflows.sum() == 1
    assert any("other than the first" in w for w in run.source.warnings)


def test_deepspeed_line_reader_places_every_message(tmp_path):
    step = "[2023-04-18 01:46:59,142] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, skipped={k}, lr=[9.6e-06], mom=[(0.9, 0.95)]"
    lines = [step.format(s=10, k=0)] + [DS.format(a=a, b=b) for a, b in HALVINGS[:3]]
    lines += [step.format(s=20, k=3), step.format(s=30, k=3)]
    run = read_run(_write(tmp_path, "ds.log", lines))
    f = run.frame.set_index("step")
    assert run.source.format == "deepspeed"
    assert f.loss_scale.dropna().to_dict() == {17: 65536, 18: 32768, 19: 16384, 20: 8192}


def test_resume_messages_are_kept(tmp_path):
    lines = [f"iteration {s} | lm loss: 2.{s // 10} |" for s in range(10, 60, 10)]
    lines += ["  successfully loaded checkpoint from /ckpt at iteration 50"]
    lines += [f"iteration {s} | lm loss: 1.{s // 10} |" for s in range(60, 90, 10)]
    run = read_run(_write(tmp_path, "meg.log", lines))
    assert run.source.extras["resumes"] == [{"step": 50, "dialect": "megatron.loaded"}]
    assert [s["first_step"] for s in run.segments()] == [10, 60]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "postmortem", *args], capture_output=True, text=True)


@pytest.mark.slow
def test_a_20_digit_step_in_the_deepspeed_and_fairseq_readers(tmp_path):
    step = "[Rank 0] step={s}, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]"
    ds = _write(tmp_path, "ds.log", [step.format(s=s) for s in (10, 20, 12345678901234567890, 30)])
    run = read_run(ds)
    assert run.frame.step.tolist() == [10, 20, 30] and any("out of range" in w for w in run.source.warnings)
    js = '{{"epoch": 1, "loss": "2.5", "num_updates": "{s}"}}'
    fs = _write(tmp_path, "fs.log", [f"2021-01-01 00:00:01 | INFO | train_inner | {js.format(s=s)}"
                                     for s in (100, 200, 12345678901234567890, 300)])
    assert read_run(fs).frame.step.tolist() == [100, 200, 300]
    for path in (ds, fs):
        done = _cli("info", str(path), "--json")
        assert done.returncode in (0, 2) and "Traceback" not in done.stderr


@pytest.mark.slow
def test_info_names_the_dialect_of_each_series(tmp_path):
    lines = ["step 10 | loss 2.5", "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1024.0",
             "step 20 | loss 2.4"]
    done = _cli("info", str(_write(tmp_path, "apex.log", lines)), "--json")
    data = json.loads(done.stdout)
    by = {m["name"]: m for m in data["metrics"]}
    assert by["loss_scale"]["dialect"] == ["apex.amp.overflow"]
    assert by["overflows"]["dialect"] == ["apex.amp.overflow"] and "dialect" not in by["loss"]
    assert np.isfinite(by["loss_scale"]["max"])


# fairseq's progress line (progress_bar.SimpleProgressBar: `epoch 001:  {i} / {n} ` + the stats as
# key=value, loss_scale among them) with the trainer's overflow messages between two lines
# (v0.6-v0.9 `print("| WARNING: overflow detected, " + str(e))`, v0.10 `logger.info("NOTE:
# overflow detected, " + str(e))` under the `fairseq.trainer` logger): every printed scale is a
# value, joined to the loss_scale the progress lines log
FAIRSEQ_LINE = {
    "v0.9": "| epoch 001:   {u:4d} / 331737 loss=9.512, nll_loss=9.1, ppl=549.2, wps=12000, "
            "num_updates={u}, lr=0.25, gnorm=1.2, loss_scale={s}, wall=320",
    "v0.10": "2020-10-01 10:00:00 | INFO | train_inner | epoch 001:   {u:4d} / 331737 loss=9.512, "
             "nll_loss=9.1, ppl=549.2, wps=12000, num_updates={u}, lr=0.25, gnorm=1.2, loss_scale={s}, wall=320",
}
FAIRSEQ_NOTE = {"v0.9": "| WARNING: overflow detected, setting loss scale to: {x}",
                "v0.10": "2020-10-01 10:00:01 | INFO | fairseq.trainer | NOTE: overflow detected, "
                         "setting loss scale to: {x}"}


def test_fairseq_overflow_scales_join_the_logged_loss_scale(tmp_path):
    import pytest
    for version in FAIRSEQ_LINE:
        line, note = FAIRSEQ_LINE[version], FAIRSEQ_NOTE[version]
        lines = [line.format(u=1000, s=64), note.format(x=32.0), note.format(x=16.0),
                 line.format(u=2000, s=16), note.format(x=8.0), note.format(x=4.0),
                 line.format(u=3000, s=4), note.format(x=2.0), note.format(x=1.0), note.format(x=0.25)]
        run = read_run(_write(tmp_path, f"{version}.log", lines))
        f = run.frame
        scales = f.loss_scale.dropna().tolist()
        assert scales == pytest.approx([64, 32, 16, 8, 4, 2, 1, 0.25]), version
        assert f.overflows.sum() == 7 and not f.loss_scale[f.overflows == 1].isna().any(), version


# --- a message glued behind a line of a line reader (DeepSpeed, fairseq JSON, HF console, kv-pipe) ---
# Each progress line from its framework's format string (the catalogue's entry names the source):
# DeepSpeed v0.14.0 runtime/engine.py _report_progress `log_dist(f"step={step}, skipped=...")`;
# fairseq v0.10.2 logging/progress_bar.py JsonProgressBar.log `logger.info(json.dumps(stats))`;
# transformers v4.40 trainer_callback.py ProgressCallback.on_log `training_bar.write(str(logs))`;
# DeepSpeed-Chat step3 main.py `f'| step: {step} | loss: {loss} | lr: {lr} |'`.
LINE_READER_LINES = {
    "deepspeed": lambda s: ("[2023-05-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] "
                            f"step={s}, skipped={int(s >= 40)}, lr=[2.5e-05, 2.5e-05], mom=[(0.9, 0.95)]"),
    "fairseq": lambda s: ("2021-03-01 10:00:00 | INFO | train_inner | " + json.dumps(
        {"epoch": 1, "update": s / 1000, "loss": f"{7 - s / 100:.3f}", "lr": "0.0005",
         "num_updates": str(s)})),
    "hf-console": lambda s: f"{{'loss': {2 - s / 100:.4f}, 'grad_norm': 1.2, 'learning_rate': 4.9e-05, 'epoch': {s / 100}}}",
    "kv-pipe": lambda s: f"| step: {s} | loss: {2 - s / 100:.4f} | lr: 0.0001 |",
}
# the scalers' own words: DeepSpeed v0.14.0 runtime/fp16/loss_scaler.py (update_scale),
# fairseq v0.10.2 trainer.py (`NOTE: overflow detected, setting loss scale to: X`),
# apex 6424da3 amp/handle.py (skip_step)
GLUED = {"deepspeed": "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
         "fairseq": "NOTE: overflow detected, setting loss scale to: 32768.0",
         "apex": "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0"}


def _hf_frame(s):
    # tqdm/std.py format_meter, the Trainer's bar (total max_steps) in front of the dict it wrote
    return f" {s}%|{'█' * (s // 10)}{' ' * (10 - s // 10)}| {s}/100 [00:{s // 10:02d}<00:15,  4.00it/s]"


def test_a_message_glued_behind_a_line_readers_line_keeps_the_lines_metrics(tmp_path):
    import pytest
    for reader, line in LINE_READER_LINES.items():
        for name, message in GLUED.items():
            for prefix in ("", "[rank3]: ", "tqdm", "logger"):
                if prefix == "tqdm" and reader != "hf-console":
                    continue
                lead = {"tqdm": "", "logger": "[2024-01-01 10:00:00,000] [INFO] [loss_scaler.py:183:update_scale] "}
                lines = [(_hf_frame(s) + "\r" if prefix == "tqdm" else "" if prefix in lead else prefix)
                         + line(s) + (lead.get(prefix, "") + message if s == 40 else "") for s in range(10, 70, 10)]
                run = read_run(_write(tmp_path, f"{reader}-{name}.log", lines))
                f = run.frame.set_index("step")
                case = (reader, name, prefix)
                assert run.source.format == reader, case
                # HF console dicts carry no step: their ordinals, or the bar's counter in front
                steps = [1, 2, 3, 4, 5, 6] if reader == "hf-console" and prefix != "tqdm" else [10, 20, 30, 40, 50, 60]
                main = "lr" if reader == "deepspeed" else "loss"
                assert f[main].dropna().index.tolist() == steps, case     # the glued line's metrics read
                assert f.overflows.sum() == 1 and f.loc[steps[3], "overflows"] == 1, case
                assert f.loc[steps[3], "loss_scale"] == pytest.approx(32768), case
                if name != "fairseq":               # the scale before it, printed or halved from
                    assert f.loss_scale.dropna().to_dict() == {steps[3] - 1: 65536, steps[3]: 32768}, case
                words = {"overflow", "skipping", "rank", "scaler", "reducing", "setting"}
                assert not [c for c in f.columns if c != "overflows" and any(w in c.lower() for w in words)], case


def test_the_scale_before_the_first_halving_is_kept():
    """N scaler messages are N halvings: the first one's starting scale (DeepSpeed's `Attempted
    loss scale: X`; apex amp prints only the halved scale, its scaler halves: scaler.py
    `self._loss_scale/2.`) is a point on the step before it. The cascade of the issue: 8 apex
    messages read `256 -> 2, 7 halvings`."""
    import pathlib
    import tempfile
    tmp = pathlib.Path(tempfile.mkdtemp())
    apex = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {b}"
    for prefix in ("", "[rank3]: ", "2020-01-01 10:00:00,000 - INFO - "):
        for name, message in (("apex", apex), ("deepspeed", DS)):
            lines = [prefix + "Epoch: [3]  [ 900/2000]  eta: 0:10:00  lr: 0.000100  loss: 2.4100 (2.4000)  time: 0.5"]
            lines += [prefix + message.format(a=512 >> k, b=256 >> k) for k in range(8)]
            lines += [prefix + "Epoch: [3]  [ 920/2000]  eta: 0:10:00  lr: 0.000100  loss: 9.4100 (2.5000)  time: 0.5"]
            f = read_run(_write(tmp, f"{name}.log", lines)).frame.set_index("step")
            scale = f.loss_scale.dropna()
            assert scale.tolist() == [512, 256, 128, 64, 32, 16, 8, 4, 2], (prefix, name)
            assert scale.index.tolist() == list(range(6912, 6921)), (prefix, name)   # epoch 3 x 2000 + i
            assert f.overflows.sum() == 8
            halvings = np.log2(scale.to_numpy()[:-1] / scale.to_numpy()[1:]).sum()
            assert halvings == 8


def _d2(i, loss):
    # detectron2 utils/events.py CommonMetricPrinter.write (v0.6): ` {eta}iter: {iter}  {losses}  ...`
    return (f"[11/26 10:00:00 d2.utils.events]:  eta: 1:00:00  iter: {i}  total_loss: {loss:.3f}  loss_cls: 0.5  "
            f"loss_box_reg: 0.4  time: 0.5000  data_time: 0.0100  lr: 0.02  max_mem: 3000M")


def test_checkpoint_loads_are_kept_as_events(tmp_path):
    """fvcore's `[Checkpointer] Loading from P ...` and `Loading optimizer from P ...` (detectron2),
    mmengine's / mmcv's `Load checkpoint from P`, HF Trainer's `Loading model from P.`: events
    on the step the next progress line names, no segment of their own; detectron2's
    `Starting training from iteration N` (N >= 1) is the resume, on its own step."""
    fv = "[11/26 11:00:00 fvcore.common.checkpoint]: "
    lines = [_d2(i, 2 - i / 1000) for i in range(39919, 40000, 20)]
    lines += [fv + "[Checkpointer] Loading from output/model_0039999.pth ...",
              fv + "Loading optimizer from output/model_0039999.pth ...",
              fv + "Loading scheduler from output/model_0039999.pth ...",
              "[rank3]: [11/26 11:00:01 d2.engine.train_loop]: Starting training from iteration 40000"]
    lines += [_d2(i, 1.5 - i / 100000) for i in range(40019, 40100, 20)]
    run = read_run(_write(tmp_path, "d2.log", lines))
    assert run.source.extras["resumes"] == [{"step": 40000, "dialect": "detectron2.start_iter"}]
    got = run.source.extras["checkpoints"]
    # the optimizer's and the scheduler's lines, one right after the other, are one event (as a
    # message repeated by every rank is)
    assert got == [{"step": 40000, "dialect": "detectron2.checkpoint"},
                   {"step": 40000, "dialect": "detectron2.checkpointable"}]
    assert len(run.segments()) == 2 and run.frame.loss.notna().sum() == 10
    # a fresh start prints iteration 0: no resume
    fresh = [fv + "[Checkpointer] Loading from detectron2://ImageNetPretrained/MSRA/R-50.pkl ...",
             "[11/26 11:00:01 d2.engine.train_loop]: Starting training from iteration 0"]
    run = read_run(_write(tmp_path, "fresh.log", fresh + [_d2(i, 2.0) for i in range(19, 100, 20)]))
    assert "resumes" not in run.source.extras and len(run.segments()) == 1
    assert run.source.extras["checkpoints"] == [{"step": 19, "dialect": "detectron2.checkpoint"}]


def test_mmengine_and_hf_checkpoint_loads_are_events(tmp_path):
    cases = {
        # mmengine runner.py Runner.load_checkpoint; its Epoch(train) line (LoggerHook)
        "mmengine": ("2024/01/01 10:00:00 - mmengine - INFO - Load checkpoint from work_dirs/epoch_3.pth",
                     lambda i: f"2024/01/01 10:00:00 - mmengine - INFO - Iter(train) [{i}/9000]  lr: 2.0000e-02  "
                               f"eta: 1:00:00  time: 0.5000  data_time: 0.0100  memory: 3000  loss: {2 - i / 1000:.4f}"),
        # mmcv v1.x base_runner.py BaseRunner.load_checkpoint
        "mmcv": ("2022-01-01 10:00:00,000 - mmdet - INFO - load checkpoint from work_dirs/latest.pth",
                 lambda i: f"2022-01-01 10:00:00,000 - mmdet - INFO - Iter [{i}/9000]\tlr: 2.000e-02, eta: 1:00:00, "
                           f"time: 0.500, data_time: 0.010, memory: 3000, loss: {2 - i / 1000:.4f}"),
        # transformers trainer.py _load_from_checkpoint; the console's logged dict behind a tqdm frame
        "hf": ("[INFO|trainer.py:2107] 2024-01-01 10:00:00,000 >> Loading model from output/checkpoint-500.",
               lambda i: f"Step {i} | loss: {2 - i / 1000:.4f} | learning_rate: 2e-05"),
    }
    for name, (load, progress) in cases.items():
        lines = [progress(i) for i in (50, 100)] + [load] + [progress(i) for i in (150, 200)]
        run = read_run(_write(tmp_path, f"{name}.log", lines))
        dialect = {"hf": "transformers.load"}.get(name, "mmengine.load_checkpoint")
        assert run.source.extras["checkpoints"] == [{"step": 150, "dialect": dialect}], name
        assert run.frame.loss.notna().sum() == 4 and len(run.segments()) == 1, name


def test_the_line_readers_name_the_dialect_of_each_series(tmp_path):
    # info's metrics[].dialect for the logs the line readers read, as the general reader says it
    expected = {"deepspeed": {"lr": ["deepspeed.step"], "skipped": ["deepspeed.step"]},
                "fairseq": {"loss": ["fairseq.json"], "lr": ["fairseq.json"]},
                "hf-console": {"loss": ["hf-console.logs"], "grad_norm": ["hf-console.logs"]},
                "kv-pipe": {"loss": ["kv-pipe.step"], "lr": ["kv-pipe.step"]}}
    for reader, line in LINE_READER_LINES.items():
        run = read_run(_write(tmp_path, f"{reader}.log", [line(s) for s in range(10, 70, 10)]))
        said = run.source.extras["series_dialects"]
        assert run.source.format == reader
        for name, ids in expected[reader].items():
            assert said[name] == ids, (reader, name, said)
