"""The command ends cleanly: `info --json` and `analyze --json` once aborted at exit
("terminate called without an active exception", SIGABRT) after printing correct output,
pyarrow's reader threads being torn down by the interpreter's exit. The command now ends
without that teardown (postmortem.cli.leave)."""

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNS = [ROOT / "sample_runs" / name for name in ("long-tail-token", "fp16-overflow", "healthy")]


@pytest.mark.slow
def test_the_command_ends_without_the_interpreters_teardown():
    """Where the native pools were torn down is never reached: an exit hook registered
    before the command does not run, and the output is whole."""
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.stderr.write('torn down\\n'))\n"
            "from postmortem.cli import main\n"
            "main()\n")
    done = subprocess.run([sys.executable, "-c", code, "info", "--json", str(RUNS[0])],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "torn down" not in done.stderr and json.loads(done.stdout)["run"]["id"] == "19-spike-001"


@pytest.mark.slow
def test_info_and_analyze_json_exit_cleanly_every_time():
    """48 fresh processes, three at a time (the load that caught the abort): each exits 0
    with its whole JSON and nothing on stderr."""
    commands = [[str(Path(sys.executable).parent / "postmortem"), cmd, "--json", str(run)]
                for _ in range(8) for cmd in ("info", "analyze") for run in RUNS]

    def one(cmd):
        return cmd, subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    with ThreadPoolExecutor(3) as pool:
        for cmd, done in pool.map(one, commands):
            assert done.returncode == 0 and not done.stderr.strip(), (cmd[1:], done.returncode, done.stderr[-500:])
            json.loads(done.stdout)
