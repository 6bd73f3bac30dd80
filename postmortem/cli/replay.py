"""`replay`: the steps around an incident again, in counterfactual arms, with a progress bar."""

from __future__ import annotations

import sys

from postmortem.errors import ReplayError, UserError


def cmd_replay(args) -> int:
    """Replay the steps around an incident; a rich progress bar; Ctrl-C cancels cleanly."""
    import threading

    from postmortem.diagnose.analyze import analyze
    from postmortem.document.draft import pick_incident
    from postmortem.replay.arms import NAMES as ARMS
    from postmortem.replay.engine import Replayer
    from postmortem.replay.models import Cancelled
    from postmortem.run import read_run
    arms = tuple(args.arms.split(",")) if args.arms else ARMS
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise ReplayError(f"{unknown[0]}: unknown arm; known: {', '.join(ARMS)}")
    if "faithful" not in arms:
        arms = ("faithful", *arms)
    log = read_run(args.run, format=args.format)
    inc = pick_incident(analyze(log).incidents, args.step, args.run)
    device = args.device or ("cuda" if _cuda() else "cpu")
    cancel = threading.Event()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  transient=True, disable=args.json or not sys.stderr.isatty()) as bar:
        tasks: dict[str, int] = {}

        def progress(arm, step, done, total):
            if arm not in tasks:
                tasks[arm] = bar.add_task(f"{arm:28s}", total=total)
            bar.update(tasks[arm], completed=done, description=f"{arm:18s} step {step}")
        try:
            result = Replayer(log, inc, device, progress, cancel).replay(arms)
        except (KeyboardInterrupt, Cancelled):
            cancel.set()
            print("postmortem: replay cancelled", file=sys.stderr)
            return 130
        except Exception as err:        # the user's own code failed: say where, keep one line
            if isinstance(err, UserError):
                raise
            raise ReplayError(f"{args.run}: the replay failed in the run's code: "
                              f"{type(err).__name__}: {err}") from None
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    print(f"{result.run_id}: {inc.kind} at step {inc.step}, replayed from checkpoint {result.checkpoint} "
          f"on {result.device} ({'faithful' if result.faithful else 'NOT faithful'}, "
          f"max diff {result.faithful_max_diff:.3g})")
    for e in result.evidence:
        tail = "".join([f"  favors {', '.join(e.favors)}" if e.favors else "",
                        f"  rules out {', '.join(e.rules_out)}" if e.rules_out else ""])
        print(f"  [{e.panel}] {e.observation}{tail}")
    print("re-ranked: " + ", ".join(f"{h.rank}. {h.pattern} {h.score:.2f}" for h in result.hypotheses[:4]))
    return 0


def _cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def register(sub) -> None:
    p = sub.add_parser("replay", help="replay the steps around an incident in counterfactual arms")
    p.add_argument("run", metavar="RUN")
    p.add_argument("--step", type=int, help="the incident nearest this step (default: the largest)")
    p.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when there is one")
    p.add_argument("--arms", help="comma-separated: faithful,fp32,scheduled-lr,restored-moments,"
                                  "swap-batch,earlier-checkpoint (default: all)")
    p.add_argument("--format")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_replay)
