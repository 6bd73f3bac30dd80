"""`postmortem replay RUN --nproc N`: a run trained under torchrun (DDP, gloo on CPU) replayed
on as many processes, faithfully and with its cause first; bad --nproc values, a run replayed
on another number of processes and a rank that fails, each said in one line."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import one_line_error, postmortem

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plain_loop" / "train.py"
SAMPLE = ROOT / "sample_runs" / "long-tail-token"
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
two_cores = pytest.mark.skipif(CORES < 2, reason="--nproc 2 on CPU needs 2 cores")
pytestmark = pytest.mark.slow          # each test starts the command line, most of them torchrun


@pytest.mark.parametrize("value, said", [
    ("0", "--nproc 0: expected 1 or more processes"),
    ("two", "--nproc 'two': expected a whole number of processes"),
    (str(CORES + 1), f"--nproc {CORES + 1}: this machine has {CORES} CPU core(s)"),
])
def test_a_bad_nproc_is_one_line(value, said):
    assert said in one_line_error(postmortem("replay", SAMPLE, "--device", "cpu", "--nproc", value))


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """The plain loop trained on 2 processes under torchrun, a batch of rare tokens at 250."""
    out = tmp_path_factory.mktemp("ddp") / "run"
    r = subprocess.run([sys.executable, str(EXAMPLE), "--out", str(out), "--inject", "long-tail-token",
                        "--nproc", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@two_cores
def test_a_ddp_run_replays_faithfully_on_two_processes_with_its_cause_first(ddp_run):
    manifest = json.loads((ddp_run / "manifest.json").read_text())
    assert manifest["config"]["world_size"] == 2
    found = postmortem("analyze", ddp_run, "--json")
    assert found.returncode == 0, found.stderr
    incidents = json.loads(found.stdout)["incidents"]
    assert incidents and incidents[0]["step"] == 250, [(i["kind"], i["step"]) for i in incidents]
    r = postmortem("replay", ddp_run, "--nproc", "2", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)          # stdout is rank 0's result and nothing else
    # the logged loss is the mean of the 2 ranks' losses; the replay's is the same, bit for bit
    assert result["faithful"] and result["faithful_max_diff"] == 0.0, result["evidence"][:2]
    assert result["hypotheses"][0]["pattern"] == "long-tail-token", \
        [(h["pattern"], h["score"]) for h in result["hypotheses"]]
    assert result["arms"]["swap-batch"]["losses"], result["arms"]


@two_cores
def test_a_ddp_run_replayed_on_another_number_of_processes_is_refused(ddp_run):
    err = one_line_error(postmortem("replay", ddp_run, "--device", "cpu"))
    assert "trained on 2 processes" in err and "--nproc 2" in err
    err = one_line_error(postmortem("replay", ddp_run, "--device", "cpu", "--nproc", "1"))
    assert "replay it with --nproc 2" in err


def rank_one_does(ddp_run, tmp_path, code: str) -> Path:
    """A copy of the run whose replay factory runs `code` (indented lines) on rank 1."""
    run = shutil.copytree(ddp_run, tmp_path / "run")
    source = (run / "replay.py").read_text()
    (run / "replay.py").write_text(source.replace(
        "    device = torch.device(device)\n", "    device = torch.device(device)\n    if rank == 1:\n" + code))
    return run


@two_cores
def test_a_rank_that_fails_is_one_line_naming_it(ddp_run, tmp_path):
    run = rank_one_does(ddp_run, tmp_path, "        raise OSError('shard 1 is gone')\n")
    err = one_line_error(postmortem("replay", run, "--nproc", "2", "--arms", "faithful"), after_progress=True)
    assert err.startswith("postmortem: error: rank 1:") and "OSError: shard 1 is gone" in err, err


@two_cores
def test_a_rank_that_dies_without_a_word_is_one_line(ddp_run, tmp_path):
    run = rank_one_does(ddp_run, tmp_path, "        import os, signal\n        os.kill(os.getpid(), signal.SIGKILL)\n")
    err = one_line_error(postmortem("replay", run, "--nproc", "2", "--arms", "faithful"), after_progress=True)
    assert "rank 1 died without a word: Signal 9 (SIGKILL)" in err and "exit code" in err, err
