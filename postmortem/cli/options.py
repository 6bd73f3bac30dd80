"""What several commands take: the run they read, and the runs it is compared against."""

from __future__ import annotations

import argparse


def run_command(sub, name: str, help: str) -> argparse.ArgumentParser:
    """A command whose first argument is a run, read as detected or as `--format` says."""
    p = sub.add_parser(name, help=help, description=help)
    p.add_argument("run", metavar="RUN", help="a run directory or a log file")
    p.add_argument("--format", help="read as this format instead of detecting it")
    return p


def add_against(p: argparse.ArgumentParser) -> None:
    p.add_argument("--against", action="append", metavar="OTHER",
                   help="another run over the same data in the same order (another optimizer, LR, "
                        "precision or seed): a spike at the same step there points at the batch; repeatable")
