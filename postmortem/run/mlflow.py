"""MLflow local stores: the `mlruns/` file store and the `mlflow.db` SQLite store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from postmortem.run.assemble import Series
from postmortem.run.model import RunReadError, Source

_DBL_MAX = 1.7976931348623157e308   # MLflow stores +-inf as +-DBL_MAX


def _fix_inf(values: np.ndarray) -> np.ndarray:
    values = values.copy()
    values[values >= _DBL_MAX] = np.inf
    values[values <= -_DBL_MAX] = -np.inf
    return values


def is_mlflow_run_dir(path: Path) -> bool:
    return (path / "metrics").is_dir() and (path / "meta.yaml").exists()


def find_file_store_runs(root: Path) -> list[Path]:
    if is_mlflow_run_dir(root):
        return [root]
    return sorted(p.parent for p in root.rglob("meta.yaml") if is_mlflow_run_dir(p.parent))


def read_file_store_run(run_dir: Path, source: Source) -> list[Series]:
    """metrics/<key> files: `timestamp value step` per line; keys with / are subfolders."""
    metrics = run_dir / "metrics"
    per_key = []
    for f in sorted(p for p in metrics.rglob("*") if p.is_file()):
        key = f.relative_to(metrics).as_posix()
        ts, vals, steps = [], [], []
        for lineno, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            try:
                if len(parts) < 2:
                    raise ValueError
                ts.append(int(parts[0]))
                vals.append(float(parts[1]))
                steps.append(int(parts[2]) if len(parts) > 2 else 0)
            except ValueError:
                raise RunReadError(f, f"line {lineno}: {line.strip()[:60]!r} is not "
                                      f"'timestamp value step'") from None
        if steps:
            per_key.append((key, np.array(ts, dtype=np.int64), np.array(steps, dtype=np.int64),
                            _fix_inf(np.array(vals))))
    # Order all points by logging time, then key, then line: the order they were logged in.
    if not per_key:
        return []
    ts = np.concatenate([k[1] for k in per_key])
    key_idx = np.concatenate([np.full(len(k[1]), i) for i, k in enumerate(per_key)])
    line = np.concatenate([np.arange(len(k[1])) for k in per_key])
    rank = np.empty(len(ts), dtype=np.int64)
    rank[np.lexsort((line, key_idx, ts))] = np.arange(len(ts))
    out, at = [], 0
    for key, t, steps, vals in per_key:
        out.append(Series(key, rank[at:at + len(t)], steps, vals))
        at += len(t)
    _read_params(run_dir, source)
    return out


def _read_params(run_dir: Path, source: Source) -> None:
    params = run_dir / "params"
    if params.is_dir():
        source.extras["params"] = {p.name: p.read_text(errors="replace").strip()
                                   for p in sorted(params.iterdir()) if p.is_file()}
    source.extras["mlflow_run_id"] = run_dir.name
    tags = run_dir / "tags"
    if tags.is_dir():
        source.extras["tags"] = {p.relative_to(tags).as_posix(): p.read_text(errors="replace").strip()
                                 for p in sorted(tags.rglob("*")) if p.is_file()}
        if source.extras["tags"].get("mlflow.runName"):
            source.extras["mlflow_run_name"] = source.extras["tags"]["mlflow.runName"]
    meta = run_dir / "meta.yaml"
    if meta.exists():
        text = meta.read_text(errors="replace")
        if "end_time: null" in text and "status: 1" in text:
            source.warn("the MLflow run never ended cleanly (status RUNNING, no end time)")


def is_mlflow_db(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                return False
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
            if not {"metrics", "runs"} <= tables:
                return False
            cols = {r[1] for r in con.execute("pragma table_info(metrics)")}
        return {"key", "value", "step", "run_uuid"} <= cols
    except (OSError, sqlite3.Error):
        return False


def mlflow_db_runs(path: Path) -> list[str]:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            return [r[0] for r in con.execute("select distinct run_uuid from metrics order by run_uuid")]
    except sqlite3.Error as err:
        raise RunReadError(path, f"cannot read the MLflow database: {err}") from None


def read_mlflow_db(path: Path, run_id: str, source: Source) -> list[Series]:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            cols = {r[1] for r in con.execute("pragma table_info(metrics)")}
            nan_col = "is_nan" if "is_nan" in cols else "0"
            rows = con.execute(
                f"select key, timestamp, step, value, {nan_col} from metrics where run_uuid = ? "
                "order by timestamp, rowid", (run_id,)).fetchall()
            tables = {r[0] for r in con.execute("select name from sqlite_master")}
            params = con.execute("select key, value from params where run_uuid = ?",
                                 (run_id,)).fetchall() if "params" in tables else []
            tags = con.execute("select key, value from tags where run_uuid = ?",
                               (run_id,)).fetchall() if "tags" in tables else []
    except sqlite3.Error as err:
        raise RunReadError(path, f"cannot read the MLflow database: {err}") from None
    if params:
        source.extras["params"] = dict(params)
    if tags:
        source.extras["tags"] = dict(tags)
        if source.extras["tags"].get("mlflow.runName"):
            source.extras["mlflow_run_name"] = source.extras["tags"]["mlflow.runName"]
    by_key: dict[str, tuple[list, list, list]] = {}
    for order, (key, _ts, step, value, is_nan) in enumerate(rows):
        o, s, v = by_key.setdefault(key, ([], [], []))
        o.append(order)
        s.append(int(step or 0))
        v.append(float("nan") if is_nan else float(value))
    return [Series(k, np.array(o, dtype=np.int64), np.array(s, dtype=np.int64), _fix_inf(np.array(v)))
            for k, (o, s, v) in by_key.items()]
