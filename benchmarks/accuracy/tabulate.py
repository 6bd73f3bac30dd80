"""Per-log record of a blind set (reporting only: fresh, fresh2, fresh3, fresh4): what the CLI read and found.

    .venv/bin/python benchmarks/accuracy/tabulate.py fresh3 > benchmarks/results/accuracy-fresh3-perlog.json
    PYTHONPATH=/tmp/pm-COMMIT .venv/bin/python benchmarks/accuracy/tabulate.py fresh3   # an older commit's code

For each log: `postmortem info FILE --json` and `postmortem analyze FILE --json` (the real CLI, exit codes
kept), then from `read_run` the loss-scale series (values in order, how many times it fell), the segments
(first/last step, rows) and the steps whose loss is non-finite.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CLI = str(ROOT / ".venv" / "bin" / "postmortem")   # imports postmortem from PYTHONPATH when set


def scale_series(path: Path):
    from postmortem.run import read_run

    frame = read_run(path).frame
    if "loss_scale" not in frame:
        return None
    s = frame[["step", "loss_scale"]].dropna()
    vals = [float(v) for v in s["loss_scale"]]
    falls = sum(1 for a, b in zip(vals, vals[1:]) if b < a)
    return {"values": vals[:40], "steps": [int(x) for x in s["step"]][:40], "falls": falls}


def nan_rows(path: Path):
    """Steps where the log printed a NaN (read_run's `logged_nan`: row positions) or an inf, per column."""
    import numpy as np

    from postmortem.run import read_run

    log = read_run(path)
    steps = log.frame["step"].to_numpy()
    out = {}
    for col, rows in (getattr(log, "logged_nan", None) or {}).items():
        rows = [int(r) for r in rows if 0 <= int(r) < len(steps)]
        if rows:
            out[col] = {"nan": sorted({int(steps[r]) for r in rows})[:20]}
    for col in log.frame.columns:
        if col != "step" and log.frame[col].dtype.kind == "f":
            inf = np.isinf(log.frame[col].to_numpy())
            if inf.any():
                out.setdefault(col, {})["inf"] = sorted({int(x) for x in steps[inf]})[:20]
    return out


def cli(out: dict, command: str, path: Path, timeout: int) -> dict | None:
    """`postmortem COMMAND PATH --json` as a user runs it: its JSON, or None with its exit code
    and last line kept in `out` (`COMMAND_rc`, `COMMAND_error`)."""
    r = subprocess.run([CLI, command, str(path), "--json"], capture_output=True, text=True, timeout=timeout)
    out[f"{command}_rc"] = r.returncode
    if r.returncode:
        out[f"{command}_error"] = (r.stderr or r.stdout).strip().splitlines()[-1:]
        return None
    return json.loads(r.stdout)


def one(run: dict) -> dict:
    d = ROOT / run["path"]
    files = [p for p in sorted(d.iterdir()) if p.is_file()]
    f = files[0]
    out = {"run": run["run"], "file": str(f.relative_to(ROOT))}
    i = cli(out, "info", f, timeout=120)
    if i is None:
        return out
    out["format"] = i["run"]["format"]
    out["rows"] = i["steps"]["rows"]
    out["steps"] = [i["steps"]["first"], i["steps"]["last"]]
    out["segments"] = len(i["segments"])
    out["segment_spans"] = i["segments"]
    out["read"] = i.get("read")
    out["warnings"] = i.get("warnings")
    out["metrics"] = {m["name"]: {"from": m.get("from"), "dialect": m.get("dialect"), "count": m["count"],
                                  "nan": m.get("nan"), "inf": m.get("inf"), "min": m.get("min"), "max": m.get("max")}
                      for m in i["metrics"]}
    out["loss_scale"] = scale_series(f)
    out["nan_steps"] = nan_rows(f)
    a = cli(out, "analyze", f, timeout=300)
    if a is None:
        return out
    out["incidents"] = [{"kind": x.get("kind"), "metric": x.get("metric"), "step": x.get("step"),
                         "top": (x.get("hypotheses") or [{}])[0].get("pattern"),
                         "top_score": (x.get("hypotheses") or [{}])[0].get("score")}
                        for x in a["incidents"]]
    out["checks"] = {c["id"]: [c["status"], c["detail"][:160]] for c in a["checks"]
                     if c["id"].startswith(("B3", "B4", "B2", "A6")) or c["status"] not in ("ok", "skipped")}
    return out


def main() -> int:
    which = sys.argv[1] if len(sys.argv) > 1 else "fresh"
    if which not in ("fresh", "fresh2", "fresh3", "fresh4"):
        print(f"tabulate.py: {which}: not a blind set (fresh, fresh2, fresh3, fresh4)", file=sys.stderr)
        return 2
    # postmortem from PYTHONPATH where it is set (another commit's code under test), else this tree's
    if "PYTHONPATH" not in os.environ:
        sys.path.insert(0, str(ROOT))
    labels = json.loads((HERE / "labels" / f"{which}.json").read_text())["runs"]
    rows = [one(r) for r in labels]
    json.dump({"runs": rows}, sys.stdout, indent=1, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
