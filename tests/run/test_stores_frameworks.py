"""Stores of several runs written by the frameworks' own libraries (TensorBoard's writer,
Lightning's CSVLogger over two fits, W&B offline, MLflow's client on a SQLite mlflow.db, HF's
checkpoint folders, mmengine's work dir), opened one run at a time and listed otherwise."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from postmortem.run import read_run
from postmortem.run.store import SeveralRuns


def pm(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def listed(err: SeveralRuns) -> list[str]:
    return [r.id for r in err.runs]


# --- TensorBoard: a logdir of run folders, written by TensorBoard's own writer -------------------

def tb_write(folder, points, start=1.7e9):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    w = EventFileWriter(str(folder))
    for step, tag, value in points:
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        w.add_event(event_pb2.Event(wall_time=start + step, step=step, summary=summary))
    w.close()


def test_tensorboard_logdir_of_runs_lists_them_and_opens_one(tmp_path):
    logdir = tmp_path / "tb_logs"
    tb_write(logdir / "lr-1e-3", [(s, "train/loss", 3 - s / 100) for s in range(40)])
    tb_write(logdir / "lr-1e-2", [(s, "train/loss", 5 - s / 100) for s in range(30)])
    with pytest.raises(SeveralRuns) as err:
        read_run(logdir)
    assert listed(err.value) == ["lr-1e-2", "lr-1e-3"]
    log = read_run(logdir, run="lr-1e-2")
    assert len(log.frame) == 30 and log.frame.loss.iloc[0] == pytest.approx(5.0)
    assert not [c for c in log.frame.columns if c.startswith("run")]      # no run0/ prefixes
    assert read_run(logdir / "lr-1e-3").frame.loss.iloc[-1] == pytest.approx(3 - 39 / 100, rel=1e-6)


def test_tensorboard_train_and_validation_folders_stay_one_run(tmp_path):
    logdir = tmp_path / "logs"
    tb_write(logdir / "train", [(s, "loss", 2.0) for s in range(20)])
    tb_write(logdir / "validation", [(s, "loss", 2.5) for s in range(0, 20, 5)], start=1.7e9 + 0.5)
    log = read_run(logdir)
    assert log.frame.loss.notna().sum() == 20 and log.frame.val_loss.notna().sum() == 4


def test_one_event_file_takes_wall_times_from_the_most_logged_tag(tmp_path):
    points = [(s, "train/loss", 1.0) for s in range(40)]
    points.insert(0, (0, "a/first_tag", 9.0))
    points += [(s, "a/first_tag", 9.0) for s in (10, 20, 30)]     # 4 of 40 steps
    tb_write(tmp_path / "run", sorted(points))
    log = read_run(tmp_path / "run")
    wall = log.frame.wall_time
    assert wall.notna().sum() == 40 and wall.iloc[17] == pytest.approx(1.7e9 + 17)


# --- Lightning: two fit() calls, two versions -------------------------------------------------

def lightning_two_fits(root, lrs=(0.1, 0.1)):
    import lightning as L
    import torch

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def training_step(self, batch, _):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.lin(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.lr)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    for lr in lrs:
        trainer = L.Trainer(max_steps=30, logger=L.pytorch.loggers.CSVLogger(root, name="lightning_logs"),
                            log_every_n_steps=1, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False, accelerator="cpu")
        model = Tiny()
        model.lr = lr
        trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=4))
    return root / "lightning_logs"


@pytest.mark.slow
def test_lightning_after_a_second_fit(tmp_path):
    logs = lightning_two_fits(tmp_path)
    assert sorted(p.name for p in logs.iterdir()) == ["version_0", "version_1"]
    log0 = read_run(logs / "version_0")          # the version passed, not its sibling too
    assert len(log0.frame) == 30 and log0.source.files == [str(logs / "version_0")]
    with pytest.raises(SeveralRuns) as err:
        read_run(logs)
    assert listed(err.value) == ["version_0", "version_1"]
    assert read_run(logs, run="version_1").frame.step.tolist() == list(range(30)) or \
        len(read_run(logs, run="version_1").frame) == 30
    r = pm("analyze", logs, "--run", "version_1", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["run"]["steps"] == 30, r.stderr


# --- W&B offline: a wandb/ folder of run folders ---------------------------------------------

@pytest.mark.slow
def test_wandb_folder_of_offline_runs(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    ids = []
    for n, scale in enumerate((1.0, 2.0)):
        run = wandb.init(project="p", dir=str(tmp_path), mode="offline", id=f"run{n}abc", name=f"lr-x{scale:g}",
                         settings=wandb.Settings(console="off", x_disable_stats=True))
        for s in range(25):
            run.log({"train/loss": scale * (3 - s / 10), "lr": 1e-3}, step=s)
        run.finish()
        ids.append(run.id)
    store = tmp_path / "wandb"
    with pytest.raises(SeveralRuns) as err:
        read_run(store)
    assert sorted(listed(err.value)) == sorted(ids)
    assert sorted(r.name for r in err.value.runs) == ["lr-x1", "lr-x2"]      # the run's display name
    log = read_run(store, run="lr-x2")
    assert len(log.frame) == 25 and log.frame.loss.iloc[0] == pytest.approx(6.0)
    assert log.source.extras["wandb_run_id"] == ids[1]


# --- MLflow: a real mlflow.db written by MLflow's client, several experiments -----------------

def log_mlflow_runs(uri):
    """Runs logged with MLflow's own client: NaN and +-inf values, a resumed stretch of steps,
    keys with `/`; returns {run id: {key: [(step, value), ...]}} as MLflow's client reads them."""
    import mlflow
    from mlflow.tracking import MlflowClient
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(tracking_uri=uri)
    made = {}
    for exp in ("baseline", "fp16"):
        exp_id = client.create_experiment(exp)
        for k in range(2):
            run = client.create_run(exp_id, run_name=f"{exp}-{k}")
            rid = run.info.run_id
            for s in range(40):
                value = 3.0 - s / 20
                if exp == "fp16" and k == 1 and s == 25:
                    value = float("nan")
                if exp == "fp16" and k == 1 and s == 26:
                    value = float("inf")
                client.log_metric(rid, "train/loss", value, step=s, timestamp=1_700_000_000_000 + s)
                client.log_metric(rid, "lr", 1e-3, step=s, timestamp=1_700_000_000_000 + s)
            if exp == "baseline" and k == 1:     # resumed from step 30: steps go back
                for s in range(30, 35):
                    client.log_metric(rid, "train/loss", -math.inf if s == 31 else 1.5, step=s,
                                      timestamp=1_700_000_001_000 + s)
            client.log_param(rid, "lr", "0.001")
            client.set_terminated(rid)
            made[rid] = {key: [(m.step, m.value) for m in client.get_metric_history(rid, key)]
                         for key in ("train/loss", "lr")}
    return made


