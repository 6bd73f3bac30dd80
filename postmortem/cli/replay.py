"""`replay`: the steps around an incident again, in counterfactual arms, with a progress bar."""

from __future__ import annotations

import sys

from postmortem.cli.options import add_format, add_json, add_run_id, command
from postmortem.cli.progress import ArmSteps, phase, say, size_of
from postmortem.errors import ReplayError, UserError


def cmd_replay(args) -> int:
    """Replay the steps around an incident; a rich progress bar; Ctrl-C cancels cleanly."""
    from postmortem.cli.postmortems import incident_near
    from postmortem.replay.distributed import check_nproc, check_world
    from postmortem.run import read_run
    arms = arms_asked(args.arms)
    device = args.device or ("cuda" if _cuda() else "cpu")
    nproc = check_nproc(args.nproc, device) if args.nproc is not None else None
    with phase(f"reading and analyzing {args.run}", in_pipe=False, read_bytes=size_of(args.run)):
        log = read_run(args.run, format=args.format, run=args.run_id)
        inc = incident_near(log, args.step, path=args.run)
    check_world(log.manifest, nproc, args.run)
    picked = log.source.extras.get("store_run")      # a run of a store of several: its id there
    again = f"{args.run} --run {picked}" if picked else args.run
    # on a terminal a spinner, then a bar per arm; in a pipe its words once the start (torch,
    # the checkpoint) has lasted PIPE_AFTER_S: a replay refused within it is its one line alone,
    # one refused later says its heading first (the error is still one line, the last)
    with ArmSteps(f"replaying the {inc.kind} at step {inc.step} on {device}, faithful first") as progress:
        result = replayed(args, log, inc, arms, device, nproc, progress)
    if result is None:
        return 130
    say(f"replayed {progress.done()}; nothing written (--json > FILE keeps it); next: "
        f"`postmortem new {again} --step {inc.step} --replay` replays again and drafts the "
        "post-mortem with the evidence")
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    print_replay(result, inc)
    return 0


def arms_asked(asked: str | None) -> tuple[str, ...]:
    """The arms --arms names (default: all), each known, the faithful one first."""
    from postmortem.replay.arms import NAMES as ARMS
    arms = tuple(asked.split(",")) if asked else ARMS
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise ReplayError(f"{unknown[0]}: unknown arm; known: {', '.join(ARMS)}")
    if "faithful" not in arms:
        arms = ("faithful", *arms)
    return arms


def replayed(args, log, inc, arms: tuple[str, ...], device: str, nproc: int | None, progress):
    """The replay's result, in this process or under torchrun; None when it was cancelled
    (said on stderr). The run's own code failing is one line naming it."""
    import threading

    from postmortem.replay.distributed import launch
    from postmortem.replay.engine import Replayer
    from postmortem.replay.guard import users_code
    from postmortem.replay.models import Cancelled
    picked = log.source.extras.get("store_run")
    cancel = threading.Event()
    try:
        if nproc:                      # every rank in a process of its own, under torchrun
            # each rank reads the run again: a run picked in a store by its own folder
            return launch(log.source.path if picked else args.run, inc.step, arms, device, nproc,
                          args.format, progress, cancel, allow_data_drift=args.allow_data_drift)
        with users_code(args.run):     # its prints to stderr: stdout carries --json
            return Replayer(log, inc, device, progress, cancel,
                            allow_data_drift=args.allow_data_drift).replay(arms)
    except (KeyboardInterrupt, Cancelled):
        cancel.set()
        print("postmortem: replay cancelled", file=sys.stderr)
        return None
    except Exception as err:        # the user's own code failed: say where, keep one line
        if isinstance(err, UserError):
            raise
        raise ReplayError(f"{args.run}: the replay failed in the run's code: "
                          f"{type(err).__name__}: {err}") from None


def print_replay(result, inc) -> None:
    """The replay as text: faithful or not, each piece of evidence, the causes re-ranked."""
    print(f"{result.run_id}: {inc.kind} at step {inc.step}, replayed from checkpoint {result.checkpoint} "
          f"on {result.device} ({'faithful' if result.faithful else 'NOT faithful'}, "
          f"max diff {result.faithful_max_diff:.3g})")
    for e in result.evidence:
        tail = "".join([f"  favors {', '.join(e.favors)}" if e.favors else "",
                        f"  rules out {', '.join(e.rules_out)}" if e.rules_out else ""])
        print(f"  [{e.panel}] {e.observation}{tail}")
    print("re-ranked: " + ", ".join(f"{h.rank}. {h.pattern} {h.score:.2f}" for h in result.hypotheses[:4]))


def _cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def register(sub) -> None:
    p = command(sub, "replay", "replay the steps around an incident in counterfactual arms",
                "Load the checkpoint before the incident and train the steps around it again: once as\n"
                "logged (faithful: it must reproduce the spike), then in arms that each change one\n"
                "thing (fp32, the scheduled LR, restored Adam moments, a swapped batch, an earlier\n"
                "checkpoint). What changes the spike re-ranks the causes. Needs the `replay` extra (torch).",
                ("postmortem replay runs/r17                      # the largest incident, every arm",
                 "postmortem replay runs/r17 --step 4200 --arms swap-batch,fp32 --device cuda",
                 "postmortem replay runs/r17 --json > evidence.json"))
    p.add_argument("run", metavar="RUN", help="a run recorded with a replay entry point and checkpoints")
    p.add_argument("--step", type=int, help="the incident nearest this step, said when not at it "
                                            "(default: the largest)")
    p.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when there is one")
    p.add_argument("--arms", help="comma-separated: faithful,fp32,scheduled-lr,restored-moments,"
                                  "swap-batch,earlier-checkpoint (default: all)")
    p.add_argument("--nproc", metavar="N", help="replay on N processes under torchrun (DDP: gloo on CPU, "
                                                "NCCL on GPU), as many as the run was trained on")
    p.add_argument("--allow-data-drift", action="store_true",
                   help="replay even when the batches the factory gives are not those the run logged (by hash)")
    add_format(p)
    add_run_id(p)
    add_json(p, "the replay's result: the evidence and the re-ranked causes")
    p.set_defaults(func=cmd_replay)
