"""`postmortem check` on a post-mortem with a very long evidence table, whole processes,
this checkout against another revision (A/B interleaved, medians).

    python benchmarks/bench_check.py --rows 150000 --base d8e1e36 --pairs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXAMPLE = ROOT / "learners" / "example" / "postmortems" / "2026-11-22-19-spike-001.md"
ROW = "| loss | row {i}: the loss rose on this batch | long-tail-token | fp16-overflow |\n"


def long_document(rows: int, out: Path) -> Path:
    """The example with `rows` more rows in section 3 (each favors the root cause)."""
    text = EXAMPLE.read_text()
    at = text.index("|---|", text.index("## 3."))
    at = text.index("\n", at) + 1
    out.write_text(text[:at] + "".join(ROW.format(i=i) for i in range(rows)) + text[at:])
    return out


def checkout(rev: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def timed(src: Path, doc: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "postmortem", "check", str(doc)], env=env, cwd=src,
                       capture_output=True, text=True)
    took = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"{src}: check failed: {r.stderr.strip()}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=150_000)
    ap.add_argument("--base", help="the revision to compare with (A); B is this checkout")
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        doc = long_document(args.rows, Path(tmp) / "long.md")
        base = checkout(args.base, Path(tmp) / "base") if args.base else None
        a, b = [], []
        for _ in range(args.pairs):
            if base:
                a.append(timed(base, doc))
            b.append(timed(ROOT, doc))
    result = {"rows": args.rows, "machine": f"{os.cpu_count()} cores", "this_checkout_s": b,
              "this_checkout_median_s": statistics.median(b)}
    if base:
        result.update({"base": args.base, "base_s": a, "base_median_s": statistics.median(a),
                       "median_ratio_base_over_this": statistics.median(x / y for x, y in zip(a, b))})
    print(json.dumps(result, indent=2))
    out = HERE / "results" / "check.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
