"""The commands over one run: info, export, analyze, sample, tui."""

from __future__ import annotations

import sys
from pathlib import Path

from postmortem.cli import progress
from postmortem.cli.options import (
    add_against,
    add_json,
    add_learner,
    add_repo,
    command,
    print_json,
    read_options,
    run_command,
)
from postmortem.cli.progress import megabytes, phase, size_of
from postmortem.errors import UsageError


def _read(args):
    """The run, read with a spinner on a terminal; a big one (a 1M-step log) said in a pipe too."""
    from postmortem.run import read_run
    size = size_of(args.run)
    with phase(f"reading {args.run} ({megabytes(size)})", in_pipe=size >= progress.BIG_READ, read_bytes=size):
        return read_run(args.run, **read_options(args))


def _others(args) -> list:
    """The runs named by --against (same data, same order), read like the run itself."""
    from postmortem.run import read_run
    return [read_run(path) for path in args.against or []]


def cmd_info(args) -> int:
    from postmortem.run.export import info
    data = info(_read(args))
    if args.json:
        print_json(data)
        return 0
    from postmortem.cli.report import print_info
    print_info(data)
    return 0


def writable(out: str, force: bool) -> None:
    """Refuse, before any work, an output that is a folder, that exists (without --force), or
    whose folder does not exist: the table is written only where the user meant."""
    path = Path(out)
    if path.is_dir():
        raise UsageError(f"{out}: is a folder; name the file to write")
    if path.exists() and not force:
        raise UsageError(f"{out}: exists; --force overwrites it")
    if not path.parent.is_dir():         # never made: a typo in a folder name is said, not created
        why = "is not a folder" if path.parent.exists() else "does not exist"
        raise UsageError(f"cannot write {out}: the folder {path.parent} {why}")


def cmd_export(args) -> int:
    from postmortem.run.export import export
    writable(args.output, args.force)
    log = _read(args)
    out = export(log, args.output)
    print(f"wrote {out} ({len(log.frame)} rows, {len(log.metrics)} metrics)", file=sys.stderr)
    if args.json:
        print_json({"wrote": str(out), "run_id": log.run_id, "rows": len(log.frame), "metrics": list(log.metrics)})
    return 0


def cmd_analyze(args) -> int:
    from postmortem.cli.thresholds import load_thresholds
    from postmortem.diagnose.analyze import analyze
    thresholds = load_thresholds(args.thresholds, args.set or [])
    log = _read(args)
    with phase(f"walking the checklists over {len(log.frame)} rows, finding the incidents",
               in_pipe=len(log.frame) * 100 >= progress.BIG_READ):
        result = analyze(log, thresholds, against=_others(args))
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    from postmortem.cli.report import print_analysis
    print_analysis(result)
    return 0


def cmd_sample(args) -> int:
    from postmortem.minigpt.samples import SAMPLES
    if args.action == "list":
        if args.json:
            print_json([{"name": name, "run_id": cfg.run_id, "what": what} for name, (cfg, what) in SAMPLES.items()])
            return 0
        cut = 60 if sys.stdout.isatty() else None      # whole in a pipe
        for name, (cfg, what) in SAMPLES.items():
            print(f"{name:24s} {cfg.run_id:28s} {what[:cut]}")
        return 0
    names = args.names or list(SAMPLES)
    unknown = [n for n in names if n not in SAMPLES]
    if unknown:
        raise UsageError(f"{unknown[0]}: no such sample run; known: {', '.join(SAMPLES)}")
    from postmortem.minigpt.samples import make_samples
    made = make_samples(names, Path(args.out), jobs=args.jobs)
    if args.json:
        print_json({"made": [str(path) for path in made]})
        return 0
    for path in made:
        print(f"made {path}")
    return 0


def cmd_tui(args) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(f"postmortem: error: the dashboard needs a terminal; in a pipe or a script, "
              f"`postmortem analyze {args.run} --json` prints the analysis", file=sys.stderr)
        return 2
    import gc
    gc.disable()        # the start allocates much and frees little: collected after the first frame
    import shutil

    from postmortem.kb.settings import resolve
    settings = resolve(args.kb, args.learner)       # a bad name or config file: said before the app
    from postmortem.tui.loader import Loader
    columns = {k: v for k, v in read_options(args).items() if k != "format" and v}
    size = shutil.get_terminal_size()               # as Textual will measure it
    loader = Loader(args.run, args.format, args.against or [], columns=columns,  # reading while Textual loads
                    terminal=(size.columns, size.lines))
    from postmortem.tui.app import run
    # columns again: a store of several runs is read anew once its picker has picked one
    return run(args.run, args.format, args.device, against=args.against or [], loader=loader,
               settings=settings, columns=columns)


