"""Mini-GPT training speed on this machine, and the recorder's overhead as a ratio.

    python benchmarks/bench_minigpt.py [--rounds 5] [--steps 100]

The same Trainer runs `steps` steps without and with the Recorder (per-layer
stats every 50 steps), alternating A B A B; the ratio quoted is the median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from postmortem.minigpt.config import TrainConfig  # noqa: E402
from postmortem.minigpt.train import Trainer  # noqa: E402
from postmortem.run.record import Recorder, this_machine  # noqa: E402


def run(trainer: Trainer, first: int, steps: int, rec: Recorder | None) -> float:
    t = time.perf_counter()
    for step in range(first, first + steps):
        row = trainer.train_step(step)
        if rec is not None and rec.wants_layers(step):
            rec.layers(step, trainer.model, trainer.optimizer)
        trainer.finish_step(row)
        if rec is not None:
            rec.log(step, **row)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    trainer = Trainer(TrainConfig(steps=10**6), dev)
    run(trainer, 0, 20, None)                                    # warm up
    plain, recorded = [], []
    with tempfile.TemporaryDirectory() as d:
        rec = Recorder(d, layer_every=50)
        step = 20
        for _ in range(args.rounds):
            plain.append(run(trainer, step, args.steps, None))
            step += args.steps
            recorded.append(run(trainer, step, args.steps, rec))
            step += args.steps
        rec.close()
    ratios = [b / a for a, b in zip(plain, recorded)]
    result = {"device": str(dev), "machine": this_machine(dev), "threads": torch.get_num_threads(),
              "steps_per_s": args.steps / statistics.median(plain),
              "recorder_overhead_ratio": statistics.median(ratios), "rounds": args.rounds}
    print(json.dumps(result, indent=2))
    out = HERE / "results" / f"minigpt-{dev.type}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