def same_as_mlflow(log, history):
    """The points read are the points MLflow's client returns, NaN and inf included."""
    for key, column in (("train/loss", "loss"), ("lr", "lr")):
        want = np.array([v for _, v in history[key]])
        # MLflow stores +-inf as +-DBL_MAX and its client hands them back so: the logged value is inf
        want[np.abs(want) >= np.finfo(np.float64).max] *= np.inf
        values = log.frame[column].to_numpy()
        got = values[~np.isnan(values) | np.asarray(log.nan_mask(column))]
        np.testing.assert_array_equal(np.sort(got), np.sort(want))


@pytest.mark.slow
def test_mlflow_db_written_by_mlflow_with_several_experiments(tmp_path):
    pytest.importorskip("mlflow")
    db = tmp_path / "mlflow.db"
    made = log_mlflow_runs(f"sqlite:///{db}")
    with pytest.raises(SeveralRuns) as err:
        read_run(db)
    assert sorted(listed(err.value)) == sorted(made)
    names = {r.name for r in err.value.runs}
    assert {"baseline/baseline-0", "fp16/fp16-1"} <= names and all(r.status == "finished" for r in err.value.runs)
    for rid, history in made.items():
        same_as_mlflow(read_run(db, run=rid), history)
    nan_run = read_run(db, run="fp16-1")                 # by its name
    assert nan_run.nan_mask("loss").sum() == 1 and np.isposinf(nan_run.frame.loss).sum() == 1
    resumed = read_run(db, run="baseline-1")
    assert len(resumed.segments()) == 2 and np.isneginf(resumed.frame.loss).sum() == 1
    r = pm("info", db)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 5 and "--run ID" in lines[0], r.stderr


def bad_db(tmp_path, rows, run_ids=("r1",)):
    import sqlite3
    db = tmp_path / "mlflow.db"
    con = sqlite3.connect(db)
    con.executescript("create table runs (run_uuid text, name text);"
                      "create table metrics (key text, value float, timestamp bigint, run_uuid text,"
                      " step bigint, is_nan boolean);")
    for rid in run_ids:
        con.execute("insert into runs values (?, ?)", (rid, rid))
    con.executemany("insert into metrics values (?, ?, ?, ?, ?, 0)", rows)
    con.commit()
    con.close()
    return db


