"""The sample runs: one healthy, one per injected failure, made deterministically from the seed."""

from __future__ import annotations

import shutil
from pathlib import Path

from postmortem.minigpt.config import Injection, TrainConfig

# name -> (config, what was injected and where, in words for the run's README)
SAMPLES: dict[str, tuple[TrainConfig, str]] = {
    "healthy": (TrainConfig(run_id="healthy-001"), "Nothing injected: a clean run."),
    "long-tail-token": (
        TrainConfig(run_id="19-spike-001",
                    injection=Injection(kind="long-tail-token", step=250, fraction=0.5)),
        "At step 250 half the batch is a shard of junk made of long-tail BPE pieces (pieces "
        "seen at most twice in training): a rare-token burst concentrated in one batch."),
    "fp16-overflow": (
        TrainConfig(run_id="fp16-overflow-001", dtype="fp16",
                    injection=Injection(kind="fp16-overflow", step=250, length=12, factor=3e4)),
        "fp16 autocast with a GradScaler. From step 250 for 12 steps the MLP hidden units are "
        "scaled by 3e4 (and the output back down): exact in fp32, inf in fp16, so the scaler "
        "skips those steps and halves the loss scale each time."),
    "lr-discontinuity": (
        TrainConfig(run_id="lr-discontinuity-001",
                    injection=Injection(kind="lr-discontinuity", step=250, length=15, factor=25)),
        "From step 250 for 15 steps the LR is 25x the cosine schedule (a scheduler bug), "
        "then it drops back."),
    "optimizer-reset": (
        TrainConfig(run_id="optimizer-reset-001", lr_max=5e-2, min_lr=5e-3, warmup_steps=150,
                    injection=Injection(kind="optimizer-reset", step=250, resume_from=200)),
        "lr_max 5e-2 after a 150-step warmup. The run crashes after step 249 and resumes from the step-200 checkpoint "
        "with the model and scheduler restored but a fresh AdamW (m, v and step reset); the "
        "log carries on from step 200."),
    "numerics": (
        TrainConfig(run_id="numerics-001",
                    injection=Injection(kind="numerics", step=250, factor=200)),
        "From step 250 the loss is a hand-written -log(softmax(x)) on logits scaled by 200 "
        "(a temperature bug): a probability underflows to 0, log(0) = -inf, then NaN."),
    "bad-init": (
        TrainConfig(run_id="bad-init-001", injection=Injection(kind="bad-init", factor=100)),
        "Weights initialised with std 2.0 instead of 0.02 (100x)."),
    "schedule-misconfigured": (
        TrainConfig(run_id="schedule-misconfigured-001", schedule="inverted-cosine",
                    injection=Injection(kind="schedule-misconfigured", factor=150)),
        "The cosine decay has its sign flipped: after warmup the LR climbs from min_lr "
        "towards 150x lr_max instead of decaying (slow divergence)."),
    "bad-data": (
        TrainConfig(run_id="bad-data-001", injection=Injection(kind="bad-data", step=200, length=40)),
        "A loader bug returns the batch of step 200 again for 40 steps (200..239)."),
}


def checkpoints_needed(cfg: TrainConfig) -> set[int]:
    """The replay needs the last checkpoint before the incident and the one before it."""
    inj = cfg.injection
    if inj.kind in ("healthy", "bad-init", "schedule-misconfigured"):
        return {cfg.checkpoint_every * 2}
    first = inj.resume_from if inj.kind == "optimizer-reset" else inj.step
    last = (first // cfg.checkpoint_every) * cfg.checkpoint_every
    if last == first and inj.kind != "optimizer-reset":
        last -= cfg.checkpoint_every
    return {last, last - cfg.checkpoint_every}


def readme(name: str, cfg: TrainConfig, what: str) -> str:
    pattern = cfg.injection.kind
    return (f"# {cfg.run_id}\n\nSample run `{name}` made by `postmortem sample make {name}` "
            f"(seed {cfg.seed}, {cfg.steps} steps, {cfg.dtype}).\n\nInjected: {what}\n\n"
            f"Pattern id: `{pattern}`\n\nThe diagnosis never reads this file.\n")


def make_sample(name: str, root: Path) -> Path:
    import torch

    from postmortem.minigpt.train import train

    cfg, what = SAMPLES[name]
    out = root / name
    if out.exists():
        shutil.rmtree(out)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)      # one thread: the same sums in the same order, every time
    try:
        train(cfg, out, dev=torch.device("cpu"))
    finally:
        torch.set_num_threads(threads)
    keep = {f"step_{s:06d}.pt" for s in checkpoints_needed(cfg)}
    for ckpt in (out / "checkpoints").glob("*.pt"):
        if ckpt.name not in keep:
            ckpt.unlink()
    (out / "README.md").write_text(readme(name, cfg, what))
    return out


def make_samples(names: list[str], root: Path, jobs: int = 1) -> list[Path]:
    """Make several sample runs, `jobs` at a time (each trains on one CPU thread then)."""
    root.mkdir(parents=True, exist_ok=True)
    if jobs <= 1 or len(names) == 1:
        return [make_sample(n, root) for n in names]
    import multiprocessing as mp
    with mp.get_context("spawn").Pool(jobs, initializer=_one_thread) as pool:
        return pool.starmap(make_sample, [(n, root) for n in names])


def _one_thread() -> None:
    import torch
    torch.set_num_threads(1)
