"""The post-mortem's figure: what drawing it costs, against analysing the same run.

In one process, after a first draw (matplotlib imported): `figure.png(log, step)` against
`analyze(log)`, interleaved A B A B, medians. Whole processes, interleaved: `postmortem
analyze RUN --json` against `postmortem new RUN` with and without the figure (matplotlib
made unimportable in the child), so the figure's share of `new` is seen with its import.

    .venv/bin/python benchmarks/bench_figure.py [RUN ...] [--pairs 5] [-o results/figure.json]
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
sys.path.insert(0, str(ROOT))
RUNS = [ROOT / "sample_runs" / "long-tail-token", ROOT.parent / "shared" / "real_runs" / "modded-nanogpt-muon"]
NO_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = None; from postmortem.cli import main; sys.exit(main())"


def in_process(run: Path, pairs: int) -> dict:
    from postmortem.diagnose.analyze import analyze
    from postmortem.diagnose.models import worst
    from postmortem.document import figure
    from postmortem.run import read_run
    log = read_run(run)
    incidents = analyze(log).incidents
    inc = incidents[worst(incidents)]
    t0 = time.perf_counter()
    first = figure.png(log, inc.step, None, inc.kind)            # with matplotlib's import
    first_s = time.perf_counter() - t0
    a, b = [], []
    for _ in range(pairs):
        t0 = time.perf_counter()
        analyze(log)
        a.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        figure.png(log, inc.step, None, inc.kind)
        b.append(time.perf_counter() - t0)
    return {"rows": len(log.frame), "incident": f"{inc.kind} at step {inc.step}", "png_bytes": len(first),
            "first_draw_s": round(first_s, 3), "analyze_s": round(statistics.median(a), 4),
            "draw_s": round(statistics.median(b), 4),
            "draw_over_analyze": round(statistics.median(b) / statistics.median(a), 3)}


def whole(run: Path, pairs: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times: dict[str, list[float]] = {"analyze": [], "new_without_figure": [], "new_with_figure": []}
    with tempfile.TemporaryDirectory() as tmp:
        cmds = {"analyze": [sys.executable, "-m", "postmortem", "analyze", str(run), "--json"],
                "new_without_figure": [sys.executable, "-c", NO_MATPLOTLIB, "new", str(run), "--learner", "b",
                                       "-o", f"{tmp}/a.md", "--force"],
                "new_with_figure": [sys.executable, "-m", "postmortem", "new", str(run), "--learner", "b",
                                    "-o", f"{tmp}/b.md", "--force"]}
        for _ in range(pairs):
            for name, cmd in cmds.items():
                t0 = time.perf_counter()
                r = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
                times[name].append(time.perf_counter() - t0)
                if r.returncode != 0:
                    raise SystemExit(f"{name}: {r.stderr.strip()[-300:]}")
        assert Path(tmp, "b.png").is_file() and not Path(tmp, "a.png").exists()
    med = {k: statistics.median(v) for k, v in times.items()}
    return {**{f"{k}_s": round(v, 3) for k, v in med.items()},
            "figure_s": round(med["new_with_figure"] - med["new_without_figure"], 3),
            "figure_over_analyze": round((med["new_with_figure"] - med["new_without_figure"]) / med["analyze"], 3),
            "new_with_over_without": round(med["new_with_figure"] / med["new_without_figure"], 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="*", type=Path, default=[r for r in RUNS if r.exists()])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()
    out = {"load_average": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(), "runs": {}}
    for run in args.runs:
        out["runs"][run.name] = {"in_process": in_process(run, args.pairs), "whole_process": whole(run, args.pairs)}
        print(run.name, json.dumps(out["runs"][run.name]), flush=True)
    if args.output:
        args.output.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
