"""A plain PyTorch training loop, recorded so that postmortem can diagnose and replay it.

    python examples/plain_loop/train.py --out runs/plain --inject long-tail-token
    postmortem analyze runs/plain            # the incident at step 250, its causes ranked
    postmortem replay runs/plain             # the steps around it again: faithful, then arms

Copy it and keep three things:
1. `postmortem.run.record.Recorder` logs each step (loss, pre-clip grad norm, lr, loss scale,
   skipped, batch hash) and per-layer norms every 50 steps, into OUT/metrics.jsonl, and
   writes OUT/manifest.json (dtype, vocab size, the config the checks read).
2. checkpoints/step_N.pt every 50 steps, the state after N steps, as
   {"model", "optimizer", "scheduler", "scaler", "rng"} state dicts: the replay protocol's
   default layout, so the replay loads them as they are (torch.load, weights_only=True).
3. The manifest names the replay factory, `"replay": {"entrypoint": "replay:make_replay"}`:
   replay.py (beside this file) rebuilds the run's objects from the functions below. This
   script copies itself, replay.py and tinydata.py into OUT, and the replay puts OUT on
   sys.path: `postmortem replay OUT` runs the code that trained the run, even after this
   file has changed.

On more than one process: `--nproc 2` runs this script again under torchrun (gloo on CPU;
or launch it with torchrun yourself). Each rank trains on its part of the batch; rank 0
logs the loss averaged over the ranks (an all-reduce: the loss of the whole batch), the
hash of its own part of the batch, and saves the checkpoints. Replay it on as many:
`postmortem replay OUT --nproc 2`.

--inject puts one known cause at step 250: long-tail-token (a batch made of tokens the
corpus never has), lr-discontinuity (the LR x25 for 15 steps while the config says
cosine), optimizer-reset (a crash at 250, resumed from step_200.pt with a fresh optimizer),
fp16-overflow (fp16 autocast; the MLP's hidden units scaled past 65504 for 12 steps).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
if not (HERE / "tinydata.py").exists():          # in examples/; a run's copy has it beside
    sys.path.insert(0, str(HERE.parent))
import tinydata  # noqa: E402

from postmortem.minigpt.model import GPT, GPTConfig  # noqa: E402
from postmortem.run.record import Recorder, batch_hash, this_machine  # noqa: E402

CAUSE_STEP = 250          # where --inject puts the cause
RESUME_FROM = 200         # optimizer-reset: the checkpoint the crashed run resumes from
CHECKPOINT_EVERY = 50
CLIP = 1.0


def settings(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Train a tiny GPT with a plain PyTorch loop, recorded for postmortem.")
    p.add_argument("--out", required=True, help="the run folder")
    p.add_argument("--inject", choices=tinydata.CAUSES, default="none", help="the cause put at step 250")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--dtype", choices=("fp32", "fp16"), default=None,
                   help="fp16: autocast with a GradScaler (default: fp16 for fp16-overflow, else fp32)")
    p.add_argument("--nproc", type=int, default=1, help="processes (DDP under torchrun, gloo)")
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args(argv)
    args.dtype = args.dtype or ("fp16" if args.inject == "fp16-overflow" else "fp32")
    args.lr_max, args.min_lr, args.warmup_steps, args.batch_size = 3e-3, 3e-4, 40, 16
    if args.inject == "optimizer-reset":
        # A fresh Adam's first steps move every weight by about the LR: the reset shows at a
        # high LR (as in the sample run), so this case trains at one.
        args.lr_max, args.min_lr, args.warmup_steps = 5e-2, 5e-3, 150
    return args


# -- the run's objects: training and its replay build them with these same functions --------

def build(args, device: torch.device):
    """Model, optimizer, scheduler and loss scaler, as at step 0."""
    torch.manual_seed(args.seed)
    model = GPT(GPTConfig(tinydata.VOCAB, tinydata.BLOCK, n_layer=2, n_head=4, n_embd=48)).to(device)
    optimizer = new_optimizer(args, model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: applied_lr(args, s) / args.lr_max)
    scaler = torch.amp.GradScaler(device.type, enabled=args.dtype == "fp16")
    return model, optimizer, scheduler, scaler


def new_optimizer(args, model) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.param_groups(0.1), lr=args.lr_max, betas=(0.9, 0.95))


def scheduled_lr(args, step: int) -> float:
    """Linear warmup, then cosine to min_lr: what the config says."""
    if step < args.warmup_steps:
        return args.lr_max * (step + 1) / args.warmup_steps
    progress = min(1.0, (step - args.warmup_steps) / max(1, args.steps - args.warmup_steps))
    return args.min_lr + (args.lr_max - args.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


def applied_lr(args, step: int) -> float:
    """The LR the run really used: the schedule, with the bug when injected."""
    bug = args.inject == "lr-discontinuity" and CAUSE_STEP <= step < CAUSE_STEP + 15
    return scheduled_lr(args, step) * (25.0 if bug else 1.0)


def corpus(args) -> torch.Tensor:
    return tinydata.sequences(2048)


def token_counts(data: torch.Tensor) -> dict[int, int]:
    """How often each token id is in the corpus (the rare ones: never)."""
    counts = torch.bincount(data.flatten(), minlength=tinydata.VOCAB).tolist()
    return dict(enumerate(counts))


def batch_at(args, data: torch.Tensor, step: int, rank: int = 0, world: int = 1):
    """The exact batch of `step`, a pure function of (seed, step): (x, y), each (B / world, T),
    this rank's rows of it."""
    gen = torch.Generator().manual_seed(args.seed * 100_003 + step)
    rows = data[torch.randint(0, len(data), (args.batch_size,), generator=gen)]
    if args.inject == "long-tail-token" and step == CAUSE_STEP:
        rows = tinydata.rare(args.batch_size, seed=step)           # a batch of tokens never seen
    rows = rows[rank::world]
    return rows[:, :-1], rows[:, 1:]


