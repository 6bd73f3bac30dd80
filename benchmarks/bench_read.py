"""Reading speed and memory, as ratios to the routes users take today, in the same run.

    python benchmarks/make_runs.py --steps 1000000
    python benchmarks/bench_read.py --steps 1000000 [--rounds 5] [--slow-steps 100000]
    python benchmarks/bench_read.py --only megatron --steps 1000000 [--rounds 5]

Baseline and candidate alternate (A B A B ...) because these machines slow down
under sustained load; the ratio quoted is the median of the per-pair ratios.
tbparse and EventAccumulator take minutes at 1M steps, so they are compared on
the --slow-steps run; the record-decoding floor is compared at full size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def interleaved(baseline, candidate, rounds: int) -> dict:
    a, b = [], []
    for _ in range(rounds):
        a.append(timed(baseline))
        b.append(timed(candidate))
    ratios = [y / x for x, y in zip(a, b)]
    return {"baseline_s": statistics.median(a), "ours_s": statistics.median(b),
            "ratio": statistics.median(ratios), "rounds": rounds}


def ours(path, fmt=None):
    from postmortem.run import read_run
    return lambda: read_run(path, format=fmt)


def decode_records(path: Path):
    """The floor: frame every record and parse it as an Event with protobuf's C parser."""
    from tensorboard.compat.proto.event_pb2 import Event

    def run():
        data = path.read_bytes()
        off, n, unpack, parse = 0, len(data), struct.Struct("<Q").unpack_from, Event.FromString
        while off + 12 <= n:
            length = unpack(data, off)[0]
            parse(data[off + 12:off + 12 + length])
            off += 16 + length
    return run


def tbparse_scalars(path: Path):
    from tbparse import SummaryReader
    return lambda: SummaryReader(str(path)).scalars