@pytest.mark.parametrize("bad", [
    ("loss", 2.0, 5, "r1", "ten"),                        # a text step
    ("loss", 2.0, 5, "r1", float("inf")),                 # an inf step
    ("loss", None, 5, "r1", 3),                           # a NULL value
    ("loss", 2.0, 5, None, 3),                            # a NULL run id
    ("loss", 2.0, 5, "r1", 1.2345678901234567e19),        # a 20-digit step (SQLite keeps it a real)
])
def test_bad_database_contents_are_left_out_with_a_warning(tmp_path, bad):
    good = [("loss", 3.0 - s / 10, s, "r1", s) for s in range(10)]
    db = bad_db(tmp_path, good + [bad])
    log = read_run(db)
    assert len(log.frame) == 10 and log.frame.loss.iloc[0] == 3.0
    if bad[3] is not None:
        assert any("left out" in w for w in log.source.warnings), log.source.warnings


@pytest.mark.slow        # starts postmortem processes
def test_analyze_of_a_database_with_every_bad_row_is_exit_0(tmp_path):
    good = [("loss", 3.0 - s / 10, s, "r1", s) for s in range(10)]
    bad = [("loss", 2.0, 5, "r1", "ten"), ("loss", 2.0, 5, "r1", float("inf")), ("loss", None, 5, "r1", 3),
           ("loss", 2.0, 5, None, 3), ("loss", 2.0, 5, "r1", 1.2345678901234567e19)]
    r = pm("analyze", bad_db(tmp_path, good + bad), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["run"]["steps"] == 10, r.stderr


@pytest.mark.slow        # starts a postmortem process
def test_a_cut_off_database_is_one_line(tmp_path):
    db = bad_db(tmp_path, [("loss", 1.0, s, "r1", s) for s in range(2000)])
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    r = pm("info", db)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_20_digit_step_in_the_file_store(tmp_path):
    run = tmp_path / "mlruns" / "0" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc\nrun_name: first\nstart_time: 1700000000000\nstatus: 3\n")
    (run / "metrics" / "loss").write_text("".join(f"1000 {3 - s / 10} {s}\n" for s in range(10))
                                          + "1001 2.0 12345678901234567890\n")
    log = read_run(tmp_path / "mlruns")
    assert len(log.frame) == 10 and any("64 bits" in w for w in log.source.warnings)


def test_wandb_text_and_huge_steps_are_left_out(tmp_path):
    from writers import wandb_history, write_wandb
    recs = [wandb_history(s, {"loss": str(3 - s / 10), "_step": str(s)}) for s in range(10)]
    recs.append(wandb_history(10, {"loss": "1.0", "_step": '"eleven"'}))
    recs.append(wandb_history(11, {"loss": "1.0", "_step": "12345678901234567890"}))
    f = write_wandb(tmp_path / "run-x" / "run-x.wandb", recs)
    log = read_run(f)
    # the text _step falls back to the record's own step (10); the 20-digit one too (11)
    assert len(log.frame) == 12 and log.frame.step.max() == 11


# --- mmengine work dir, HF output dir ----------------------------------------------------------

def test_mmengine_work_dir_identical_copies_are_one_run(tmp_path, real_runs):
    src = next((real_runs / "issue-mmengine-963-scalars-json").rglob("*.json"))
    text = src.read_text()
    for stamp in ("20240101_120000", "20240102_090000"):
        vis = tmp_path / "work_dir" / stamp / "vis_data"
        vis.mkdir(parents=True)
        (vis / "scalars.json").write_text(text)
        (vis / f"{stamp}.json").write_text(text)          # mmengine's identical copy
    one = read_run(tmp_path / "work_dir" / "20240101_120000")
    assert len(one.frame) == len(text.strip().splitlines())
    assert any("identical copy" in w for w in one.source.warnings)
    with pytest.raises(SeveralRuns) as err:
        read_run(tmp_path / "work_dir")
    assert listed(err.value) == ["20240101_120000", "20240102_090000"]
    assert read_run(tmp_path / "work_dir", run="20240102_090000").source.path.endswith("scalars.json")


def test_hf_output_dir_reads_the_latest_checkpoint_state(tmp_path):
    out = tmp_path / "out"
    for step in (10, 20, 30):
        d = out / f"checkpoint-{step}"
        d.mkdir(parents=True)
        hist = [{"step": s, "loss": 2.0 - s / 100, "learning_rate": 1e-4} for s in range(1, step + 1)]
        (d / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": hist}))
    log = read_run(out)
    assert log.source.format == "hf-trainer-state" and log.frame.step.max() == 30


@pytest.mark.slow
def test_mlflow_file_store_written_by_mlflow(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")     # MLflow 3.7+ keeps it for old stores
    store = tmp_path / "mlruns"
    made = log_mlflow_runs(store.as_uri())
    with pytest.raises(SeveralRuns) as err:
        read_run(store)
    assert sorted(listed(err.value)) == sorted(made)
    assert {r.name for r in err.value.runs} >= {"baseline-0", "fp16-1"}
    for rid, history in made.items():
        same_as_mlflow(read_run(store, run=rid), history)
    assert read_run(store, run="fp16-1").nan_mask("loss").sum() == 1
