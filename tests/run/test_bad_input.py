"""Bad input as a user meets it: a one-line error and exit 2, or a warning and the right numbers."""

import json
import os
import sqlite3
from pathlib import Path

import pytest
from test_cli import assert_one_line_error, pm

from postmortem.run import RunReadError, read_run

SAMPLE = Path(__file__).resolve().parents[2] / "sample_runs" / "long-tail-token"


def info(path, *args):
    r = pm("info", path, "--json", *args)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


def metric(data, name):
    return next(m for m in data["metrics"] if m["name"] == name)


@pytest.mark.slow
def test_jsonl_whose_first_line_is_longer_than_4kb(tmp_path):
    # the Recorder's own output for a 12-layer model: per-layer norms make a wide first record
    rows = [{"step": s, "loss": 2.0 - s / 10, **{f"grad_norm/h.{i}.attn.c_attn.weight": 0.1 * i
                                                 for i in range(120)}} for s in range(4)]
    p = tmp_path / "metrics.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert len(p.read_text().split("\n")[0]) > 4096
    data = info(p)
    assert metric(data, "loss")["max"] == 2.0 and data["steps"]["rows"] == 4
    assert metric(data, "grad_norm/h.7.attn.c_attn.weight")["min"] == pytest.approx(0.7)


@pytest.mark.slow
def test_complete_last_jsonl_line_without_newline_is_kept(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.9}\n{"step": 3, "loss": NaN}')
    data = info(p)
    assert metric(data, "loss")["count"] == 3 and metric(data, "loss")["nan"] == 1   # the crash's NaN
    assert not data["warnings"]


@pytest.mark.slow
def test_torn_last_jsonl_line_is_dropped_with_a_warning(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.9}\n{"step": 3, "lo')
    data = info(p)
    assert metric(data, "loss")["count"] == 2
    assert any("incomplete" in w for w in data["warnings"])


@pytest.mark.slow
def test_single_record_jsonl(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 7, "loss": 3.5}\n')
    data = info(p)
    assert data["steps"] == {"rows": 1, "first": 7, "last": 7}


@pytest.mark.slow
def test_bom_prefixed_and_non_utf8_headers(tmp_path):
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbfstep,loss\n1,2.0\n2,1.5\n")
    assert metric(info(bom), "loss")["min"] == 1.5
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"step,loss,pr\xe9cision\n1,2.0,0.5\n2,1.5,0.6\n")
    data = info(latin)
    assert metric(data, "précision")["max"] == 0.6
    assert any("Latin-1" in w for w in data["warnings"])
    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_bytes(b'\xef\xbb\xbf{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.0}\n')
    assert metric(info(jsonl), "loss")["count"] == 2


