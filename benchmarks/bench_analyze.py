"""`analyze` on a 1M-step run: detection and tree walk time, as a ratio to the read time.

    python benchmarks/bench_analyze.py [--steps 1000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from postmortem.diagnose.analyze import analyze  # noqa: E402
from postmortem.run import read_run  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    d = HERE / "data" / str(args.steps)
    results = {}
    for name in ("metrics.csv", "metrics.parquet", "tb"):
        reads, analyses = [], []
        analyze(read_run(d / name))                     # warm up imports and caches
        for _ in range(args.rounds):                    # read, analyze, read, analyze ...
            t = time.perf_counter()
            log = read_run(d / name)
            reads.append(time.perf_counter() - t)
            t = time.perf_counter()
            result = analyze(log)
            analyses.append(time.perf_counter() - t)
        r = {"read_s": statistics.median(reads), "analyze_s": statistics.median(analyses),
             "ratio": statistics.median(a / b for a, b in zip(analyses, reads)),
             "incidents": len(result.incidents)}
        results[name] = r
        print(f"{name:16s} read {r['read_s']:.2f}s  analyze {r['analyze_s']:.2f}s  "
              f"analyze/read {r['ratio']:.2f}  incidents {r['incidents']}")
    out = HERE / "results" / f"analyze-{args.steps}.json"
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
