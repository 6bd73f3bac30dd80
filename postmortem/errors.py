"""What the user can act on: one error base, one kind a layer. The command line prints any of
them as one line, `postmortem: error: ...`, and exits 2; anything else is a bug of ours."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """Bad input or a refusal, said in one line; the command exits with `exit_code`."""

    exit_code = 2


class RunReadError(UserError):
    """A run that cannot be read; the message is one line naming file and problem."""

    def __init__(self, path: str | Path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class IncidentError(UserError):
    """The run has no incident where one was asked for (none at all, or none near a step)."""


class DocumentError(UserError, ValueError):
    """A post-mortem file that cannot be read or written as asked; the message says where."""


class KBError(UserError):
    """A refusal of the knowledge base, as one line."""


class ReplayError(UserError):
    """A replay that cannot start: no entry point, no checkpoint, one that refuses to load,
    an unknown arm."""


class UsageError(UserError):
    """A command-line value the command cannot use (a threshold, a sample name)."""
