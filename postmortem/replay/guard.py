"""The run's own code, run under guard: what it prints goes to stderr (stdout carries
`replay --json`), and a `sys.exit` in it is an error in one line, not a silent exit."""

from __future__ import annotations

import contextlib
import os
import sys

from postmortem.errors import ReplayError


@contextlib.contextmanager
def users_code(where: str):
    """Send fd 1 and sys.stdout to stderr while the run's code runs, then back; turn its
    SystemExit into a ReplayError naming `where`."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)               # prints from C extensions and subprocesses too
    before, sys.stdout = sys.stdout, sys.stderr
    try:
        yield
    except SystemExit as err:
        raise ReplayError(f"{where}: the run's code called sys.exit({err.code!r}) during the replay") from None
    finally:
        sys.stderr.flush()
        sys.stdout = before
        os.dup2(saved, 1)
        os.close(saved)
