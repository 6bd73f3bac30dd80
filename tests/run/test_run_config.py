"""The config a log carries, which column is the loss, and what a run is called."""

import json
import pickle
import shutil
import sqlite3

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.run import RunReadError, read_run
from postmortem.run.export import info
from postmortem.run.identity import name_from_path, safe_id
from postmortem.run.logconfig import text_log_config


def facts(log):
    return {k: v["value"] for k, v in info(log)["facts"].items()}


def origin(log, fact):
    return info(log)["facts"][fact]["from"]


def check(result, node):
    return next(c for c in result.checks if c.id == node)


def test_megatron_argument_dump(real_runs):
    log = read_run(real_runs / "megatron-deepspeed-moe-0.125B")
    f = facts(log)
    # `  lr .... 0.0003`, `  clip_grad .... 1.0`, `> padded vocab (size: 50257) ...` in the raw log
    assert f["lr_max"] == 3e-4 and f["min_lr"] == 3e-5 and f["clip"] == 1.0
    assert f["vocab_size"] == 50257 and f["dtype"] == "fp16" and f["schedule"] == "cosine"
    assert f["total_steps"] == 439453125 // 256          # train_samples / global_batch_size
    assert f["weight_decay"] == 0.1 and f["batch_size"] == 256
    # warmup is given in tokens (lr_warmup_tokens) with a growing sequence length: not a step count
    assert "warmup_steps" not in f
    assert origin(log, "lr_max") == "the log's argument dump: lr"
    # tree A reads them: A1 compares the first loss with ln V instead of skipping
    a1 = check(analyze(log), "A1")
    assert a1.status == "pass" and "ln V = 10.82" in a1.detail


def test_wandb_config_and_run_id(real_runs):
    log = read_run(real_runs / "wandb-alpaca-9am288wn")
    assert log.run_id == "9am288wn"
    f = facts(log)
    assert f["lr_max"] == 2e-5 and f["clip"] == 1.0 and f["dtype"] == "bf16"
    assert f["vocab_size"] == 32001 and f["schedule"] == "cosine"
    assert "warmup_steps" not in f      # warmup_steps 0 beside warmup_ratio 0.03, total unknown
    assert origin(log, "clip") == "W&B config.yaml: max_grad_norm"
    a5 = check(analyze(log), "A5")
    assert "clip 1" in a5.detail


def test_mlflow_params_and_run_id(real_runs):
    log = read_run(real_runs / "mlflow-deepcnn-filestore")
    assert log.run_id == "cb0096518b0e4c66a94428555f05420b"      # not "mlruns" nor "0"
    assert facts(log)["lr_max"] == 0.01 and facts(log)["batch_size"] == 16
    assert origin(log, "lr_max") == "MLflow params: LEARNING_RATE"


def test_mlflow_db_run_name_tag(tmp_path):
    db = tmp_path / "mlflow.db"
    con = sqlite3.connect(db)
    con.execute("create table runs(run_uuid)")
    con.execute("create table metrics(key, value, timestamp, run_uuid, step, is_nan)")
    con.execute("create table params(key, value, run_uuid)")
    con.execute("create table tags(key, value, run_uuid)")
    for s in range(20):
        con.execute("insert into metrics values('loss', ?, ?, 'r1', ?, 0)", (1 / (s + 1), s, s))
    con.executemany("insert into params values(?, ?, 'r1')",
                    [("learning_rate", "3e-4"), ("max_grad_norm", "0.5"), ("warmup_steps", "100")])
    con.execute("insert into tags values('mlflow.runName', 'gpt2 small/lr 3e-4', 'r1')")
    con.commit()
    con.close()
    log = read_run(db)
    assert log.run_id == "gpt2-small-lr-3e-4"
    assert facts(log) == {"run_name": "gpt2 small/lr 3e-4", "lr_max": 3e-4, "clip": 0.5,
                          "warmup_steps": 100}


def test_lightning_hparams(real_runs):
    log = read_run(real_runs / "lightning-slm-training")
    f = facts(log)
    assert f["vocab_size"] == 50258 and f["lr_max"] == pytest.approx(0.0002363235740126483)
    assert origin(log, "vocab_size") == "version_5/hparams.yaml: vocab_size"
    assert log.run_id == "lightning-slm-training"          # not lightning_logs / version_5


