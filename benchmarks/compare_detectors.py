"""Our incidents against the spike rules people use today, on the sample runs and the
real logs: which known events each finds, and how many other alarms it raises.

    python benchmarks/compare_detectors.py      # prints a markdown table

W&B-style z > 3 over the previous 30 points; OLMo-core's mean + 6 std over 128;
Lightning-style 3x the mean of the previous 10; Megatron-style 10x the max of the
first 100 values. They run on the loss (the grad norm where the event is a grad-norm
spike); NaN compares false, so they never flag one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from postmortem.diagnose.analyze import analyze  # noqa: E402
from postmortem.run import read_run  # noqa: E402

REAL = ROOT.parent / "shared" / "real_runs"
# run -> (metric, steps of the known events); an empty list is a clean run
CASES = {
    "sample_runs/long-tail-token": ("loss", [250]),
    "sample_runs/fp16-overflow": ("loss", [250]),
    "sample_runs/lr-discontinuity": ("loss", [251]),
    "sample_runs/optimizer-reset": ("loss", [202]),
    "sample_runs/numerics": ("loss", [250]),
    "sample_runs/bad-init": ("loss", [0]),
    "sample_runs/schedule-misconfigured": ("loss", [141]),
    "sample_runs/bad-data": ("grad_norm", [240]),
    "sample_runs/healthy": ("loss", []),
    "REAL/bloom-tr11-176B-chronicles": ("loss", [31219]),
    "REAL/bloom-tr8-104B-chronicles": ("loss", [6930, 7010, 8741, 9026]),
    "REAL/bloom-tr8b-104B-chronicles": ("loss", [17062]),
    "REAL/bloom-tr1-13B-chronicles": ("loss", [29050]),
    "REAL/modded-nanogpt-muon": ("loss", [919, 947, 5335, 6127]),
    "REAL/modded-nanogpt-soap": ("loss", [919, 947, 5335]),
    "REAL/llmc-modded-nanogpt-llmc": ("grad_norm", [7435, 9025]),
    "REAL/hf-trainer-star-gnspikes": ("grad_norm", [4700, 10600, 22360, 33900, 34060, 35440, 36000, 37700]),
    "REAL/wandb-alpaca-9am288wn": ("grad_norm", [43]),
    "REAL/deepspeed-chat-sft-opt1.3b": ("loss", []),
    "REAL/megatron-deepspeed-moe-0.125B": ("loss", []),
    "REAL/hf-trainer-tinyllama-evalrows": ("loss", []),
    "REAL/lightning-slm-training": ("loss", []),
}


def events(steps: np.ndarray, flags: np.ndarray, gap: int = 10) -> list[int]:
    idx = np.flatnonzero(flags)
    if not len(idx):
        return []
    keep = np.r_[True, np.diff(steps[idx]) > gap]
    return steps[idx][keep].tolist()


def usual(steps: np.ndarray, x: np.ndarray) -> dict[str, list[int]]:
    s = pd.Series(x)
    prev = s.shift(1)
    w30, w128, w10 = prev.rolling(30, min_periods=30), prev.rolling(128, min_periods=128), prev.rolling(10, min_periods=10)
    first100 = np.nanmax(x[:100]) if len(x) >= 100 else np.inf
    return {
        "W&B z>3/30": events(steps, (s > w30.mean() + 3 * w30.std()).to_numpy()),
        "OLMo 6std/128": events(steps, (s > w128.mean() + 6 * w128.std()).to_numpy()),
        "Lightning 3x/10": events(steps, (s > 3 * w10.mean()).to_numpy()),
        "Megatron 10x max(100)": events(steps, x > 10 * first100),
    }


def score(found: list[int], known: list[int], tol: int = 3) -> str:
    hit = sum(any(abs(f - k) <= tol for f in found) for k in known)
    other = sum(not any(abs(f - k) <= tol for k in known) for f in found)
    return f"{hit}/{len(known)} +{other}"


def main() -> None:
    rows = []
    for key, (metric, known) in CASES.items():
        path = Path(str(key).replace("REAL", str(REAL))) if key.startswith("REAL") else ROOT / key
        if not path.exists():
            continue
        log = read_run(path)
        f = log.frame[log.frame.segment == log.frame.segment.max()] if metric == "loss" else log.frame
        f = f[f[metric].notna()] if metric in f else f.iloc[:0]
        steps, x = f.step.to_numpy(), f[metric].to_numpy() if metric in f else np.empty(0)
        ours = [i.step for i in analyze(log).incidents]
        cols = {"ours": score(ours, known)}
        for name, found in usual(steps, x).items():
            cols[name] = score(found, known)
        rows.append({"run": key.split("/")[-1], "metric": metric, **cols})
    print("Each cell: known events found / known events, + other alarms.\n")
    names = list(rows[0])
    print("| " + " | ".join(names) + " |")
    print("|" + "---|" * len(names))
    for r in rows:
        print("| " + " | ".join(str(r[n]) for n in names) + " |")


if __name__ == "__main__":
    main()
