"""The command line as a user runs it: exit codes, one-line errors, JSON shapes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pm(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def assert_one_line_error(result, *words, after_progress: bool = False):
    """Exit 2, one `postmortem: error:` line, no traceback. `after_progress`: a replay that
    failed once under way may have said its heading first (cli_run.one_line_error)."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    if after_progress:
        said, lines = lines[:-1], lines[-1:]
        assert all(x.startswith("postmortem: ") and "error" not in x for x in said), result.stderr
    assert len(lines) == 1 and lines[0].startswith("postmortem: error:"), result.stderr
    assert "Traceback" not in result.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.slow
def test_info_json(real_runs):
    r = pm("info", real_runs / "llmc-modded-nanogpt-llmc", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["run"]["format"] == "llm.c"
    loss = next(m for m in data["metrics"] if m["name"] == "loss")
    assert loss["count"] == 19560 and loss["nan"] == 0
    assert data["steps"] == {"rows": 19561, "first": 0, "last": 19560}


@pytest.mark.slow
def test_info_human_shows_segments_and_warnings(real_runs):
    r = pm("info", real_runs / "bloom-tr8-104B-chronicles")
    assert r.returncode == 0 and "3 segments" in r.stdout and "warning:" in r.stdout


@pytest.mark.slow
def test_export_then_read_back(real_runs, tmp_path):
    out = tmp_path / "clean.parquet"
    r = pm("export", real_runs / "wandb-alpaca-9am288wn", "-o", out)
    assert r.returncode == 0, r.stderr
    r = pm("info", out, "--json")
    data = json.loads(r.stdout)
    assert data["run"]["format"] == "parquet" and data["steps"]["rows"] == 196


@pytest.mark.slow
def test_analyze_json_shape_and_nan_incident(tmp_path):
    rows = [{"step": s, "loss": 2.0 - s / 1000, "grad_norm": 1.0, "lr": 1e-3} for s in range(200)]
    rows += [{"step": 200, "loss": float("nan"), "grad_norm": float("nan"), "lr": 1e-3},
             {"step": 201, "loss": float("nan"), "lr": 1e-3}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = pm("analyze", tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) == {"run", "checks", "incidents"}
    assert set(data["run"]) == {"id", "format", "steps", "metrics", "dtype", "warnings", "facts_from"}
    assert data["run"]["warnings"] == []
    assert {c["status"] for c in data["checks"]} <= {"pass", "fail", "skipped"}
    [inc] = data["incidents"]
    assert inc["kind"] == "nan" and inc["step"] == 200
    sym = inc["symptoms"]
    assert sym["spike_step"] == 200 and sym["recovery_loss"] == "did not recover"
    assert sym["lr"] == 1e-3 and 1.8 < sym["pre_spike_loss_ema50"] < 1.9
    assert set(sym) == {"spike_step", "pre_spike_loss_ema50", "peak_loss", "peak_step",
                        "recovery_loss", "grad_norm_pre_clip", "lr", "dtype", "batch_index",
                        "unusual_tokens"}


@pytest.mark.slow
def test_healthy_run_has_no_incident(real_runs):
    r = pm("analyze", real_runs / "hf-trainer-tinyllama-evalrows", "--json")
    assert json.loads(r.stdout)["incidents"] == []


@pytest.mark.slow
def test_bare_run_argument_analyzes(real_runs):
    r = pm(real_runs / "llmc-modded-nanogpt-llmc")
    assert r.returncode == 0 and "checklist A, did the run start right" in r.stdout and "A1 start loss" in r.stdout


# --- bad input: one line naming the file and the problem, exit 2 -------------------

@pytest.mark.slow
def test_missing_path(tmp_path):
    assert_one_line_error(pm("info", tmp_path / "nope"), "nope", "no such file")


@pytest.mark.slow
def test_empty_directory(tmp_path):
    assert_one_line_error(pm("info", tmp_path), "no training log found")


@pytest.mark.slow
def test_binary_garbage(tmp_path):
    p = tmp_path / "junk.bin"
    p.write_bytes(os.urandom(5000))
    assert_one_line_error(pm("info", p), "junk.bin", "unknown format")


@pytest.mark.slow
def test_truncated_trainer_state(real_runs, tmp_path):
    data = (real_runs / "hf-trainer-tinyllama-evalrows" / "trainer_state.json").read_bytes()
    p = tmp_path / "trainer_state.json"
    p.write_bytes(data[: len(data) // 2])
    assert_one_line_error(pm("info", p), "trainer_state.json", "truncated")


@pytest.mark.slow
def test_non_numeric_loss_in_csv(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss\n0,1.5\n1,n/a\n")
    assert_one_line_error(pm("analyze", p), "metrics.csv", "line 3", "loss")


@pytest.mark.slow
def test_directory_with_two_runs(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text('{"step": 0, "loss": 1}\n')
    r = pm("info", tmp_path)
    lines = r.stderr.strip().splitlines()       # the store's rule: one line, then one line a run
    assert r.returncode == 2 and len(lines) == 3 and "Traceback" not in r.stderr, r.stderr
    assert "2 different runs" in lines[0] and f"postmortem info {tmp_path} --run ID" in lines[0]
    assert lines[1].split()[0] == "a" and lines[2].split()[0] == "b"
    r = pm("info", tmp_path, "--run", "b", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["run"]["files"][0].endswith("b/metrics.jsonl"), r.stderr


@pytest.mark.slow
def test_unknown_export_suffix(real_runs, tmp_path):
    assert_one_line_error(pm("export", real_runs / "llmc-modded-nanogpt-llmc", "-o", tmp_path / "x.xlsx"),
                          "unknown export format")


@pytest.mark.slow
def test_unknown_format_flag(real_runs):
    assert_one_line_error(pm("info", real_runs / "llmc-modded-nanogpt-llmc", "--format", "excel"),
                          "unknown format")


@pytest.mark.slow
def test_two_gigabyte_file_is_refused_quickly(tmp_path):
    p = tmp_path / "huge.log"
    with open(p, "wb") as f:
        f.truncate(2 << 30)          # sparse: 2 GiB of zeros, no disk used
    assert_one_line_error(pm("info", p), "huge.log", "unknown format")


@pytest.mark.slow
def test_no_torch_or_textual_on_the_reading_path(real_runs):
    code = ("import sys; from postmortem.cli import main; "
            f"main(['analyze', {str(real_runs / 'llmc-modded-nanogpt-llmc')!r}, '--json']); "
            "bad = [m for m in ('torch', 'textual', 'tokenizers', 'git', 'yaml') if m in sys.modules]; "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_the_dashboard_without_a_terminal_says_what_to_run_instead():
    run = ROOT / "sample_runs" / "long-tail-token"
    r = pm("tui", run)                       # stdin and stdout are pipes here
    assert_one_line_error(r, "needs a terminal", "postmortem analyze")
    r = pm(run)                              # `postmortem RUN` in a pipe is the analysis
    assert r.returncode == 0 and "spike" in r.stdout


@pytest.mark.slow
def test_many_incidents_are_listed_a_line_each_with_the_largest_in_full(tmp_path):
    import numpy as np
    rng = np.random.default_rng(1)
    loss = 3.0 + 0.02 * rng.standard_normal(1800)
    sizes = {200 * k: 3.0 + 0.3 * k for k in range(1, 9)}        # eight spikes, growing
    for step, peak in sizes.items():
        loss[step] = peak
    run = tmp_path / "metrics.csv"
    run.write_text("step,loss\n" + "".join(f"{s},{v:.5f}\n" for s, v in enumerate(loss)))
    data = json.loads(pm("analyze", run, "--json").stdout)
    rises = {i["step"]: i["rise"] for i in data["incidents"]}
    assert sorted(rises) == sorted(sizes)
    for step, peak in sizes.items():
        assert abs(rises[step] - peak / 3.0) < 0.02, (step, rises[step])
    out = pm("analyze", run).stdout
    assert "8 incidents; the 5 that matter most in full below" in out and ": #8, #7, #6, #5, #4" in out
    full = [int(line.split("at step ")[1].split()[0]) for line in out.splitlines() if "spike of loss at step" in line]
    assert full == [1600, 1400, 1200, 1000, 800]                  # the largest first, in full
    assert all(f" {step} " in out for step in sizes)              # and every one on a line
    b2 = next(c["detail"] for c in data["checks"] if c["id"] == "B2")
    assert b2.startswith("8 spikes, the largest: step 1600 ")


@pytest.mark.slow
def test_analyze_against_another_run(tmp_path):
    import numpy as np
    rng = np.random.default_rng(4)
    for name in ("a", "b"):
        loss = 3.0 + 0.02 * rng.standard_normal(600)
        loss[300] = 5.0
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.csv").write_text(
            "step,loss\n" + "".join(f"{s},{v:.5f}\n" for s, v in enumerate(loss)))
    r = pm("analyze", tmp_path / "a", "--against", tmp_path / "b")
    assert r.returncode == 0 and "b spikes at step 300 too" in r.stdout
    assert_one_line_error(pm("analyze", tmp_path / "a", "--against", tmp_path / "nope"), "nope")
