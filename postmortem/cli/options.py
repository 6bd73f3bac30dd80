"""What several commands take: the run they read, and the runs it is compared against."""

from __future__ import annotations

import argparse


def run_command(sub, name: str, help: str) -> argparse.ArgumentParser:
    """A command whose first argument is a run, read as detected or as `--format` says."""
    p = sub.add_parser(name, help=help, description=help)
    p.add_argument("run", metavar="RUN", help="a run directory or a log file")
    p.add_argument("--format", help="read as this format instead of detecting it")
    add_columns(p)
    return p


def add_columns(p: argparse.ArgumentParser, step_flag: bool = True) -> None:
    """--loss and --step: the columns that are the loss and the step, where the rules pick others."""
    p.add_argument("--loss", metavar="COLUMN", help="the column that is the loss (info says which "
                                                    "one was picked, and why)")
    names = ("--step", "--step-column") if step_flag else ("--step-column",)
    p.add_argument(*names, dest="step_column", metavar="COLUMN",
                   help="the column that is the step, in a table (default: step, global_step, ..., "
                        "then epoch, then the row number)")


def read_options(args) -> dict:
    """read_run's keywords from the parsed arguments."""
    return {"format": getattr(args, "format", None), "loss": getattr(args, "loss", None),
            "step": getattr(args, "step_column", None)}


def add_against(p: argparse.ArgumentParser) -> None:
    p.add_argument("--against", action="append", metavar="OTHER",
                   help="another run over the same data in the same order (another optimizer, LR, "
                        "precision or seed): a spike at the same step there points at the batch; repeatable")