def per_token_loss(args, model, step: int, x: torch.Tensor, y: torch.Tensor, forward=None) -> torch.Tensor:
    """Per-token cross-entropy (B, T). `forward` is the DDP wrapper under torchrun."""
    overflow = args.inject == "fp16-overflow" and CAUSE_STEP <= step < CAUSE_STEP + 12
    for block in model.blocks:
        block.mlp.gain = 1e5 if overflow else 1.0          # fine in fp32, past 65504 (inf) in fp16
    logits = (forward or model)(x)
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), reduction="none").view_as(y)


def autocast(args, device: torch.device):
    if args.dtype == "fp16":
        return torch.autocast(device.type, dtype=torch.float16)
    return torch.autocast(device.type, enabled=False)


def wrap(model, device: torch.device, world: int):
    """DDP across the ranks (its gradients are averaged over them), or the model alone."""
    if world == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def manifest(args, world: int) -> dict:
    return {
        "run_id": Path(args.out).name, "seed": args.seed, "dtype": args.dtype, "vocab_size": tinydata.VOCAB,
        "versions": {**this_machine(), "device": "cpu"},
        "config": {"lr_max": args.lr_max, "min_lr": args.min_lr, "warmup_steps": args.warmup_steps,
                   "schedule": "cosine", "total_steps": args.steps, "batch_size": args.batch_size,
                   "clip": CLIP, "weight_decay": 0.1, "optimizer": "adamw", "block_size": tinydata.BLOCK,
                   "n_layer": 2, "n_embd": 48, "world_size": world},
        "replay": {"entrypoint": "replay:make_replay", "checkpoints": "checkpoints/"},
        "args": {k: v for k, v in vars(args).items() if k != "nproc"},   # what replay.py rebuilds from
    }


def state(model, optimizer, scheduler, scaler) -> dict:
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "rng": torch.get_rng_state()}


# -- the loop ---------------------------------------------------------------------------------