@pytest.mark.slow
def test_duplicate_csv_column(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss,loss\n1,2.0,3.0\n2,1.5,2.5\n")
    data = info(p)
    assert metric(data, "loss")["max"] == 2.0 and metric(data, "loss_2")["max"] == 3.0
    assert any("appears 2 times" in w for w in data["warnings"])


@pytest.mark.slow
def test_integer_above_2_53_in_a_csv(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss,tokens\n1,2.0,9007199254740993\n2,1.5,9007199254740995\n")
    data = info(p)
    assert metric(data, "tokens")["max"] == pytest.approx(9007199254740995)


@pytest.mark.slow
def test_token_counts_as_the_step_axis(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss\n1000000000000,2.0\n9100000000000,1.5\n20000000000000,1.4\n")
    data = info(p)
    assert data["steps"] == {"rows": 3, "first": 10**12, "last": 2 * 10**13}
    # a resume with steps of that size reads as two segments
    p.write_text("step,loss\n9100000000000,2.0\n9200000000000,1.5\n9100000000000,1.4\n")
    data = info(p)
    assert [s["first_step"] for s in data["segments"]] == [9100000000000] * 2


@pytest.mark.slow
def test_step_of_20_digits(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss\n1,2.0\n12345678901234567890,1.5\n")
    assert_one_line_error(pm("info", p), "beyond a 64-bit integer")


@pytest.mark.slow
def test_nan_step_rows_are_dropped_with_a_warning(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss\n1,2.0\nnan,1.5\n3,1.0\n")
    r = pm("info", p, "--json")
    assert r.returncode == 0 and r.stderr == "", r.stderr      # no numpy warning either
    data = json.loads(r.stdout)
    assert data["steps"]["rows"] == 2 and metric(data, "loss")["min"] == 1.0
    assert any("non-finite step" in w for w in data["warnings"])


def _mlflow_db(path, runs=("abc",)):
    con = sqlite3.connect(path)
    con.execute("create table runs(run_uuid)")
    con.execute("create table metrics(key, value, timestamp, run_uuid, step, is_nan)")
    for run in runs:
        for s in range(50):
            con.execute("insert into metrics values('loss', ?, ?, ?, ?, 0)", (1 / (s + 1), s, run, s))
    con.commit()
    con.close()


@pytest.mark.slow
def test_corrupt_truncated_and_foreign_mlflow_db(tmp_path):
    good = tmp_path / "mlflow.db"
    _mlflow_db(good)
    assert info(good)["steps"]["rows"] == 50
    data = good.read_bytes()
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(data[: len(data) // 3])
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(data[:100] + b"\x13" * (len(data) - 100))
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("create table metrics(a, b)")
    con.execute("create table runs(x)")
    con.commit()
    con.close()
    for bad in (truncated, corrupt, foreign):
        assert_one_line_error(pm("info", bad), "not a readable MLflow store")


@pytest.mark.slow
def test_json_nested_100000_deep(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").write_text('{"log_history": ' + "[" * 100000 + "]" * 100000 + "}")
    assert_one_line_error(pm("info", run), "nested too deeply")
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "loss": ' + "[" * 100000 + "]" * 100000 + "}\n")
    r = pm("info", p)
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr and "internal" not in r.stderr


@pytest.mark.slow
def test_manifest_json_that_is_a_directory(tmp_path):
    (tmp_path / "manifest.json").mkdir()
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.0}\n')
    data = info(tmp_path)
    assert metric(data, "loss")["count"] == 2
    assert any("manifest.json is a directory" in w for w in data["warnings"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a directory whatever its mode")
def test_unreadable_directory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    run.chmod(0)
    try:
        assert_one_line_error(pm("info", run), "ermission")
    finally:
        run.chmod(0o755)


def test_unreadable_directory_inside_a_run_is_named(tmp_path, monkeypatch):
    from pathlib import Path
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    (tmp_path / "locked").mkdir()
    real = Path.iterdir

    def iterdir(self):
        if self.name == "locked":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)
    monkeypatch.setattr(Path, "iterdir", iterdir)
    log = read_run(tmp_path)
    assert len(log.frame) == 1
    assert any("locked: Permission denied; not searched" in w for w in log.source.warnings)


@pytest.mark.slow
def test_broken_lightning_version_among_good_ones(tmp_path):
    logs = tmp_path / "lightning_logs"
    contents = {0: "epoch,step,train_loss\n0,9,2.0\n0,19,1.5\n", 1: "",
                2: "garbage\x00\x01,,\n", 3: "epoch,step,train_loss\n1,29,1.2\n1,39,1.1\n"}
    for v, text in contents.items():
        (logs / f"version_{v}").mkdir(parents=True)
        (logs / f"version_{v}" / "metrics.csv").write_text(text)
    data = info(tmp_path)
    assert metric(data, "loss")["count"] == 4 and len(data["segments"]) == 2
    warned = " ".join(data["warnings"])
    assert "version_1/metrics.csv" in warned and "version_2/metrics.csv" in warned


@pytest.mark.slow
def test_cut_off_last_csv_line_is_dropped_with_a_warning(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss,grad_norm\n1,2.0,1.0\n2,1.5,0.9\n3,1.")
    data = info(p)
    assert data["steps"]["last"] == 2 and metric(data, "grad_norm")["min"] == 0.9
    assert any("cut off" in w for w in data["warnings"])
    p.write_text("step,loss,grad_norm\n1,2.0,1.0\n2,1.5,0.9\n3,1.4,0.8")   # whole, no newline
    data = info(p)
    assert data["steps"]["last"] == 3 and not data["warnings"]


@pytest.mark.slow
def test_fifo_as_the_run_path_does_not_hang(tmp_path):
    fifo = tmp_path / "live.log"
    os.mkfifo(fifo)
    assert_one_line_error(pm("info", fifo), "FIFO")
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    assert info(tmp_path)["steps"]["rows"] == 1      # a FIFO inside a run is never opened


@pytest.mark.slow
def test_symlinked_log_file_is_read(tmp_path):
    real = tmp_path / "elsewhere" / "metrics.jsonl"
    real.parent.mkdir()
    real.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.0}\n')
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").symlink_to(real)
    (run / "loop").symlink_to(run)                  # a link back up is not followed
    (run / "dataset").symlink_to(real.parent)       # nor a linked folder (a dataset, a disk)
    data = info(run)
    assert metric(data, "loss")["count"] == 2 and data["run"]["files"] == [str(run / "metrics.jsonl")]


@pytest.mark.slow
def test_csv_with_no_step_column_reads_by_row(tmp_path):
    p = tmp_path / "history.csv"
    p.write_text("loss,accuracy\n2.0,0.1\n1.5,0.2\n1.2,0.3\n")
    data = info(p)
    assert data["steps"] == {"rows": 3, "first": 0, "last": 2}
    assert any("read by row" in w for w in data["warnings"])


@pytest.mark.slow
def test_step_column_given_as_nan_in_jsonl_is_an_error_not_a_crash(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": "x", "loss": 2.0}\n{"step": 2, "loss": 1.0}\n')
    r = pm("info", p)
    assert r.returncode in (0, 2) and "internal" not in r.stderr, r.stderr


def test_read_run_api_raises_only_run_read_error(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss\n1,2.0\n12345678901234567890,1.5\n")
    with pytest.raises(RunReadError):
        read_run(p)


# --- thresholds: the field named, and what it takes ------------------------------------

@pytest.mark.slow
def test_an_unknown_threshold_is_named_with_the_known_ones():
    from postmortem.diagnose.thresholds import Thresholds
    r = pm("analyze", SAMPLE, "--set", "foo=3")
    assert_one_line_error(r, "--set foo: unknown threshold; known: ", *Thresholds.model_fields)
    r = pm("analyze", SAMPLE, "--set", "spike_sigm=3")
    assert_one_line_error(r, "--set spike_sigm: unknown threshold (did you mean spike_sigma?)")
    assert "validation error" not in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("item, said", [
    ("spike_sigma=abc", "--set spike_sigma=abc: not a number"),
    ("spike_sigma=nan", "--set spike_sigma=nan: not a number"),
    ("spike_window=12.5", "--set spike_window=12.5: not a whole number"),
    ("spike_sigma", "--set spike_sigma: NAME=VALUE expected"),
    ("=4", "--set =4: NAME=VALUE expected"),
])
def test_a_bad_threshold_value_says_what_the_field_takes(item, said):
    assert_one_line_error(pm("analyze", SAMPLE, "--set", item), said)


@pytest.mark.slow
def test_a_bad_thresholds_file_names_the_file_and_the_field(tmp_path):
    cases = {"wrong.json": ('{"spike_window": "wide"}', 'spike_window="wide": not a whole number'),
             "unknown.json": ('{"spike_sigmaa": 4}', "spike_sigmaa: unknown threshold (did you mean spike_sigma?)"),
             "list.json": ("[4]", "thresholds are a JSON object"),
             "broken.json": ('{"spike_sigma": ', "not JSON"),
             "flag.json": ('{"spike_sigma": true}', "spike_sigma=true: not a number")}
    for name, (text, said) in cases.items():
        (tmp_path / name).write_text(text)
        assert_one_line_error(pm("analyze", SAMPLE, "--thresholds", tmp_path / name), name, said)
    assert_one_line_error(pm("analyze", SAMPLE, "--thresholds", tmp_path / "none.json"),
                          "none.json: cannot read the thresholds")


def test_thresholds_from_a_file_and_set_both_apply(tmp_path, capsys):
    from postmortem.cli import main
    (tmp_path / "th.json").write_text('{"spike_sigma": 1000, "spike_big_rise": 1000}')
    assert main(["analyze", str(SAMPLE), "--json", "--thresholds", str(tmp_path / "th.json")]) == 0
    quiet = json.loads(capsys.readouterr().out)
    assert not [i for i in quiet["incidents"] if i["metric"] == "loss" and i["kind"] == "spike"]
    assert main(["analyze", str(SAMPLE), "--json", "--thresholds", str(tmp_path / "th.json"),
                 "--set", "spike_sigma=7", "--set", "spike_big_rise=0.3"]) == 0
    back = json.loads(capsys.readouterr().out)
    assert [i["step"] for i in back["incidents"] if i["metric"] == "loss"] == [250]
