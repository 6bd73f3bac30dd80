"""The `postmortem` command line (the console script is `postmortem.cli:main`)."""

from postmortem.cli.main import main

__all__ = ["main"]
