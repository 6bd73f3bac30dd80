"""Replay speed of the framework integrations, as a ratio to a plain training step of the same
model on the same batches, in one process, interleaved A B C A B C, median of the rounds:

    A plain:  forward, loss.backward(), clip, AdamW step, zero_grad (hand-written)
    B replay: the integration's Replayable step (forward_backward + optimizer_step)
    C probe:  B plus the per-step probe (one fused finiteness check of the gradients)

    python benchmarks/bench_integrations.py [--only hf] [--rounds 5] [--steps 20]

Each integration is one function in BENCHES, returning (replayable, plain_step, batches).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from postmortem.run.record import this_machine  # noqa: E402


def probe(r) -> bool:
    grads = [p.grad for p in r.model.parameters() if p.grad is not None]
    return not bool(torch.isfinite(torch.stack([torch.linalg.vector_norm(g) for g in grads])).all())


def hf(workdir: Path):
    """The HF example's Trainer (tiny GPT-2), set up as the replay sets it up."""
    sys.path.insert(0, str(HERE.parent / "examples" / "hf_trainer"))
    import train  # examples/hf_trainer/train.py
    from transformers.utils import logging as hf_logging

    from postmortem.integrations.hf_replay import TrainerReplay
    hf_logging.set_verbosity_error()
    r = TrainerReplay.of(train.build_trainer(str(workdir / "hf"), "none"), str(workdir / "hf"))
    model = copy.deepcopy(r.model)
    d = getattr(r.optimizer, "optimizer", r.optimizer).defaults      # the Trainer's AdamW settings
    opt = torch.optim.AdamW(model.parameters(), lr=d["lr"], betas=d["betas"], eps=d["eps"],
                            weight_decay=d["weight_decay"], fused=d.get("fused"))

    def plain(batch):
        model(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return r, plain


def plain(workdir: Path):
    """The plain loop example's factory (examples/plain_loop/replay.py) on its manifest; the
    plain step is the example's own loop step on a copy of the model."""
    import importlib
    folder = HERE.parent / "examples" / "plain_loop"
    sys.path.insert(0, str(folder))
    other = {m: sys.modules.pop(m) for m in ("train", "replay") if m in sys.modules}   # hf's train
    try:
        train = importlib.import_module("train")
        replay = importlib.import_module("replay")
    finally:
        sys.path.remove(str(folder))
        for m in ("train", "replay"):
            sys.modules.pop(m, None)
        sys.modules.update(other)
    from postmortem.run.model import RunManifest
    args = train.settings(["--out", str(workdir / "plain")])
    r = replay.make_replay(RunManifest.model_validate(train.manifest(args, 1)), workdir / "plain", "cpu")
    model = copy.deepcopy(r.model)
    opt = train.new_optimizer(args, model)

    def step(batch):
        x, y = batch
        train.per_token_loss(args, model, 0, x, y).mean().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), train.CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return r, step


def lightning(workdir: Path):
    """The Lightning example's module and data through make_replay (the factory, the walked
    dataloader, LightningReplay's step); the plain step is a hand-written loop over a copy of
    the module with the same AdamW and clip."""
    from postmortem.integrations.lightning import make_replay
    from postmortem.run.model import RunManifest
    folder = HERE.parent / "examples" / "lightning"
    manifest = RunManifest.model_validate({
        "config": {"precision": "32-true", "clip": 1.0, "accumulate_grad_batches": 1},
        "replay": {"entrypoint": "postmortem.integrations.lightning:make_replay", "factory": "train:build",
                   "factory_dir": str(folder), "hparams": {"inject": "none"}}})
    r = make_replay(manifest, workdir / "lightning", "cpu")
    model = copy.deepcopy(r.model)
    opt = torch.optim.AdamW(model.model.param_groups(0.1), lr=3e-3, betas=(0.9, 0.95), eps=1e-8, fused=False)

    def step(batch):
        model.per_token_loss(batch, 0).mean().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return r, step


BENCHES = {"hf": hf, "plain": plain, "lightning": lightning}


def steps(r, plain, first: int, n: int, mode: str) -> float:
    t = time.perf_counter()
    for s in range(first, first + n):
        if mode == "plain":
            plain(r.batch_at(s))
            continue
        row = r.forward_backward(s)
        if mode == "probe":
            row["nonfinite"] = probe(r)
        r.optimizer_step(row)
    return time.perf_counter() - t


def run(name: str, rounds: int, n: int, workdir: Path) -> dict:
    r, plain = BENCHES[name](workdir)
    for s in range(n):             # warm up, and the batches cached for every mode alike
        r.batch_at(s)
    steps(r, plain, 0, 3, "plain")
    steps(r, plain, 0, 3, "replay")
    times: dict[str, list[float]] = {"plain": [], "replay": [], "probe": []}
    for _ in range(rounds):
        for mode in times:
            times[mode].append(steps(r, plain, 0, n, mode))
    return {"integration": name, "rounds": rounds, "steps_per_round": n,
            "plain_step_ms": 1000 * statistics.median(times["plain"]) / n,
            "replay_step_ms": 1000 * statistics.median(times["replay"]) / n,
            "replay_vs_plain": statistics.median(b / a for a, b in zip(times["plain"], times["replay"])),
            "probe_vs_replay": statistics.median(c / b for b, c in zip(times["replay"], times["probe"]))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=sorted(BENCHES), action="append")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = {"machine": this_machine(), "results": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or sorted(BENCHES):
            out["results"].append(run(name, args.rounds, args.steps, Path(tmp)))
            print(json.dumps(out["results"][-1], indent=2))
            (HERE / "results").mkdir(exist_ok=True)
            (HERE / "results" / f"integrations-{name}.json").write_text(
                json.dumps({"machine": out["machine"], **out["results"][-1]}, indent=2) + "\n")


if __name__ == "__main__":
    main()
