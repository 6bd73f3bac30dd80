"""`postmortem replay RUN --nproc N`: the replay under torchrun, for a run trained with DDP.

The launcher (`launch`, no torch here) starts `python -m torch.distributed.run --standalone
--nproc-per-node N -m postmortem.replay.distributed ...`. Every rank sets up
torch.distributed (gloo on CPU, NCCL on GPU, one GPU a rank) before the run's factory is
called, so the factory can wrap the model in DDP and give `batch_at` this rank's part of the
batch. Every rank runs the same engine, arm after arm, step after step: DDP's all-reduce in
each backward keeps them in step, and every decision the engine takes is on numbers that
are the same on every rank:
- the replayed loss of a step is the mean of the ranks' losses (an all-reduce), which is
  what a DDP run logs as its loss (the loss of the whole batch, the parts being equal);
- the gradients, hence the grad norm and the clipping, are already global after backward.
Rank 0 sends its progress and the ReplayResult; its per-token probe and the
earlier-checkpoint arm score rank 0's part of the batch only, which is enough to see rare
tokens or a hard batch. Each rank writes its messages (replay/models.py, one JSON object a
line) to a file of its own in a folder the launcher reads; a rank's failure comes back as
one line, the first rank to fail being the one that names the cause.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from postmortem.errors import ReplayError, UsageError, UserError
from postmortem.replay import loading
from postmortem.replay.models import MESSAGE, Cancelled, EvidenceArrived, Failed, Finished, Message, Progress, Stopped


def check_nproc(text: str, device: str) -> int:
    """The --nproc value, refused in one line when it is not a count this machine can run."""
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--nproc {text!r}: expected a whole number of processes, 1 or more") from None
    if n < 1:
        raise UsageError(f"--nproc {n}: expected 1 or more processes")
    if device.startswith("cuda"):
        import torch
        gpus = torch.cuda.device_count()
        if n > gpus:
            raise UsageError(f"--nproc {n}: {gpus} GPU(s) here, and NCCL runs one process a GPU")
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        if n > cores:
            raise UsageError(f"--nproc {n}: this machine has {cores} CPU core(s); "
                             "gloo on CPU runs one process a core at most")
    return n


def check_world(manifest, nproc: int | None, run) -> None:
    """A run recorded on N processes replays faithfully on N only: each rank's part of the
    batch and the all-reduce's sums depend on N. The manifest says N as config.world_size."""
    recorded = getattr(manifest.config, "world_size", None) if manifest else None
    if recorded is None:
        return
    recorded = int(recorded)
    if recorded > 1 and nproc != recorded:
        raise ReplayError(f"{run}: the run was trained on {recorded} processes (manifest.json "
                          f"config.world_size): replay it with --nproc {recorded}")
    if recorded == 1 and nproc not in (None, 1):
        raise ReplayError(f"{run}: the run was trained on one process (manifest.json config.world_size): "
                          "replay it without --nproc")


# -- the launcher --------------------------------------------------------------------------

def launch(run, step: int, arms: tuple[str, ...], device: str, nproc: int, format: str | None = None,
           progress=None, cancel=None, allow_data_drift: bool = False, poll: float = 0.2):
    """Run the replay on `nproc` processes under torchrun; rank 0's ReplayResult. A rank's
    failure or torchrun's own is a ReplayError of one line; a cancel stops every rank."""
    progress = progress or (lambda *a: None)
    with tempfile.TemporaryDirectory(prefix="postmortem-replay-") as tmp:
        channel = Path(tmp)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               "-m", "postmortem.replay.distributed", str(run), "--step", str(step), "--arms", ",".join(arms),
               "--device", device, "--channel", str(channel)] + (["--format", format] if format else []) \
            + (["--allow-data-drift"] if allow_data_drift else [])
        with open(channel / "torchrun.log", "w+b") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            rank0 = _Follow(channel / "rank-0.jsonl")
            try:
                while proc.poll() is None:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("replay")
                    for m in rank0.new():
                        if isinstance(m, Progress):
                            progress(m.arm, m.step, m.done, m.total)
                    time.sleep(poll)
            except BaseException:          # Ctrl-C or a cancel: no rank outlives the command
                _stop(proc)
                raise
            list(rank0.new())
            failures, stopped = _what_ranks_said(channel)
            out.seek(0)
            torchrun_said = out.read().decode(errors="replace")
    done = [m for m in rank0.seen if isinstance(m, Finished)]
    if proc.returncode == 0 and done:
        return done[-1].result
    if stopped:
        raise Cancelled("replay")
    raise ReplayError(_failure(failures, proc.returncode, torchrun_said))


