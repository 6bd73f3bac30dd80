"""`postmortem runs STORE` on a store of 1,000 generated runs: the first scan (every run read and
analyzed in worker processes), a rescan (every run from the cache), and a rescan after 10 runs
changed; wall time, runs per second, runs per CPU-second (per core), the largest process's peak
memory, and the cache's size (its bytes, and the blocks it holds on disk).

    python benchmarks/bench_runs.py [--runs 1000] [--steps 500] [--jobs N]

The store is an MLflow file store (mlruns/<experiment>/<run>/meta.yaml, metrics/, params/, tags/)
written as MLflow writes it: 1 run in 20 has a NaN, 1 in 20 a loss spike, 2 experiments. Each
scan is the real command in a fresh process; its CPU time and peak memory are its own and its
workers' (RUSAGE_CHILDREN: the largest process's peak, not a sum). Results: results/runs.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
POSTMORTEM = Path(sys.executable).parent / "postmortem"


def make_store(root: Path, runs: int, steps: int) -> Path:
    """An MLflow file store of `runs` runs of `steps` steps (loss, lr, grad norm), as MLflow lays it out."""
    rng = random.Random(0)
    store = root / "mlruns"
    t0 = 1_700_000_000_000
    for k in range(runs):
        exp = str(k % 2)
        run = store / exp / f"{k:08x}{rng.getrandbits(96):024x}"
        (run / "metrics" / "train").mkdir(parents=True)
        (run / "params").mkdir()
        (run / "tags").mkdir()
        start = t0 + k * 3_600_000
        (run / "meta.yaml").write_text(
            f"artifact_uri: file://{run}/artifacts\nend_time: {start + steps * 1000}\nentry_point_name: ''\n"
            f"experiment_id: '{exp}'\nlifecycle_stage: active\nrun_id: {run.name}\nrun_name: run-{k}\n"
            f"run_uuid: {run.name}\nsource_name: ''\nsource_type: 4\nsource_version: ''\n"
            f"start_time: {start}\nstatus: 3\ntags: []\nuser_id: bench\n")
        (run / "params" / "lr").write_text("0.0003")
        (run / "tags" / "mlflow.runName").write_text(f"run-{k}")
        nan_at = rng.randrange(steps // 2, steps) if k % 20 == 7 else None
        spike_at = rng.randrange(steps // 2, steps) if k % 20 == 13 else None
        loss, lr, gn = [], [], []
        for s in range(steps):
            ts = start + s * 1000
            value = 2.0 + 8.0 * math.exp(-s / 80) + rng.gauss(0, 0.03)
            if s == spike_at:
                value *= 6
            if nan_at is not None and s >= nan_at:
                value = math.nan
            loss.append(f"{ts} {value} {s}\n")
            lr.append(f"{ts} {3e-4 * min(1.0, (s + 1) / 50)} {s}\n")
            gn.append(f"{ts} {1.0 + rng.gauss(0, 0.05)} {s}\n")
        (run / "metrics" / "train" / "loss").write_text("".join(loss))
        (run / "metrics" / "train" / "grad_norm").write_text("".join(gn))
        (run / "metrics" / "lr").write_text("".join(lr))
    (store / "0" / "meta.yaml").write_text("experiment_id: '0'\nname: Default\nlifecycle_stage: active\n")
    (store / "1" / "meta.yaml").write_text("experiment_id: '1'\nname: sweep\nlifecycle_stage: active\n")
    return store


def timed_scan(store: Path, env: dict, jobs: int | None) -> dict:
    """One `postmortem runs STORE --json` in a fresh process: wall, CPU and peak memory."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    cmd = [str(POSTMORTEM), "runs", str(store), "--json"] + (["--jobs", str(jobs)] if jobs else [])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"postmortem runs failed: {r.stderr}")
    rows = json.loads(r.stdout)["runs"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "runs": len(rows),
            "runs_per_s": round(len(rows) / wall, 1), "runs_per_cpu_s": round(len(rows) / cpu, 1),
            "peak_rss_mib": round(after.ru_maxrss / 1024, 1), "said": r.stderr.strip().splitlines()[-1],
            "incidents": sum(1 for x in rows if x.get("incidents")), "errors": sum(1 for x in rows if x.get("error"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--jobs", type=int, default=None, help="worker processes (default: one a core)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        store = make_store(tmp, args.runs, args.steps)
        made = time.perf_counter() - t
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache")}
        first = timed_scan(store, env, args.jobs)
        rescan = timed_scan(store, env, args.jobs)
        for run in sorted(p for p in store.glob("*/*") if p.is_dir())[:10]:   # 10 runs log more
            with open(run / "metrics" / "train" / "loss", "a") as f:
                f.write(f"{1_800_000_000_000} 2.0 {args.steps}\n")
        changed = timed_scan(store, env, args.jobs)
        cache = tmp / "cache" / "postmortem" / "runs"
        files = [p for p in cache.rglob("*.json")]
        cache_bytes = sum(p.stat().st_size for p in files)
        # what the cache takes on disk: each small file holds a whole block of the file system
        cache_disk = sum(p.stat().st_blocks * 512 for p in cache.rglob("*"))      # files and folders
        store_bytes = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    cores = os.cpu_count()
    result = {
        "what": f"postmortem runs on an MLflow file store of {args.runs} runs x {args.steps} steps "
                f"(3 metrics), {cores} cores, --jobs {args.jobs or 'default (one a core)'}",
        "store_mib": round(store_bytes / 2**20, 1), "made_in_s": round(made, 1),
        "first_scan": first, "rescan_all_cached": rescan, "rescan_10_changed": changed,
        "first_scan_runs_per_s_per_core": round(first["runs"] / first["wall_s"] / cores, 1),
        "first_scan_cpu_ms_per_run": round(1000 * first["cpu_s"] / first["runs"], 1),
        "cache_files": len(files), "cache_bytes_per_run": round(cache_bytes / max(1, len(files))),
        "cache_disk_bytes_per_run": round(cache_disk / max(1, len(files))),
        "rescan_speedup": round(first["wall_s"] / rescan["wall_s"], 1),
        "load_at_start": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=2))
    out = HERE / "results" / "runs.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