def event_accumulator(path: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def run():
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        return {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}
    return run


MEMORY_PROBE = r"""
import gc, json, sys
sys.path.insert(0, {root!r})
import numpy, pandas, pyarrow, pyarrow.csv, pyarrow.json, pyarrow.parquet
from postmortem.run import read_run

def status(key):
    for line in open('/proc/self/status'):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

def read(path):
    if {route!r} == 'ours':
        return read_run(path).frame
    if {route!r} == 'pandas-csv':
        return pandas.read_csv(path, engine='pyarrow')
    return pyarrow.json.read_json(path).to_pandas()

if {warm!r}:
    read({warm!r})        # the allocators grow once per process and keep what they got
gc.collect()
open('/proc/self/clear_refs', 'w').write('5')     # reset the high-water mark to now
before = status('VmRSS')
df = read({path!r})
peak = status('VmHWM')
print(json.dumps({{"peak_over_start": peak - before, "frame_bytes": int(df.memory_usage(deep=True).sum())}}))
"""


def memory(path: Path, route: str, warm: Path | None = None) -> dict:
    code = MEMORY_PROBE.format(root=str(HERE.parent), route=route, path=str(path),
                               warm=str(warm) if warm else "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    m = json.loads(out.stdout)
    m["ratio_to_frame"] = m["peak_over_start"] / m["frame_bytes"]
    return m


def trainer_state(d: Path, rounds: int) -> None:
    """trainer_state.json: read column-wise by arrow vs json.load, and vs the row-by-row route."""
    import postmortem.run.hf as hf
    state = d / "hf" / "trainer_state.json"

    def rowwise():
        hf._ARROW_FROM, keep = 1 << 62, hf._ARROW_FROM
        try:
            ours(d / "hf")()
        finally:
            hf._ARROW_FROM = keep
    results = {"steps": int(d.name)}
    for name, base, cand in [("trainer_state.json vs json.load", lambda: json.loads(state.read_bytes()),
                              ours(d / "hf")),
                             ("row-by-row route vs json.load", lambda: json.loads(state.read_bytes()),
                              rowwise)]:
        r = results[name] = interleaved(base, cand, rounds)
        print(f"  {name:38s} baseline {r['baseline_s']:7.3f}s  ours {r['ours_s']:7.3f}s  "
              f"ratio {r['ratio']:.2f}")
    out = HERE / "results" / f"read-trainer-state-{d.name}.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


MEGATRON_LINE = (" iteration {i:8d}/ {total:8d} | consumed samples: {samples:12d} | consumed tokens: "
                 "{tokens:14d} | elapsed time per iteration (ms): {ms:.1f} | learning rate: {lr:.3E} | "
                 "global batch size:   256 | lm loss: {loss:.6E} | loss scale: {scale:.1f} | grad norm: "
                 "{gn:.3f} | number of skipped iterations: {skip:3d} | number of nan iterations: {nan:3d} |\n")


def write_megatron(d: Path, n: int) -> tuple[Path, Path]:
    """A Megatron stdout of n iterations and the same numbers as a CSV."""
    import numpy as np
    log, csv = d / "megatron.log", d / "megatron.csv"
    if log.exists() and csv.exists():
        return log, csv
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    ms, loss, gn = rng.uniform(400, 900, n), 10 / (1 + np.arange(n) / 1000) + rng.random(n) / 10, rng.random(n) * 2
    with open(log, "w") as f, open(csv, "w") as c:
        c.write("step,consumed_samples,consumed_tokens,elapsed_ms,lr,global_batch_size,loss,loss_scale,"
                "grad_norm,skipped,nan_iterations\n")
        for i in range(1, n + 1):
            v = dict(i=i, total=2 * n, samples=i * 256, tokens=i * 524288, ms=ms[i - 1],
                     lr=3e-4 * min(1.0, i / 2000), loss=loss[i - 1], scale=4096.0, gn=gn[i - 1], skip=0, nan=0)
            f.write(MEGATRON_LINE.format(**v))
            c.write(f"{i},{v['samples']},{v['tokens']},{v['ms']:.1f},{v['lr']:.3E},256,{v['loss']:.6E},"
                    f"{v['scale']:.1f},{v['gn']:.3f},0,0\n")
    return log, csv


def megatron(d: Path, n: int, rounds: int) -> None:
    """A Megatron text log read column-wise vs pandas.read_csv of the same numbers, whole processes.

    Wall time is what the user waits; CPU time (user + system of the child) is what the
    work costs, and moves less when other processes share the machine: both are kept."""
    import os
    import resource
    log, csv = write_megatron(d, n)
    root = str(HERE.parent)
    cpu: dict[str, list[float]] = {"baseline": [], "ours": []}

    def process(code: str, key: str):
        def run():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[key].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        return run
    base = process(f"import pandas; pandas.read_csv({str(csv)!r})", "baseline")
    cand = process(f"import sys; sys.path.insert(0, {root!r}); from postmortem.run import read_run; "
                   f"assert len(read_run({str(log)!r}).frame) == {n}", "ours")
    load = os.getloadavg()[0]
    r = interleaved(base, cand, rounds)
    r["cpu"] = {"baseline_s": statistics.median(cpu["baseline"]), "ours_s": statistics.median(cpu["ours"]),
                "ratio": statistics.median(y / x for x, y in zip(cpu["baseline"], cpu["ours"]))}
    r["load_average"] = [round(load, 1), round(os.getloadavg()[0], 1)]
    r["cores"] = os.cpu_count()
    name = f"megatron text ({n} lines) vs pandas.read_csv"
    print(f"  {name:38s} baseline {r['baseline_s']:7.3f}s  ours {r['ours_s']:7.3f}s  ratio {r['ratio']:.2f}"
          f"  (CPU {r['cpu']['baseline_s']:.2f}s vs {r['cpu']['ours_s']:.2f}s, ratio {r['cpu']['ratio']:.2f};"
          f" load {r['load_average']})")
    out = HERE / "results" / f"read-megatron-{n}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({name: r, "log_bytes": log.stat().st_size, "csv_bytes": csv.stat().st_size},
                              indent=2))
    print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--slow-steps", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", choices=["trainer_state", "megatron"],
                    help="this comparison alone (trainer_state needs <steps>/hf/trainer_state.json; "
                         "megatron writes its log and CSV)")
    args = ap.parse_args()
    if args.only == "megatron":
        return megatron(HERE / "data" / str(args.steps), args.steps, args.rounds)
    if args.only == "trainer_state":
        return trainer_state(HERE / "data" / str(args.steps), args.rounds)
    import pandas as pd
    import pyarrow.json as pajson
    d = HERE / "data" / str(args.steps)
    slow = HERE / "data" / str(args.slow_steps)
    results: dict = {"steps": args.steps, "metrics": 6}
    tb = d / "tb"
    tb_file = next(tb.glob("events*"))
    print(f"{args.steps} steps x 6 metrics")

    def show(name, r):
        results[name] = r
        print(f"  {name:38s} baseline {r['baseline_s']:7.3f}s  ours {r['ours_s']:7.3f}s  "
              f"ratio {r['ratio']:.2f}")

    show("csv vs pandas.read_csv(engine=pyarrow)",
         interleaved(lambda: pd.read_csv(d / "metrics.csv", engine="pyarrow"), ours(d / "metrics.csv"), args.rounds))
    show("jsonl vs pyarrow.json.read_json",
         interleaved(lambda: pajson.read_json(d / "metrics.jsonl"), ours(d / "metrics.jsonl"), args.rounds))
    show("parquet vs pandas.read_parquet",
         interleaved(lambda: pd.read_parquet(d / "metrics.parquet"), ours(d / "metrics.parquet"), args.rounds))
    show("tensorboard vs decoding every record",
         interleaved(decode_records(tb_file), ours(tb), args.rounds))
    if (slow / "tb").exists():
        slow_file = next((slow / "tb").glob("events*"))
        show(f"tensorboard@{args.slow_steps} vs tbparse",
             interleaved(tbparse_scalars(slow / "tb"), ours(slow / "tb"), 2))
        show(f"tensorboard@{args.slow_steps} vs EventAccumulator",
             interleaved(event_accumulator(slow_file), ours(slow / "tb"), 2))
    show("llm.c text vs reading its lines",
         interleaved(lambda: sum(1 for _ in open(d / "llmc.log")), ours(d / "llmc.log"), 3))
    show("trainer_state.json vs json.load",
         interleaved(lambda: json.loads((d / "hf" / "trainer_state.json").read_bytes()),
                     ours(d / "hf"), 3))
    print("peak memory over start, as a multiple of the final DataFrame "
          "(cold process | a second read of the same file in that process)")
    for name, path, route in [("csv", d / "metrics.csv", "ours"), ("csv pandas", d / "metrics.csv", "pandas-csv"),
                              ("jsonl", d / "metrics.jsonl", "ours"),
                              ("jsonl pyarrow", d / "metrics.jsonl", "pyarrow-json"),
                              ("parquet", d / "metrics.parquet", "ours"), ("tensorboard", tb, "ours"),
                              ("llm.c", d / "llmc.log", "ours"), ("trainer_state", d / "hf", "ours")]:
        m = memory(path, route)
        w = memory(path, route, warm=path)
        results[f"memory {name}"] = {"cold": m, "warm": w}
        print(f"  {name:16s} frame {m['frame_bytes'] / 1e6:6.1f} MB  peak {m['peak_over_start'] / 1e6:7.1f} MB"
              f" x{m['ratio_to_frame']:.2f} | {w['peak_over_start'] / 1e6:7.1f} MB x{w['ratio_to_frame']:.2f}")
    out = HERE / "results" / f"read-{args.steps}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
