"""Long work speaks (issue 26): on stderr, rich's progress on a terminal and one line a phase in
a pipe, and at the end what was written and what to type next; stdout keeps the result."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from postmortem.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_runs" / "long-tail-token"


def test_a_big_read_and_its_analysis_are_said_in_a_pipe_and_small_ones_are_not(capsys, monkeypatch):
    from postmortem.cli import progress
    assert main(["analyze", str(SAMPLE)]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == ""
    monkeypatch.setattr(progress, "BIG_READ", 1000)        # the sample's 0.1 MB as big as 1M steps
    monkeypatch.setattr(progress, "PIPE_AFTER_S", 0.0)     # and as long
    assert main(["analyze", str(SAMPLE)]) == 0
    said = capsys.readouterr()
    assert said.out == quiet.out
    assert said.err.splitlines() == [f"postmortem: reading {SAMPLE} (0.1 MB)",
                                     "postmortem: walking the checklists over 400 rows, finding the incidents"]
    assert main(["analyze", str(SAMPLE), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["id"] == "19-spike-001"


@pytest.mark.slow
def test_a_replay_in_a_pipe_says_each_arm_and_what_next_and_decodes_the_rare_tokens():
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-m", "postmortem", "replay", SAMPLE, "--arms", "swap-batch"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[:3] == ["postmortem: replaying the spike at step 250 on cpu, faithful first",
                         "postmortem: arm 1, faithful: 61 steps", "postmortem: arm 2, swap-batch: 61 steps"]
    assert lines[3].startswith("postmortem: replayed 2 arm(s) in ") and lines[3].endswith(
        f"nothing written (--json > FILE keeps it); next: `postmortem new {SAMPLE} --step 250 --replay` "
        "replays again and drafts the post-mortem with the evidence")
    (row,) = [x for x in r.stdout.splitlines() if "[per-token-loss]" in x]
    # what the percentiles are of, and the rare pieces as text (' r', not the byte-level 'Ġr')
    assert "of the per-token losses of step 250's batch were seen at most twice in training (' r', " in row
    assert "that batch's per-token losses: median " in row and "Ġ" not in row


@pytest.mark.slow
def test_a_replay_on_a_terminal_draws_its_bars_on_stderr_and_json_stays_alone(tmp_path):
    pytest.importorskip("torch")
    import pty
    import select
    leader, follower = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "postmortem", "replay", SAMPLE, "--arms", "faithful", "--json"],
                             stdout=subprocess.PIPE, stderr=follower, env={**os.environ, "TERM": "xterm"})
    os.close(follower)
    import threading
    got: dict = {}
    reader = threading.Thread(target=lambda: got.update(out=child.stdout.read()))    # stdout drained too
    reader.start()
    drawn = b""
    while True:                      # read the terminal as it is drawn: a full one would block the child
        ready, _, _ = select.select([leader], [], [], 600)
        assert ready, "the replay drew nothing for 600 s"
        try:
            chunk = os.read(leader, 65536)
        except OSError:              # the child is gone and its terminal with it
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    reader.join(60)
    assert child.wait(timeout=60) == 0
    assert json.loads(got["out"])["incident_step"] == 250                  # one JSON document
    text = drawn.decode(errors="replace")
    assert "faithful" in text and "61/61" in text and "━" in text, text[-2000:]


@pytest.mark.slow
def test_the_plain_loop_example_says_its_steps_where_it_wrote_and_what_next(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "runs" / "plain"
    r = subprocess.run([sys.executable, ROOT / "examples" / "plain_loop" / "train.py", "--out", out, "--steps", "60"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    steps = [line for line in r.stderr.splitlines() if line.startswith("training: step ")]
    assert [s.split(" loss ")[0] for s in steps] == ["training: step 0", "training: step 50", "training: step 59"]
    assert steps[-1].endswith(" of 60")
    assert r.stdout.splitlines() == [
        f"wrote {out}: checkpoints/, manifest.json, metrics.jsonl, replay.py, tinydata.py, train.py",
        f"next: postmortem analyze {out}    (then `postmortem replay {out}`, or `postmortem {out}` for the dashboard)"]


def test_a_big_file_refused_at_once_is_one_line(tmp_path):
    """A phase is said in a pipe only once it has lasted a second: a refusal stays one line."""
    from cli_run import one_line_error, postmortem
    huge = tmp_path / "huge.log"
    with huge.open("wb") as f:
        f.truncate(64 << 20)                     # 64 MB of nothing: a big read, refused at once
    assert "unknown format" in one_line_error(postmortem("analyze", huge))



def test_the_text_reader_says_the_bytes_it_has_scanned(tmp_path):
    from postmortem.run import read_run, readprogress
    log = tmp_path / "main.log"
    log.write_text("".join(f"s:{i} trl:{3 - i / 1e4:.4f} lr:0.0006 norm:0.{i % 97:02d}\n" for i in range(2000)))
    said: list[tuple[int, int]] = []
    with readprogress.listening(lambda done, total: said.append((done, total))):
        read_run(log)
    size = log.stat().st_size
    assert said and said[-1] == (size, size)
    assert [d for d, _ in said] == sorted(d for d, _ in said)          # never goes back
    said.clear()
    read_run(log)
    assert said == []                                                   # nobody listening: nothing said


@pytest.mark.slow
def test_a_big_read_on_a_terminal_draws_a_bar_of_the_bytes_scanned(tmp_path):
    import pty
    import re
    import select
    big = tmp_path / "main.log"                  # over BIG_READ (20 MB): a bar, not a spinner
    with big.open("w") as f:
        for start in range(0, 700_000, 50_000):
            f.write("".join(f"s:{i} trl:{3 - i / 1e6:.4f} lr:0.000600 norm:0.{i % 97:02d}\n"
                            for i in range(start, start + 50_000)))
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(COLUMNS="120", LINES="40", TERM="xterm")
        try:
            os.execv(sys.executable, [sys.executable, "-m", "postmortem", "info", str(big)])
        finally:
            os._exit(127)
    out = b""
    while select.select([fd], [], [], 120)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out[-2000:]
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode(errors="replace"))
    total = f"{big.stat().st_size / 1e6:.1f} MB"
    # the scan takes a fraction of a second; putting the columns together after it, longer:
    # the bar is drawn full then, whatever the frames drawn while it filled
    assert f"{total[:-3]}/{total}" in drawn and "0/? bytes" in drawn, drawn[:2000]
    assert "scanned; putting the columns together" in drawn


def test_a_replay_slow_to_start_says_so_once_and_one_refused_at_once_stays_one_line(capsys, monkeypatch):
    """Importing torch and loading the checkpoint took 20 s before the first step on a loaded
    machine, in silence: the heading comes once the start has lasted PIPE_AFTER_S, once."""
    import time

    from postmortem.cli import progress
    monkeypatch.setattr(progress, "PIPE_AFTER_S", 0.05)
    with progress.ArmSteps("replaying the spike at step 250 on cpu, faithful first") as steps:
        time.sleep(0.3)                                     # the checkpoint loading
        assert capsys.readouterr().err == "postmortem: replaying the spike at step 250 on cpu, faithful first\n"
        steps("faithful", 201, 1, 61)
        steps("faithful", 202, 2, 61)
        steps("swap-batch", 201, 1, 61)
    assert capsys.readouterr().err.splitlines() == [
        "postmortem: arm 1, faithful: 61 steps", "postmortem: arm 2, swap-batch: 61 steps"]
    monkeypatch.setattr(progress, "PIPE_AFTER_S", 5.0)
    with pytest.raises(RuntimeError), progress.ArmSteps("replaying the spike at step 250 on cpu"):
        raise RuntimeError("no checkpoint before step 250")  # refused at once: its one line is the error's
    time.sleep(0.1)
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_new_replay_refuses_a_draft_that_exists_before_replaying(tmp_path):
    """`new --replay -o FILE` over a FILE that exists is refused at once, not after the replay."""
    out = tmp_path / "draft.md"
    out.write_text("mine\n")
    r = subprocess.run([sys.executable, "-m", "postmortem", "new", SAMPLE, "--replay", "--learner", "ada",
                        "-o", out], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == f"postmortem: error: {out}: exists; --force overwrites it\n", r.stderr
    assert out.read_text() == "mine\n"
