"""Running the real `postmortem` command in a child, as a user does, and reading its one-line errors."""

import subprocess
import sys


def postmortem(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def one_line_error(r: subprocess.CompletedProcess) -> str:
    """The error line of a refused command: exit code 2, one line on stderr, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr[-2000:])
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    return lines[0]
