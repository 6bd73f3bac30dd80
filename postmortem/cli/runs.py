"""The commands over one run: info, export, analyze, sample, tui."""

from __future__ import annotations

import json
import sys

from postmortem.cli.options import add_against, read_options, run_command


def _read(args):
    from postmortem.run import read_run
    return read_run(args.run, **read_options(args))


def _others(args) -> list:
    """The runs named by --against (same data, same order), read like the run itself."""
    from postmortem.run import read_run
    return [read_run(path) for path in args.against or []]


def cmd_info(args) -> int:
    from postmortem.run.export import info
    data = info(_read(args))
    if args.json:
        print(json.dumps(data, indent=2, allow_nan=False, default=str))
        return 0
    from postmortem.cli.report import print_info
    print_info(data)
    return 0


def cmd_export(args) -> int:
    from postmortem.run.export import export
    log = _read(args)
    out = export(log, args.output)
    print(f"wrote {out} ({len(log.frame)} rows, {len(log.metrics)} metrics)", file=sys.stderr)
    return 0


def cmd_analyze(args) -> int:
    from pydantic import ValidationError

    from postmortem.diagnose.analyze import analyze
    from postmortem.diagnose.thresholds import Thresholds
    from postmortem.errors import UsageError
    try:
        thresholds = Thresholds.load(args.thresholds, args.set or [])
    except (ValidationError, ValueError, OSError) as err:
        raise UsageError(f"{args.thresholds or '--set'}: bad thresholds: {str(err).splitlines()[0]}") from None
    result = analyze(_read(args), thresholds, against=_others(args))
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    from postmortem.cli.report import print_analysis
    print_analysis(result)
    return 0


def cmd_sample(args) -> int:
    from pathlib import Path

    from postmortem.minigpt.samples import SAMPLES
    if args.action == "list":
        for name, (cfg, what) in SAMPLES.items():
            print(f"{name:24s} {cfg.run_id:28s} {what[:60]}")
        return 0
    names = args.names or list(SAMPLES)
    unknown = [n for n in names if n not in SAMPLES]
    if unknown:
        from postmortem.errors import UsageError
        raise UsageError(f"{unknown[0]}: no such sample run; known: {', '.join(SAMPLES)}")
    from postmortem.minigpt.samples import make_samples
    for path in make_samples(names, Path(args.out), jobs=args.jobs):
        print(f"made {path}")
    return 0


def cmd_tui(args) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(f"postmortem: error: the dashboard needs a terminal; in a pipe or a script, "
              f"`postmortem analyze {args.run} --json` prints the analysis", file=sys.stderr)
        return 2
    from postmortem.tui.loader import Loader
    loader = Loader(args.run, args.format, args.against or [],    # reading while Textual loads
                    columns={k: v for k, v in read_options(args).items() if k != "format" and v})
    from postmortem.tui.app import run
    return run(args.run, args.format, args.device, against=args.against or [], loader=loader)


def register(sub) -> None:
    p = run_command(sub, "info", "what was read: format, files, segments, steps, metrics, warnings")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_info)
    p = run_command(sub, "export", "write the canonical table of any log")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="FILE.csv, FILE.parquet or FILE.jsonl")
    p.set_defaults(func=cmd_export)
    p = run_command(sub, "analyze", "walk both checklists, find the incidents, rank their causes")
    p.add_argument("--json", action="store_true", help="print one JSON object (DESIGN.md)")
    p.add_argument("--thresholds", metavar="FILE", help="a JSON file of thresholds to override")
    p.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="override one threshold, e.g. --set spike_sigma=4")
    add_against(p)
    p.set_defaults(func=cmd_analyze)
    p = sub.add_parser("sample", help="the mini-GPT sample runs: list them, or make them again",
                       description="Make the sample runs deterministically from their seeds.")
    p.add_argument("action", choices=["make", "list"])
    p.add_argument("names", nargs="*", metavar="NAME", help="sample runs to make (default: all)")
    p.add_argument("--out", default="sample_runs", help="where to write them (default: sample_runs)")
    p.add_argument("--jobs", type=int, default=2, help="runs trained at once")
    p.set_defaults(func=cmd_sample)
    p = run_command(sub, "tui", "the dashboard: panels, incidents, the checklist walk, the replay, "
                                "the post-mortem editor and the lessons")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="where the replay panel runs (default: cuda when there is one)")
    add_against(p)
    p.set_defaults(func=cmd_tui)
