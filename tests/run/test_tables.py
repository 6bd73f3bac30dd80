"""Canonical tables: NaN stays apart from missing through read and export, in every format."""

import json
import math

import numpy as np
import pytest

from postmortem.run import RunReadError, read_run
from postmortem.run.export import export, info


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_nan_vs_missing_and_aliases(tmp_path):
    p = write_jsonl(tmp_path / "metrics.jsonl", [
        {"step": 0, "train/loss": 2.5, "learning_rate": 1e-3, "gnorm": 1.0},
        {"step": 1, "train/loss": float("nan"), "learning_rate": 1e-3},
        {"step": 2, "train/loss": float("inf"), "eval_loss": 3.0, "batch_hash": "ab12"},
    ])
    log = read_run(p)
    assert log.source.format == "jsonl"
    assert list(log.frame.columns[:5]) == ["segment", "step", "loss", "grad_norm", "lr"]
    assert log.nan_mask("loss").tolist() == [False, True, False]
    assert not log.nan_mask("grad_norm").any()          # missing at steps 1, 2: not NaN
    assert np.isinf(log.frame.loss.iloc[2]) and log.frame.val_loss.iloc[2] == 3.0
    assert log.frame.batch_hash.iloc[2] == "ab12"
    assert info(log)["metrics"][0] == {"name": "loss", "count": 3, "nan": 1, "inf": 1,
                                       "min": 2.5, "max": 2.5, "first_step": 0, "last_step": 2,
                                       "from": ["train/loss"]}


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_export_round_trip_keeps_nan_missing_and_segments(tmp_path, suffix):
    src = write_jsonl(tmp_path / "metrics.jsonl", [
        {"step": 10, "loss": 2.0, "lr": 0.1},
        {"step": 11, "loss": float("nan")},
        {"step": 12, "loss": 1.5, "lr": 0.1, "val_loss": 1.7},
        {"step": 11, "loss": 1.9, "lr": 0.05},              # a resume from step 10
        {"step": 12, "loss": 1.8, "lr": 0.05},
    ])
    log = read_run(src)
    assert [s["first_step"] for s in log.segments()] == [10, 11]
    out = export(log, tmp_path / f"clean{suffix}")
    back = read_run(out)
    assert back.frame.drop(columns="segment").equals(log.frame.drop(columns="segment")) or \
        np.allclose(back.frame[["step", "loss"]].to_numpy(), log.frame[["step", "loss"]].to_numpy(),
                    equal_nan=True)
    assert back.nan_mask("loss").tolist() == log.nan_mask("loss").tolist() == [False, True, False, False, False]
    assert not back.nan_mask("lr").any() and math.isnan(back.frame.lr.iloc[1])
    assert [s["first_step"] for s in back.segments()] == [10, 11]


def test_a_line_longer_than_the_readers_piece_is_read_whole(tmp_path, monkeypatch):
    """The JSONL and CSV readers take a file in pieces of whole lines; a line longer than a
    piece (or a log that grew while it was read) makes the piece bigger."""
    from postmortem.run import tables
    monkeypatch.setattr(tables, "_CHUNK", 64)
    rows = [{"step": s, "loss": 2.0 - s / 10, "note": "x" * (300 if s == 3 else 5)} for s in range(8)]
    log = read_run(write_jsonl(tmp_path / "metrics.jsonl", rows))
    assert log.frame.step.tolist() == list(range(8))
    assert log.frame.loss.tolist() == [2.0 - s / 10 for s in range(8)]


def test_csv_with_non_numeric_loss_names_line(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("step,loss,lr\n0,2.5,0.1\n1,oops,0.1\n")
    with pytest.raises(RunReadError, match=r"line 3: loss is 'oops', not a number"):
        read_run(p)


def test_csv_nan_spellings_and_empty_cells(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("step,loss,grad_norm\n0,2.5,\n1,nan,1.0\n2,-inf,NaN\n3,inf,2\n")
    log = read_run(p)
    assert log.nan_mask("loss").tolist() == [False, True, False, False]
    assert log.nan_mask("grad_norm").tolist() == [False, False, True, False]
    assert log.frame.loss.iloc[2] == -np.inf


def test_duplicate_steps_warn_and_keep_both(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("step,loss\n0,2.5\n1,2.4\n1,2.3\n2,2.2\n")
    log = read_run(p)
    # a step logged again with another value (a relaunch from that step) is never dropped:
    # both kept, the second opening a segment, with a warning (issue 24)
    assert [(s["first_step"], s["last_step"]) for s in log.segments()] == [(0, 1), (1, 2)]
    assert log.frame.loss.tolist() == [2.5, 2.4, 2.3, 2.2]
    assert any("logged again with other values" in w for w in log.source.warnings)


def test_truncated_jsonl_tail_is_dropped_with_warning(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 0, "loss": 2}\n{"step": 1, "loss": 1.9}\n{"step": 2, "lo')
    log = read_run(p)
    assert log.frame.step.tolist() == [0, 1]
    assert any("incomplete" in w for w in log.source.warnings)


def test_manifest_is_read_and_validated(tmp_path):
    write_jsonl(tmp_path / "metrics.jsonl", [{"step": 0, "loss": 1.0}])
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"run_id": "r1", "dtype": "bf16", "config": {"lr_max": 3e-4, "warmup_steps": 100}}))
    log = read_run(tmp_path)
    assert log.run_id == "r1" and log.dtype == "bf16" and log.manifest.config.lr_max == 3e-4
    (tmp_path / "manifest.json").write_text(json.dumps({"config": {"lr_max": "fast"}}))
    with pytest.raises(RunReadError, match="config.lr_max"):
        read_run(tmp_path)


def test_parquet_with_string_step_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"step": ["a", "b"], "loss": [1.0, 2.0]}), tmp_path / "m.parquet")
    with pytest.raises(RunReadError, match="step"):
        read_run(tmp_path / "m.parquet")
