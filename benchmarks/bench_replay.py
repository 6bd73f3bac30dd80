"""Replay costs: a 100-step replay of a sample run, and the probes' overhead per step against
torch.autograd.detect_anomaly, in the same process, alternating A B C A B C.

    python benchmarks/bench_replay.py [--rounds 5] [--steps 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from postmortem.diagnose.analyze import analyze  # noqa: E402
from postmortem.minigpt.replay import make_replay  # noqa: E402
from postmortem.replay.engine import Replayer  # noqa: E402
from postmortem.run import read_run  # noqa: E402
from postmortem.run.record import this_machine  # noqa: E402

RUN = HERE.parent / "sample_runs" / "long-tail-token"


def steps(r, first: int, n: int, mode: str) -> float:
    t = time.perf_counter()
    for s in range(first, first + n):
        if mode == "anomaly":
            with torch.autograd.detect_anomaly(check_nan=True):
                row = r.forward_backward(s)
        else:
            row = r.forward_backward(s)
            if mode == "probe":      # the always-on probe: one fused finiteness check
                params = [p.grad for p in r.model.parameters() if p.grad is not None]
                bad = not bool(torch.isfinite(torch.stack([torch.linalg.vector_norm(g) for g in params])).all())
                row["nonfinite"] = bad
        r.optimizer_step(row)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    torch.set_num_threads(1)
    log = read_run(RUN)
    r = make_replay(log.manifest, RUN, torch.device(args.device))
    r.load(RUN / "checkpoints" / "step_000150.pt")
    times: dict[str, list[float]] = {"plain": [], "probe": [], "anomaly": []}
    step = 150
    import warnings
    warnings.simplefilter("ignore")
    for _ in range(args.rounds):
        for mode in times:
            times[mode].append(steps(r, step, args.steps, mode))
            step += args.steps
    probe = statistics.median(b / a for a, b in zip(times["plain"], times["probe"]))
    anomaly = statistics.median(c / a for a, c in zip(times["plain"], times["anomaly"]))
    inc = analyze(log).incidents[0]
    t = time.perf_counter()
    result = Replayer(log, inc, args.device).replay(("faithful",))
    one_arm = time.perf_counter() - t
    n = len(result.arms["faithful"].losses)
    out = {"device": args.device, "machine": this_machine(torch.device(args.device)),
           "probe_overhead_ratio": probe, "detect_anomaly_ratio": anomaly,
           "plain_step_ms": 1000 * statistics.median(times["plain"]) / args.steps,
           "faithful_arm_s": one_arm, "faithful_arm_steps": n,
           "replay_100_steps_s_estimate": one_arm * 100 / n}
    print(json.dumps(out, indent=2))
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / f"replay-{args.device}.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
