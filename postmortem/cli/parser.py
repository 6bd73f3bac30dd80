"""The `postmortem` command line: the parser of every command, and `main`, the dispatch (the
console script `postmortem.cli:main`). Each command imports only what it needs when it runs."""

from __future__ import annotations

import argparse
import os
import sys

from postmortem import __version__
from postmortem.cli import init, postmortems, replay, runs, scan
from postmortem.cli.options import Help, Parser
from postmortem.errors import UserError

SESSION = """\
a typical session:
  postmortem init --kb ~/postmortems --learner ada   # once: where post-mortems go, and as whom
  postmortem info runs/r17                      # what was read: format, steps, metrics
  postmortem analyze runs/r17                   # the checklists, the incidents, their causes
  postmortem tui runs/r17                       # the same on a dashboard; r replays, e writes
  postmortem replay runs/r17 --step 4200        # the steps around it again, in counterfactual arms
  postmortem new runs/r17                       # a draft post-mortem of the incident
  postmortem check 2026-11-23-r17.md            # what is left to fill in, the numbers against the run
  postmortem commit 2026-11-23-r17.md           # into learners/ada/ of ~/postmortems, with its lesson
  postmortem lessons --pattern long-tail        # what everyone learned
every command that prints a result takes --json (one JSON document on stdout)."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="postmortem", formatter_class=Help, epilog=SESSION,
        description="The hour after a training run misbehaves: read the run, find the incident,\n"
                    "rank its causes, replay it, write the post-mortem and keep its lesson.\n"
                    "`postmortem RUN` opens the dashboard in a terminal, prints the analysis in a pipe.")
    parser.add_argument("--version", action="version", version=f"postmortem {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                title="commands (`postmortem COMMAND --help` explains each, with examples)")
    runs.register(sub)
    scan.register(sub)
    postmortems.register(sub)
    replay.register(sub)
    init.register(sub)
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    """The command names, as the subparsers hold them."""
    return set(_subparsers(parser).choices)


def _refuse_a_misspelt_command(parser, word: str, commands: set[str]) -> None:
    """`postmortem analyse RUN` is a typo, not a run called analyse: said so, not read."""
    import difflib
    if word.startswith("-") or os.path.exists(word):
        return
    close = difflib.get_close_matches(word, sorted(commands - {"-h", "--help", "--version"}), n=1)
    if close:
        parser.error(f"{word}: no such command or file; did you mean `postmortem {close[0]}`?")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    commands = _commands(parser) | {"-h", "--help", "--version"}
    if argv and argv[0] not in commands:
        _refuse_a_misspelt_command(parser, argv[0], commands)
        # `postmortem RUN`: the dashboard in a terminal, the analysis in a pipe or a script
        argv = ["tui" if sys.stdout.isatty() and sys.stdin.isatty() else "analyze", *argv]
    args, extra = parser.parse_known_args(argv)
    if extra:       # said by the command they were given to, with its --help
        _subparsers(parser).choices.get(args.command, parser).error(
            f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except UserError as err:
        if hasattr(err, "for_command"):        # a store's listing says the command given
            err.for_command(args.command)
        print(f"postmortem: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("postmortem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # a bug of ours: one line, the traceback on request
        if os.environ.get("POSTMORTEM_DEBUG"):
            raise
        print(f"postmortem: internal error: {type(err).__name__}: {err} "
              f"(POSTMORTEM_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 3
