"""MLflow stores and W&B logs, written the way those tools write them."""

import sqlite3

import numpy as np
import pytest
from writers import wandb_history, write_wandb

from postmortem.run import RunReadError, read_run

DBL_MAX = 1.7976931348623157e308


def make_mlflow_db(path, runs):
    con = sqlite3.connect(path)
    con.executescript("""
        create table runs (run_uuid text primary key, name text);
        create table params (key text, value text, run_uuid text);
        create table metrics (key text, value float, timestamp bigint, run_uuid text,
                              step bigint, is_nan boolean);""")
    for run_id, rows in runs.items():
        con.execute("insert into runs values (?, ?)", (run_id, run_id))
        con.execute("insert into params values ('lr', '0.001', ?)", (run_id,))
        for key, step, value, is_nan in rows:
            con.execute("insert into metrics values (?, ?, ?, ?, ?, ?)",
                        (key, 0.0 if is_nan else value, 1000 + step, run_id, step, is_nan))
    con.commit()
    con.close()
    return path


def test_mlflow_db_nan_and_inf(tmp_path):
    rows = [("loss", 0, 2.0, 0), ("loss", 1, 0.0, 1), ("loss", 2, DBL_MAX, 0),
            ("train/grad_norm", 0, 1.0, 0), ("train/grad_norm", 2, -DBL_MAX, 0)]
    db = make_mlflow_db(tmp_path / "mlflow.db", {"abc": rows})
    log = read_run(db)
    f = log.frame
    assert log.source.format == "mlflow-db"
    assert log.nan_mask("loss").tolist() == [False, True, False]
    assert f.loss.iloc[2] == np.inf and f.grad_norm.iloc[2] == -np.inf
    assert log.source.extras["params"] == {"lr": "0.001"}


def test_mlflow_db_with_two_runs_is_refused(tmp_path):
    db = make_mlflow_db(tmp_path / "mlflow.db", {"a": [("loss", 0, 1.0, 0)], "b": [("loss", 0, 1.0, 0)]})
    with pytest.raises(RunReadError, match="2 different runs") as err:
        read_run(db)
    assert [r.id for r in err.value.runs] == ["a", "b"] and "--run ID" in str(err.value)
    assert read_run(db, run="b").source.extras["mlflow_run_id"] == "b"


def test_mlflow_file_store_nested_keys(tmp_path):
    run = tmp_path / "mlruns" / "0" / "r1"
    (run / "metrics" / "train").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: r1\nstatus: 3\n")
    (run / "metrics" / "train" / "loss").write_text("1000 2.5 0\n1001 nan 1\n1002 2.3 2\n")
    (run / "metrics" / "lr").write_text("1000 0.1 0\n1002 0.1 2\n")
    log = read_run(tmp_path / "mlruns")
    assert log.source.format == "mlflow"
    assert log.frame.loss.notna().sum() == 2 and log.nan_mask("loss").tolist() == [False, True, False]
    (run / "metrics" / "lr").write_text("1000 zero 0\n")
    with pytest.raises(RunReadError, match="line 1"):
        read_run(tmp_path / "mlruns")


def test_wandb_written_log_spanning_blocks(tmp_path):
    recs = [wandb_history(s, {"train/loss": f"{3 - s / 1000}", "train/grad_norm": "NaN" if s == 500 else "1.5",
                              "train/global_step": str(s + 1), "_step": str(s),
                              "padding": '"' + "x" * 200 + '"'})
            for s in range(1000)]
    p = write_wandb(tmp_path / "run-1" / "run-1.wandb", recs)
    assert p.stat().st_size > 3 * 32768
    log = read_run(tmp_path / "run-1")
    f = log.frame
    assert len(f) == 1000 and f.step.iloc[0] == 1
    assert log.nan_mask("grad_norm").sum() == 1 and f.loc[f.step == 501, "grad_norm"].isna().all()
    # A log still being written: the torn tail is dropped with a warning
    p.write_bytes(p.read_bytes()[:-50])
    log = read_run(tmp_path / "run-1")
    assert len(log.frame) == 999 and any("truncated" in w for w in log.source.warnings)


def test_wandb_truncated_real_file(real_runs, tmp_path):
    src = next((real_runs / "wandb-alpaca-9am288wn").rglob("*.wandb"))
    data = src.read_bytes()
    cut = tmp_path / "run-x" / "run-x.wandb"
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) // 2])
    log = read_run(cut)
    assert 0 < len(log.frame) < 196
    assert any("truncated" in w or "CRC" in w for w in log.source.warnings)


def test_a_store_of_many_runs_lists_forty_and_says_how_many_more(tmp_path):
    db = make_mlflow_db(tmp_path / "mlflow.db", {f"r{k:03d}": [("loss", 0, 1.0, 0)] for k in range(100)})
    with pytest.raises(RunReadError) as err:
        read_run(db)
    lines = str(err.value).splitlines()
    assert len(lines) == 42 and "60 more" in lines[-1] and "postmortem runs" in lines[-1]
    assert read_run(db, run="r099").source.extras["mlflow_run_id"] == "r099"


def test_deleted_mlflow_runs_are_not_listed(tmp_path):
    db = make_mlflow_db(tmp_path / "mlflow.db", {"a": [("loss", 0, 1.0, 0)], "b": [("loss", 0, 2.0, 0)]})
    con = sqlite3.connect(db)
    con.execute("alter table runs add column lifecycle_stage text default 'active'")
    con.execute("update runs set lifecycle_stage = 'deleted' where run_uuid = 'b'")
    con.commit()
    con.close()
    assert read_run(db).source.extras["mlflow_run_id"] == "a"      # the one run left


def test_run_reaches_a_text_log_beside_structured_ones(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "metrics.jsonl").write_text('{"step": 0, "loss": 1}\n{"step": 1, "loss": 0.9}\n')
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "train.log").write_text("".join(f"step {s} | loss {2 - s / 10:.3f}\n" for s in range(20)))
    assert read_run(tmp_path).source.format == "jsonl"             # structured first, as ever
    log = read_run(tmp_path, run="b")
    assert len(log.frame) == 20 and log.source.path.endswith("train.log")