def test_ultralytics_args_yaml(real_runs):
    log = read_run(real_runs / "yolov8-results-incomplete-91of100")
    f = facts(log)
    # args.yaml: lr0 0.01, lrf 0.01, warmup_epochs 3.0, epochs 100, cos_lr false, amp true
    assert f["lr_max"] == 0.01 and f["min_lr"] == pytest.approx(1e-4)
    assert f["warmup_steps"] == 3 and f["total_steps"] == 100       # the steps are epochs
    assert f["schedule"] == "linear" and f["dtype"] == "fp16" and f["batch_size"] == 16
    assert log.run_id == "yolov8-results-incomplete-91of100"      # its `name: train2` is generic
    assert "lr" in log.frame and log.frame.lr.iloc[0] == pytest.approx(0.00047377)    # lr/pg0


class Boom:
    def __reduce__(self):
        return (open, ("/nonexistent-dir/pwned", "w"))


def test_hf_side_files_never_unpickled(real_runs, tmp_path):
    out = tmp_path / "my-finetune"
    out.mkdir()
    shutil.copy(real_runs / "hf-trainer-tinyllama-evalrows" / "trainer_state.json", out)
    (out / "training_args.json").write_text(json.dumps({
        "learning_rate": 2e-4, "warmup_ratio": 0.1, "warmup_steps": 0, "lr_scheduler_type": "cosine",
        "max_steps": -1, "max_grad_norm": 0.3, "weight_decay": 0.01, "bf16": True, "fp16": False,
        "per_device_train_batch_size": 2, "run_name": "./outputs/tinyllama-sft"}))
    (out / "config.json").write_text(json.dumps({"vocab_size": 32000, "torch_dtype": "float32"}))
    (out / "training_args.bin").write_bytes(pickle.dumps(Boom()))
    log = read_run(out)
    f = facts(log)
    assert f["lr_max"] == 2e-4 and f["clip"] == 0.3 and f["vocab_size"] == 32000
    assert f["dtype"] == "bf16"                  # the training flags, not the weights' dtype
    assert f["total_steps"] == 2808              # trainer_state.json: max_steps (args say -1)
    assert f["warmup_steps"] == 281              # ceil(0.1 x 2808)
    assert origin(log, "warmup_steps") == "training_args.json: warmup_ratio x total steps"
    assert log.run_id == "tinyllama-sft"         # HF's run_name is the output dir's path


def test_manifest_json_wins_over_the_log_config(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "loss": 3.0 - s / 100}) + "\n" for s in range(50)))
    (tmp_path / "args.yaml").write_text("lr0: 0.01\nepochs: 10\nname: train3\n")
    (tmp_path / "manifest.json").write_text(json.dumps({"run_id": "exp-42", "config": {"lr_max": 1e-3}}))
    log = read_run(tmp_path)
    assert facts(log)["lr_max"] == 1e-3 and origin(log, "lr_max") == "manifest.json"
    assert log.run_id == "exp-42"


def test_printed_namespace_and_config_dict_are_data_not_code():
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "train.log"
        p.write_text(
            "2020-01-01 | INFO | fairseq_cli.train | Namespace(arch='transformer_lm', lr=[0.0005], "
            "clip_norm=0.1, warmup_updates=4000, max_update=50000, lr_scheduler='inverse_sqrt', "
            "fp16=True, evil=__import__('os').system('touch /tmp/pwned-by-log'), weight_decay=0.01)\n"
            "  seq_length ...................................... 2048\n"
            "[2023-05-01 10:00:00,000] [INFO] gradient_clipping ....... 1.0.....................updated\n"
            "  train_iters ............................... 143000..................updated\n")
        cfg = text_log_config(p)
    assert cfg["gradient_clipping"] == "1.0" and cfg["train_iters"] == "143000"     # GPT-NeoX
    assert cfg["lr"] == [0.0005] and cfg["clip_norm"] == 0.1 and "evil" not in cfg
    assert cfg["seq_length"] == "2048"
    from postmortem.run.logconfig import facts_of_config
    fairseq = {k: v for k, v in cfg.items() if k not in ("gradient_clipping", "train_iters")}
    f = {k: v for k, (v, _) in facts_of_config(fairseq).items()}
    assert f == {"lr_max": 0.0005, "warmup_steps": 4000, "total_steps": 50000, "clip": 0.1,
                 "schedule": "inverse_sqrt", "dtype": "fp16", "weight_decay": 0.01}


# --- which column is the loss -------------------------------------------------

def table(tmp_path, header, rows, name="metrics.csv"):
    p = tmp_path / name
    p.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return p