class _Follow:
    """The messages of one rank's file, read as they are written."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0
        self.seen: list[Message] = []

    def new(self) -> Iterator[Message]:
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1                     # whole lines only
        self.offset += end
        for line in data[:end].splitlines():
            m = MESSAGE.validate_json(line)
            self.seen.append(m)
            yield m


def _what_ranks_said(channel: Path) -> tuple[list[tuple[int, int, str]], bool]:
    """(when, rank, message) of each rank that said it failed, and whether a rank was asked
    to stop (a Ctrl-C that torchrun passed on); each rank's file read once."""
    failures, stopped = [], False
    for f in channel.glob("rank-*.jsonl"):
        for line in f.read_bytes().splitlines():
            m = MESSAGE.validate_json(line)
            if isinstance(m, Failed):
                failures.append((f.stat().st_mtime_ns, int(f.stem.split("-")[1]), m.message))
            stopped |= isinstance(m, Stopped)
    return failures, stopped


def _failure(failures, code: int, torchrun_said: str) -> str:
    if failures:
        when, rank, message = min(failures)                # the first to fail names the cause
        return f"rank {rank}: {message}"
    # torchrun's own summary of the first failure: "rank : 1 (local_rank: 1)" ... "traceback : Signal 9 ..."
    root = torchrun_said.partition("Root Cause")[2]
    rank, why = re.search(r"rank\s*:\s*(\d+)", root), re.search(r"traceback\s*:\s*(.+)", root)
    if rank and why:
        return (f"rank {rank.group(1)} died without a word: {why.group(1).strip()[:200]} "
                f"(the replay under torchrun ended with exit code {code})")
    lines = [x.strip() for x in torchrun_said.splitlines() if x.strip() and set(x.strip()) - set("=-*")]
    last = f": {lines[-1][:200]}" if lines else ""
    return f"the replay under torchrun ended with exit code {code} and no rank said why{last}"


def _stop(proc, grace: float = 5.0) -> None:
    if proc.poll() is None:
        proc.terminate()               # torchrun passes SIGTERM on to its ranks
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# -- one rank ------------------------------------------------------------------------------

def losses_over_ranks(fn, world: int):
    """The run's factory, its Replayable's step loss made the mean over the ranks: the loss
    a DDP run logs, and the same number on every rank, so every rank takes the same turns."""

    def make_replay(manifest, run_dir=None, device=None):
        import torch
        import torch.distributed as dist
        r = loading.make(fn, manifest, run_dir, device)
        own_step = r.forward_backward

        def forward_backward(step, batch=None):
            row = own_step(step, batch)
            t = torch.tensor([row["loss"]], dtype=torch.float32, device="cpu" if dist.get_backend() == "gloo"
                             else r.where())
            dist.all_reduce(t)
            row["loss"] = (t / world).item()
            return row
        r.forward_backward = forward_backward         # the instance's, before the class's
        return r
    make_replay.__module__, make_replay.__qualname__ = fn.__module__, fn.__qualname__
    return make_replay


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m postmortem.replay.distributed")
    p.add_argument("run")
    p.add_argument("--step", type=int, required=True)
    p.add_argument("--arms", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--format")
    p.add_argument("--allow-data-drift", action="store_true")
    p.add_argument("--channel", required=True, help="the folder each rank writes its messages to")
    args = p.parse_args(argv)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    channel = open(Path(args.channel) / f"rank-{rank}.jsonl", "w", buffering=1)
    os.dup2(2, 1)                      # the run's code printing: into torchrun's log, never the result
    sys.stdout = sys.stderr

    def out(message) -> None:
        channel.write(message.model_dump_json() + "\n")
    try:
        result = _replay(args, rank, world, out)
        if rank == 0:
            out(Finished(result=result))
        return 0
    except (Cancelled, KeyboardInterrupt) as err:     # torchrun passes a Ctrl-C on to its ranks
        out(Stopped(arm=str(err) or "replay"))
        return 130
    except UserError as err:
        out(Failed(message=str(err)))
        return 2
    except BaseException as err:       # the run's own code: one line
        first = (str(err).strip().splitlines() or [""])[0][:200]
        out(Failed(message=f"the replay failed in the run's code: {type(err).__name__}: {first}"))
        return 2
    finally:
        channel.close()


def _replay(args, rank: int, world: int, out):
    import torch
    import torch.distributed as dist

    from postmortem.diagnose.analyze import analyze
    from postmortem.document.draft import pick_incident
    from postmortem.replay.engine import Replayer
    from postmortem.run.discover import read_run
    device = args.device
    if device.startswith("cuda"):
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    log = read_run(args.run, format=args.format)
    inc = pick_incident(analyze(log).incidents, args.step, args.run)

    def progress(arm, step, done, total):
        if rank == 0:
            out(Progress(arm=arm, step=step, done=done, total=total))

    def arrived(evidence):
        if rank == 0:
            out(EvidenceArrived(evidence=evidence))
    # the batch hashes logged are rank 0's part of each batch: rank 0 checks them
    replayer = Replayer(log, inc, device, progress, on_evidence=arrived,
                        allow_data_drift=args.allow_data_drift or rank > 0)
    replayer.fn = losses_over_ranks(replayer.fn, world)
    result = replayer.replay(tuple(args.arms.split(",")))
    dist.barrier()
    # only once every rank is through: a failed rank leaves at once (torchrun stops the rest)
    dist.destroy_process_group()
    return result


if __name__ == "__main__":
    sys.exit(main())