def register(sub) -> None:
    """The commands of this file, in the order `--help` lists them."""
    register_info(sub)
    register_export(sub)
    register_analyze(sub)
    register_sample(sub)
    register_tui(sub)


def register_info(sub) -> None:
    p = run_command(sub, "info", "what was read: format, files, segments, steps, metrics, warnings",
                    "What was read of RUN: its format, files, segments (restarts), steps, each metric\n"
                    "with its count of values, NaN and Inf, which column is the step and the loss and why,\n"
                    "the configuration found beside it, and warnings.",
                    ("postmortem info runs/r17",
                     "postmortem info train.log --format megatron   # not what was detected",
                     "postmortem info runs/r17 --json | jq '.metrics[].name'"))
    add_json(p, "what was read")
    p.set_defaults(func=cmd_info)


def register_export(sub) -> None:
    p = run_command(sub, "export", "write the canonical table of any log",
                    "Write the run as one canonical table (one row a step, one column a metric),\n"
                    "whatever format it was logged in.",
                    ("postmortem export train.log -o clean.parquet",
                     "postmortem export runs/r17 -o r17.csv"))
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="FILE.csv, FILE.parquet or FILE.jsonl, in a folder that exists")
    p.add_argument("--force", action="store_true", help="overwrite FILE")
    add_json(p, "what was written")
    p.set_defaults(func=cmd_export)


def register_analyze(sub) -> None:
    p = run_command(sub, "analyze", "walk both checklists, find the incidents, rank their causes",
                    "Walk checklist A (did the run start right: init, schedule, warmup, grad norm, ...)\n"
                    "and checklist B (how it trained: restarts, NaN/Inf, spikes, loss scale, divergence),\n"
                    "find the incidents and rank the causes of each with the evidence for and against.",
                    ("postmortem analyze runs/r17",
                     "postmortem analyze runs/r17 --set spike_sigma=5 --set spike_window=200",
                     "postmortem analyze runs/r17 --against runs/r17-seed2   # same data, another seed",
                     "postmortem analyze runs/r17 --json | jq '.incidents[0].hypotheses[0]'"))
    add_json(p, "the analysis (docs/architecture.md)")
    p.add_argument("--thresholds", metavar="FILE", help='a JSON file of thresholds to override, '
                                                        'e.g. {"spike_sigma": 5}')
    p.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="override one threshold, e.g. --set spike_sigma=4; repeatable "
                        "(a wrong name lists the known ones)")
    add_against(p)
    p.set_defaults(func=cmd_analyze)


def register_sample(sub) -> None:
    p = command(sub, "sample", "the mini-GPT sample runs: list them, or make them again",
                "The sample runs: a tiny GPT trained on CPU with one failure injected each (a junk\n"
                "batch, fp16 overflow, an LR jump, ...). `make` trains them again from their seeds.",
                ("postmortem sample list",
                 "postmortem sample make long-tail-token --out /tmp/samples"))
    p.add_argument("action", choices=["make", "list"], help="list them, or make them")
    p.add_argument("names", nargs="*", metavar="NAME", help="sample runs to make (default: all)")
    p.add_argument("--out", default="sample_runs", metavar="DIR",
                   help="where to write them (default: sample_runs)")
    p.add_argument("--jobs", type=int, default=2, metavar="N", help="runs trained at once (default: 2)")
    add_json(p, "the runs listed or made")
    p.set_defaults(func=cmd_sample)


def register_tui(sub) -> None:
    p = run_command(sub, "tui", "the dashboard: panels, checklists, replay, editor, lessons",
                    "The dashboard: loss, LR, grad norm and loss-scale panels around the incident, the\n"
                    "checklist walk, the replay (r), the post-mortem editor (e) and the lessons (l).\n"
                    "Needs a terminal; in a pipe use `analyze` (with --json for a script).",
                    ("postmortem tui runs/r17",
                     "postmortem runs/r17                    # the same, in a terminal",
                     "postmortem tui runs/r17 --against runs/r17-seed2 --device cpu"))
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="where the replay panel runs (default: cuda when there is one)")
    add_against(p)
    add_repo(p)
    add_learner(p, "who writes the post-mortems (asked at the first commit when nobody is named)")
    p.set_defaults(func=cmd_tui)