def train(args) -> None:
    torch.set_num_threads(1)           # the same sums in the same order as the replay's
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo")
    rank = int(os.environ.get("RANK", "0"))
    device = torch.device("cpu")
    out = Path(args.out)
    ckpts = out / "checkpoints"
    model, optimizer, scheduler, scaler = build(args, device)
    forward = wrap(model, device, world)
    data = corpus(args)
    rec = None
    if rank == 0:
        ckpts.mkdir(parents=True, exist_ok=True)
        for source in (HERE / "train.py", HERE / "replay.py", Path(tinydata.__file__)):
            if source.resolve() != (out / source.name).resolve():      # not when run from a run's copy
                shutil.copy(source, out / source.name)
        rec = Recorder(out, manifest(args, world), layer_every=50)
    crash = CAUSE_STEP if args.inject == "optimizer-reset" else None
    step = 0
    with tinydata.Steps(args.steps, enabled=rank == 0) as shown:
        while step < args.steps:
            if step == crash:
                # The run "crashes" and resumes from a checkpoint, but the resume forgets the
                # optimizer: Adam's moments and step count start from zero (the injected bug).
                saved = torch.load(ckpts / f"step_{RESUME_FROM:06d}.pt", weights_only=True)
                model.load_state_dict(saved["model"])
                optimizer = new_optimizer(args, model)
                scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: applied_lr(args, s) / args.lr_max)
                scheduler.load_state_dict(saved["scheduler"])
                for group, lr in zip(optimizer.param_groups, scheduler.get_last_lr()):
                    group["lr"] = lr
                if saved["scaler"]:
                    scaler.load_state_dict(saved["scaler"])
                torch.set_rng_state(saved["rng"])
                step, crash = RESUME_FROM, None          # the log goes back in steps, as a resumed log does
                continue
            x, y = batch_at(args, data, step, rank, world)
            lr = optimizer.param_groups[0]["lr"]
            with autocast(args, device):
                loss = per_token_loss(args, model, step, x, y, forward).mean()
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)    # the pre-clip norm
            scale = scaler.get_scale() if scaler.is_enabled() else None
            if rec and rec.wants_layers(step):
                rec.layers(step, model, optimizer)                                   # before zero_grad
            scaler.step(optimizer)
            scaler.update()
            skipped = int(scaler.get_scale() < scale) if scale is not None else None
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            logged = mean_over_ranks(loss.item(), world)
            if rec:
                rec.log(step, loss=logged, grad_norm=grad_norm.item(), lr=lr, loss_scale=scale,
                        skipped=skipped, batch_hash=batch_hash(x))
                if (step + 1) % CHECKPOINT_EVERY == 0:
                    torch.save(state(model, optimizer, scheduler, scaler), ckpts / f"step_{step + 1:06d}.pt")
            if world > 1 and (step + 1) % CHECKPOINT_EVERY == 0:
                torch.distributed.barrier()         # every rank may read the checkpoint (a resume)
            shown(step, logged)                 # the step on stderr: a bar, or a line in a pipe
            step += 1
    if rec:
        rec.close()
        tinydata.finished(out)                  # where it wrote, and what to type next
    if world > 1:
        # only once every rank is through (rank 0 closes the record last): a rank that tears
        # gloo down while another still works can abort at exit ("terminate called without an
        # active exception", seen once in CI), as the replay's ranks wait too
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def mean_over_ranks(loss: float, world: int) -> float:
    """The loss of the whole batch: each rank's mean, averaged (the parts are the same size).
    The replay under --nproc averages its ranks' losses the same way."""
    if world == 1:
        return loss
    t = torch.tensor([loss], dtype=torch.float32)
    torch.distributed.all_reduce(t)
    return (t / world).item()


def main(argv: list[str] | None = None) -> int:
    args = settings(argv)
    if args.nproc > 1 and "WORLD_SIZE" not in os.environ:     # launch this script on N processes
        again = ["--out", args.out, "--inject", args.inject, "--steps", str(args.steps),
                 "--dtype", args.dtype, "--seed", str(args.seed)]
        return subprocess.call([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                f"--nproc-per-node={args.nproc}", __file__, *again])
    train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
