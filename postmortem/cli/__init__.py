"""The `postmortem` command line (the console script is `postmortem.cli:main`)."""

from __future__ import annotations

import os
import sys

from postmortem.cli import parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. As the command itself (no `argv`: the console script, `python -m
    postmortem`), the process ends here once its output is flushed (`leave`); a caller in this
    process (a test, a script) gets the exit code back."""
    code = parser.main(argv)
    if argv is None:
        leave(code)
    return code


def leave(code: int) -> None:
    """Flush and end the process without the interpreter's teardown: pyarrow's reader threads
    (its CPU pool's workers and its allocator's background thread) are alive at exit, and the
    C++ runtime destroying them while one still runs aborts the process after its output was
    printed ("terminate called without an active exception", SIGABRT). Every file a command
    writes is closed before it returns, and child processes are waited for."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):        # a closed pipe, a closed stream: nothing to flush to
            pass
    os._exit(code)


__all__ = ["main"]
