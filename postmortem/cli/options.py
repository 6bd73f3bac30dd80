"""What several commands take: the run they read, and the runs it is compared against; how
each command explains itself in --help."""

from __future__ import annotations

import argparse
import json

FORMATS_HELP = "{formats}"       # filled from the reader registry when help is printed


class Help(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written; the format names listed from the readers
    themselves, imported only when a help is printed (the registry costs ~0.7 s to import)."""

    def _get_help_string(self, action):
        text = super()._get_help_string(action)
        if text and FORMATS_HELP in text:
            text = text.replace(FORMATS_HELP, ", ".join(format_names()))
        return text

    def _split_lines(self, text, width):
        # names whole: never `metric-` / `lines`, `long-tail-` / `token`
        import textwrap
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False,
                             break_long_words=False)


class Parser(argparse.ArgumentParser):
    """argparse with its errors in one line, as every other error of the command line, and
    where to read what the command takes."""

    def error(self, message: str):
        command = self.prog.removeprefix("postmortem").strip()
        self.exit(2, f"postmortem: error: {command + ': ' if command else ''}{message} "
                     f"(`{self.prog} --help` says what it takes)\n")


def format_names() -> tuple[str, ...]:
    """The names --format takes: the reader registry's own list."""
    from postmortem.run.readers import formats
    return formats()


def examples(*lines: str) -> str:
    """An epilog of examples, one command a line, each with what it does after a `#`."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def command(sub, name: str, help: str, description: str | None = None,
            example: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A command with a one-line help (the top-level list), a description and examples."""
    return sub.add_parser(name, help=help, description=description or help[0].upper() + help[1:] + ".",
                          epilog=examples(*example) if example else None, formatter_class=Help)


def run_command(sub, name: str, help: str, description: str | None = None,
                example: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A command whose first argument is a run, read as detected or as `--format` says."""
    p = command(sub, name, help, description, example)
    p.add_argument("run", metavar="RUN", help="a run directory or a log file, or a store of runs "
                                            "(mlruns/, mlflow.db, http://host:port, lightning_logs/, ...)")
    add_format(p)
    add_columns(p)
    add_run_id(p)
    return p


def add_run_id(p: argparse.ArgumentParser) -> None:
    """--run ID: one run of a store that holds several (`postmortem runs STORE` lists them)."""
    p.add_argument("--run", dest="run_id", metavar="ID",
                   help="the run to read in a store of several (an MLflow store or server, lightning_logs/, "
                        "a TensorBoard logdir, wandb/, a work dir): its id, name or folder")


def add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", metavar="NAME",
                   help=f"read as this format instead of detecting it: {FORMATS_HELP}")


def add_repo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kb", "--repo", dest="kb", metavar="DIR",
                   help="the knowledge-base repository (default: POSTMORTEM_KB, else the one `postmortem "
                        "init` named, else the git repository you stand in)")


def add_learner(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--learner", metavar="NAME",
                   help=f"{what} (default: POSTMORTEM_LEARNER, else the one `postmortem init` named)")


def print_json(data, allow_nan: bool = False) -> None:
    """The one JSON document a command prints on stdout with --json. A value JSON has no
    form for is printed as its text; NaN is refused (allow_nan=False) except by the commands
    that have always printed it as NaN (init, lessons, similar)."""
    print(json.dumps(data, indent=2, allow_nan=allow_nan, default=str))


def add_json(p: argparse.ArgumentParser, what: str = "the result") -> None:
    p.add_argument("--json", action="store_true",
                   help=f"print {what} as one JSON document on stdout (messages go to stderr)")


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
            "step": getattr(args, "step_column", None), "run": getattr(args, "run_id", None)}


def add_against(p: argparse.ArgumentParser) -> None:
    p.add_argument("--against", action="append", metavar="OTHER",
                   help="another run over the same data in the same order (another optimizer, LR, "
                        "precision or seed): a spike at the same step there points at the batch; repeatable")