@pytest.mark.parametrize("columns, chosen", [
    (["step", "total_loss", "loss_cls", "loss_box_reg"], "total_loss"),          # detectron2
    (["step", "train/CrossEntropyLoss", "train/Perplexity"], "train/CrossEntropyLoss"),  # OLMo
    (["step", "mean_loss", "aux_loss"], "mean_loss"),
    (["step", "train/loss/total", "train/loss/aux"], "train/loss/total"),
    (["step", "nll_loss", "kl_loss"], "nll_loss"),
    (["step", "recon_loss", "val_recon_loss"], "recon_loss"),
])
def test_the_loss_by_name_rules(tmp_path, columns, chosen):
    rows = [[s] + [1.0 + i + s / 10 for i in range(len(columns) - 1)] for s in range(5)]
    log = read_run(table(tmp_path, columns, rows))
    col = columns.index(chosen)
    assert log.frame.loss.tolist() == [r[col] for r in rows]
    assert log.source.extras["loss_from"].startswith(chosen)
    assert chosen not in log.frame          # renamed, as the alias table does


def test_two_models_losses_are_not_summed(real_runs):
    log = read_run(real_runs / "lightning-wgan-critic-loss-resumed")
    assert "loss" not in log.frame
    assert any("critic_loss, generator_loss" in w and "--loss" in w for w in log.source.warnings)
    chosen = read_run(real_runs / "lightning-wgan-critic-loss-resumed", loss="critic_loss")
    assert chosen.frame.loss.notna().sum() == log.frame.critic_loss.notna().sum()
    assert chosen.source.extras["loss_from"] == "critic_loss (--loss)"


def test_loss_and_step_overrides(tmp_path):
    p = table(tmp_path, ["step", "tokens", "loss", "lm_loss_2"],
              [[s, 1000 * (s + 1), 2.0 - s / 10, 5.0 - s / 10] for s in range(5)])
    log = read_run(p, loss="lm_loss_2", step="tokens")
    assert log.frame.step.tolist() == [1000, 2000, 3000, 4000, 5000]
    assert log.frame.loss.tolist() == [5.0, 4.9, 4.8, 4.7, 4.6]
    assert log.frame.loss_not_chosen.iloc[0] == 2.0       # the other loss is kept, renamed
    with pytest.raises(RunReadError, match="no column 'nope' for --loss"):
        read_run(p, loss="nope")
    with pytest.raises(RunReadError, match="no column 'nope' for --step"):
        read_run(p, step="nope")


def test_step_override_on_a_text_log_is_refused(real_runs):
    with pytest.raises(RunReadError, match="--step picks a column of a table"):
        read_run(real_runs / "llmc-modded-nanogpt-llmc", step="x")


def test_epoch_counter_going_back_is_a_resume(tmp_path):
    p = table(tmp_path, ["epoch", "loss", "val_loss"],
              [[e, 1.0 / (e + 1), 1.1 / (e + 1)] for e in (0, 1, 2, 3, 2, 3, 4)], "history.csv")
    log = read_run(p)
    assert [(s["first_step"], s["last_step"]) for s in log.segments()] == [(0, 3), (2, 4)]


# --- identity -------------------------------------------------------------------

@pytest.mark.parametrize("given, safe", [
    ("gpt2 small/lr 3e-4", "gpt2-small-lr-3e-4"), ("Überlauf: run #3", "Uberlauf-run-3"),
    ("../../etc/passwd", "etc-passwd"), ("", "run"), (".hidden", "hidden"), ("CON", "run-CON"),
    ("a" * 200, None),
])
def test_safe_id(given, safe):
    out = safe_id(given)
    if safe:
        assert out == safe
    assert len(out) <= 80 and "/" not in out and not out.startswith(".")
    assert safe_id("a" * 200) != safe_id("a" * 199 + "b")       # a long id keeps a hash of the whole


@pytest.mark.slow
def test_two_megatron_train_logs_on_one_day_do_not_collide(tmp_path, real_runs):
    log_text = (real_runs / "megatron-deepspeed-moe-0.125B").glob("*.log").__next__().read_bytes()
    ids = []
    for run in ("gpt-1.3b-lr3e-4", "gpt-1.3b-lr6e-4"):
        d = tmp_path / run / "logs"
        d.mkdir(parents=True)
        (d / "train.log").write_bytes(log_text)
        ids.append(read_run(d / "train.log").run_id)
    assert ids == ["gpt-1.3b-lr3e-4", "gpt-1.3b-lr6e-4"]
    assert name_from_path(tmp_path / "bert-sweep-7" / "lightning_logs" / "version_0") == "bert-sweep-7"
    assert name_from_path(tmp_path / "bert-sweep-7" / "runs" / "train" / "exp7") == "bert-sweep-7"


# --- as the user sees it ----------------------------------------------------------

