"""postmortem's own child processes (the loader, the replay worker, the figure): the same
interpreter and the same postmortem as the parent, whatever folder they start in. `python -m`
would put the working directory first on the child's path, and a `postmortem` package there
(a checkout of another version) would be the one it imports."""

from __future__ import annotations

import sys


def command(module: str, *args: str) -> list[str]:
    """`python -m module args...` without the working directory on the child's path."""
    code = ("import runpy, sys\n"
            "if not getattr(sys.flags, 'safe_path', False):\n"
            "    del sys.path[0]          # the working directory, as -c puts it there\n"
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n")
    return [sys.executable, "-c", code, *args]
