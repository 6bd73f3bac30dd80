"""Make big synthetic runs (N steps x 6 metrics) in each format, for the read benchmarks.

    python benchmarks/make_runs.py --steps 1000000       # -> benchmarks/data/<N>/...
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from writers import field  # noqa: E402

from postmortem.run.protowire import crc32c_columns, masked  # noqa: E402

METRICS = ["loss", "grad_norm", "lr", "loss_scale", "val_loss", "tokens_per_s"]


def synthetic(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    step = np.arange(n, dtype=np.int64)
    loss = 2.0 + 8.0 * np.exp(-step / (n / 20)) + 0.05 * rng.standard_normal(n)
    loss[n // 2] += 3.0                                  # one spike to find
    return pd.DataFrame({
        "step": step, "loss": loss,
        "grad_norm": np.abs(0.3 + 0.05 * rng.standard_normal(n)),
        "lr": 3e-4 * np.minimum(1, step / 2000) * (0.5 + 0.5 * np.cos(np.pi * step / n)),
        "loss_scale": 2.0 ** (16 - (step // 50_000) % 4),
        "val_loss": loss + 0.1,
        "tokens_per_s": 1e5 + rng.standard_normal(n),
    })


def write_tensorboard(df: pd.DataFrame, path: Path) -> None:
    """Events interleaved per step like SummaryWriter.add_scalar; framing and CRCs in bulk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(df)
    with open(path, "wb") as f:
        chunk = 50_000
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            events = []
            for i in range(lo, hi):
                step = int(df.step.iat[i])
                head = field(1, 1, struct.pack("<d", 1.7e9 + i)) + (field(2, 0, step) if step else b"")
                for m in METRICS:
                    v = field(1, 2, m.encode()) + field(2, 5, struct.pack("<f", df[m].iat[i]))
                    events.append(head + field(5, 2, field(1, 2, v)))
            lengths = np.array([len(e) for e in events], dtype=np.int64)
            headers = lengths.astype("<u8").view(np.uint8).reshape(-1, 8)
            hcrc = masked(crc32c_columns(headers.ravel(), np.arange(len(events)) * 8, 8))
            blob = np.frombuffer(b"".join(events), dtype=np.uint8)
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            dcrc = np.zeros(len(events), dtype=np.uint32)
            for L in np.unique(lengths):
                idx = np.flatnonzero(lengths == L)
                dcrc[idx] = masked(crc32c_columns(blob, starts[idx], int(L)))
            out = bytearray()
            for e, h, hc, dc in zip(events, headers, hcrc, dcrc):
                out += h.tobytes() + struct.pack("<I", hc) + e + struct.pack("<I", dc)
            f.write(out)


def write_all(n: int, root: Path) -> Path:
    out = root / str(n)
    out.mkdir(parents=True, exist_ok=True)
    df = synthetic(n)
    if not (out / "metrics.csv").exists():
        df.to_csv(out / "metrics.csv", index=False)
    if not (out / "metrics.jsonl").exists():
        df.to_json(out / "metrics.jsonl", orient="records", lines=True)
    if not (out / "metrics.parquet").exists():
        df.to_parquet(out / "metrics.parquet")
    tb = out / "tb" / "events.out.tfevents.1700000000.host.1.0"
    if not tb.exists():
        write_tensorboard(df, tb)
    llmc = out / "llmc.log"
    if not llmc.exists():
        with open(llmc, "w") as f:
            for r in df.itertuples():
                f.write(f"s:{r.step} trl:{r.loss:.4f} lr:{r.lr:.6f} norm:{r.grad_norm:.2f}\n")
    state = out / "hf" / "trainer_state.json"
    if not state.exists():
        state.parent.mkdir(exist_ok=True)
        rows = df.rename(columns={"lr": "learning_rate"}).drop(columns=["val_loss"]).to_dict("records")
        state.write_text(json.dumps({"global_step": n, "log_history": rows}))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--root", default=str(Path(__file__).parent / "data"))
    args = ap.parse_args()
    print(write_all(args.steps, Path(args.root)))