@pytest.mark.slow
def test_cli_says_which_column_and_where_each_fact_came_from(real_runs):
    from test_cli import assert_one_line_error, pm
    run = real_runs / "yolov8-results-incomplete-91of100"
    r = pm("info", run)
    assert r.returncode == 0, r.stderr
    assert "step from epoch" in r.stdout and "loss from train/box_loss + train/cls_loss" in r.stdout
    assert "lr_max 0.01  (args.yaml: lr0)" in r.stdout
    r = pm("info", run, "--json", "--loss", "train/cls_loss")
    data = json.loads(r.stdout)
    assert data["read"]["loss"] == "train/cls_loss (--loss)"
    loss = next(m for m in data["metrics"] if m["name"] == "loss")
    assert loss["max"] == 3.9181 and loss["first_step"] == 1        # train/cls_loss at epoch 1
    assert_one_line_error(pm("analyze", run, "--loss", "nope"), "no column 'nope' for --loss")
    assert_one_line_error(pm("export", real_runs / "llmc-modded-nanogpt-llmc", "-o", "x.csv",
                             "--step", "s"), "--step picks a column of a table")


def test_tensorboard_hparams_and_hf_text_summaries(real_runs, tmp_path):
    from torch.utils.tensorboard import SummaryWriter
    w = SummaryWriter(str(tmp_path / "tb"))
    for s in range(30):
        w.add_scalar("train/loss", 3.0 - s / 30, s)
    w.add_hparams({"lr": 3e-4, "max_grad_norm": 0.5, "precision": "bf16-mixed", "warmup_steps": 10,
                   "run_name": "sweep-a/trial 7"}, {"hparam/final_loss": 2.0})
    w.close()
    log = read_run(tmp_path / "tb")
    f = facts(log)
    assert f["lr_max"] == 3e-4 and f["clip"] == 0.5 and f["dtype"] == "bf16" and f["warmup_steps"] == 10
    assert origin(log, "clip") == "TensorBoard hparams: max_grad_norm"
    assert log.run_id == "trial-7"
    # HF Trainer writes its TrainingArguments and model config as JSON text into the event file
    for fmt in (None, "tensorboard"):
        hf = read_run(real_runs / "hf-trainer-tb-serial-lain", format=fmt)
        f = facts(hf)
        assert f["lr_max"] == 5e-5 and f["vocab_size"] == 32000 and f["schedule"] == "linear"
        assert f["dtype"] == "fp32" and f["clip"] == 1.0
        assert origin(hf, "vocab_size") == "TensorBoard model_config/text_summary: vocab_size"
        assert hf.run_id == "hf-trainer-tb-serial-lain"      # run_name "output/" is generic


def test_timm_summary_csv_is_epoch_indexed(tmp_path):
    p = table(tmp_path, ["epoch", "train_loss", "eval_loss", "eval_top1", "eval_top5", "lr"],
              [[e, 6.9 - e / 10, 6.8 - e / 10, e * 1.5, e * 4.0, 1e-3] for e in range(12)], "summary.csv")
    log = read_run(p)
    assert log.frame.step.tolist() == list(range(12)) and not log.source.warnings
    assert log.frame.loss.iloc[3] == pytest.approx(6.6) and log.frame.val_loss.iloc[3] == pytest.approx(6.5)
    assert info(log)["read"] == {"step": "epoch (no step column: epoch-indexed)",
                                 "loss": "train_loss (the alias table)",
                                 "val_loss": "eval_loss (the alias table)",
                                 "events": None, "segments": None}     # no messages, one segment



def test_a_manifest_made_from_the_log_config_promises_no_replay(real_runs):
    from postmortem.replay.worker import what_is_missing
    log = read_run(real_runs / "megatron-deepspeed-moe-0.125B")
    assert log.manifest is not None and log.manifest.replay is None     # facts from the args dump
    assert what_is_missing(log).startswith("no manifest.json beside the run")

@pytest.mark.slow
def test_dashboard_loader_reads_with_the_columns_given(real_runs):
    from postmortem.tui.loader import Loader
    loader = Loader(str(real_runs / "lightning-wgan-critic-loss-resumed"), None, [],
                    columns={"loss": "generator_loss"})
    kind, *_ = loader.first()
    assert kind == "view"
    kind, log, *_ = loader.run()         # (the run, its analysis, a fresher view or None)
    assert kind == "run"
    assert log.source.extras["loss_from"] == "generator_loss (--loss)"
    direct = read_run(real_runs / "lightning-wgan-critic-loss-resumed")
    assert log.frame.loss.notna().sum() == direct.frame.generator_loss.notna().sum() > 0
