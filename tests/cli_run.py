"""Running the real `postmortem` command in a child, as a user does, and reading its one-line errors."""

import subprocess
import sys


def postmortem(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def one_line_error(r: subprocess.CompletedProcess, after_progress: bool = False) -> str:
    """The error line of a refused command: exit code 2, one line on stderr, no traceback.
    `after_progress`: work that failed once under way (a replay whose run's code fails at a
    step) may have said its phases first (`postmortem: replaying ...`, one line each in a
    pipe); the error is still one line, the last, and the only one that says error."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr[-2000:])
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    if after_progress:
        said, lines = lines[:-1], lines[-1:]
        assert all(x.startswith("postmortem: ") and "error" not in x for x in said), r.stderr[-2000:]
    assert len(lines) == 1, r.stderr[-2000:]
    return lines[0]
