"""The `postmortem` command line (the console script is `postmortem.cli:main`)."""

from postmortem.cli.parser import main

__all__ = ["main"]
