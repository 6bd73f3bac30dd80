"""MLflow local stores: the `mlruns/` file store and the `mlflow.db` SQLite store."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from postmortem.errors import RunReadError
from postmortem.run.assemble import Series
from postmortem.run.model import Source
from postmortem.run.store import StoredRun

_DBL_MAX = 1.7976931348623157e308   # MLflow stores +-inf as +-DBL_MAX
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# (key, timestamp, step, value, is_nan) as a store gives it: any SQLite value, checked when read
MetricRow = tuple[Any, Any, Any, Any, Any]


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
    per_key: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []     # key, times, steps, values
    dropped: list[str] = []
    for f in sorted(p for p in metrics.rglob("*") if p.is_file()):
        key = f.relative_to(metrics).as_posix()
        ts: list[int] = []
        vals: list[float] = []
        steps: list[int] = []
        for lineno, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            try:
                if len(parts) < 2:
                    raise ValueError
                t, v, step = int(parts[0]), float(parts[1]), int(parts[2]) if len(parts) > 2 else 0
            except ValueError:
                raise RunReadError(f, f"line {lineno}: {line.strip()[:60]!r} is not "
                                      f"'timestamp value step'") from None
            if not (_INT64_MIN <= step <= _INT64_MAX and _INT64_MIN <= t <= _INT64_MAX):
                dropped.append(f"{key} line {lineno}")
                continue
            ts.append(t)
            vals.append(v)
            steps.append(step)
        if steps:
            per_key.append((key, np.array(ts, dtype=np.int64), np.array(steps, dtype=np.int64),
                            _fix_inf(np.array(vals))))
    if dropped:
        source.warn(f"{len(dropped)} point(s) with a step or time beyond 64 bits left out "
                    f"(first: {dropped[0]})")
    # Order all points by logging time, then key, then line: the order they were logged in.
    if not per_key:
        return []
    times = np.concatenate([k[1] for k in per_key])
    key_idx = np.concatenate([np.full(len(k[1]), i) for i, k in enumerate(per_key)])
    line_in_key = np.concatenate([np.arange(len(k[1])) for k in per_key])
    rank = np.empty(len(times), dtype=np.int64)
    rank[np.lexsort((line_in_key, key_idx, times))] = np.arange(len(times))
    out, at = [], 0
    for key, key_times, key_steps, key_values in per_key:
        out.append(Series(key, rank[at:at + len(key_times)], key_steps, key_values))
        at += len(key_times)
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


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def mlflow_db_runs(path: Path) -> list[str]:
    """The runs of the database that logged metrics (a NULL run id is no run)."""
    try:
        with _connect(path) as con:
            ids = [r[0] for r in con.execute("select distinct run_uuid from metrics where run_uuid "
                                             "is not null order by run_uuid")]
            cols = {r[1] for r in con.execute("pragma table_info(runs)")}
            if {"run_uuid", "lifecycle_stage"} <= cols:      # deleted in the UI: not listed there
                deleted = {r[0] for r in con.execute(
                    "select run_uuid from runs where lifecycle_stage = 'deleted'")}
                ids = [i for i in ids if i not in deleted]
            return ids
    except sqlite3.Error as err:
        raise RunReadError(path, f"cannot read the MLflow database: {err}") from None


def db_run_listing(path: Path) -> dict[str, StoredRun]:
    """{run id: StoredRun} from the runs, experiments and metrics tables (what MLflow's UI lists)."""
    out: dict[str, StoredRun] = {}
    try:
        with _connect(path) as con:
            tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
            for run_id, steps, points, last in con.execute(
                    "select run_uuid, count(distinct step), count(*), max(timestamp) from metrics "
                    "where run_uuid is not null group by run_uuid"):
                out[str(run_id)] = StoredRun(str(run_id), steps=steps, stamp=f"{points}-{last}")
            cols = {r[1] for r in con.execute("pragma table_info(runs)")}
            if {"run_uuid", "name", "start_time", "status", "experiment_id"} <= cols:
                exps = dict(con.execute("select experiment_id, name from experiments")) \
                    if "experiments" in tables else {}
                for run_id, name, start, status, exp in con.execute(
                        "select run_uuid, name, start_time, status, experiment_id from runs"):
                    run = out.get(str(run_id))
                    if run is None:
                        continue
                    run.name = "/".join(str(x) for x in (exps.get(exp), name) if x)
                    run.aliases = {str(name)} if name else set()
                    run.start = start / 1000 if isinstance(start, (int, float)) else None
                    run.status = str(status or "").lower()
    except sqlite3.Error:
        pass            # the listing is a courtesy: the ids alone still pick a run
    return out


def file_store_listing(run_dir: Path) -> StoredRun | None:
    """A StoredRun from the run's meta.yaml (name, start, status); its steps: storerows counts them."""
    meta: dict[str, str] = {}
    try:
        for line in (run_dir / "meta.yaml").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            meta[key.strip()] = value.strip().strip("'\"")
    except OSError:
        return None
    start = meta.get("start_time", "")
    run_name = meta.get("run_name", "")
    if not run_name and (run_dir / "tags" / "mlflow.runName").is_file():
        run_name = (run_dir / "tags" / "mlflow.runName").read_text(errors="replace").strip()
    return StoredRun(run_dir.name, name=run_name, start=int(start) / 1000 if start.isdigit() else None,
                     status=_MLFLOW_STATUS.get(meta.get("status", ""), meta.get("status", "")),
                     aliases={run_name} if run_name else set())


_MLFLOW_STATUS = {"1": "running", "2": "scheduled", "3": "finished", "4": "failed", "5": "killed"}


def read_mlflow_db(path: Path, run_id: str, source: Source) -> list[Series]:
    try:
        with _connect(path) as con:
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
        source.extras["params"] = {str(k): v for k, v in params if k is not None}
    if tags:
        source.extras["tags"] = {str(k): v for k, v in tags if k is not None}
        if source.extras["tags"].get("mlflow.runName"):
            source.extras["mlflow_run_name"] = str(source.extras["tags"]["mlflow.runName"])
    if not rows:
        raise RunReadError(path, f"MLflow run {run_id} logged no metrics")
    return series_from_rows(rows, source)


def _as_step(step: object) -> int | None:
    """A step as MLflow means it (a 64-bit integer); None for what a broken store holds instead
    (NULL, text, inf, a float with a fraction, 20 digits)."""
    if isinstance(step, bool):
        return int(step)
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    elif isinstance(step, (str, bytes)):
        try:
            step = int(step)
        except ValueError:
            return None
    if isinstance(step, int) and _INT64_MIN <= step <= _INT64_MAX:
        return step
    return None


def _as_value(value: object, is_nan: object) -> float | None:
    if is_nan:
        return float("nan")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, (str, bytes)):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def series_from_rows(rows: Iterable[MetricRow], source: Source) -> list[Series]:
    """(key, timestamp, step, value, is_nan) rows in the order they were logged -> series; a row
    whose step or value is not a number is left out and counted in a warning."""
    by_key: dict[str, tuple[list[int], list[int], list[float]]] = {}
    bad_step = bad_value = 0
    for order, (key, _ts, step, value, is_nan) in enumerate(rows):
        s, v = _as_step(step if step is not None else 0), _as_value(value, is_nan)
        if s is None:
            bad_step += 1
            continue
        if v is None:
            bad_value += 1
            continue
        o, ss, vv = by_key.setdefault(str(key), ([], [], []))
        o.append(order)
        ss.append(s)
        vv.append(v)
    if bad_step:
        source.warn(f"{bad_step} point(s) whose step is not a 64-bit integer (text, inf, NULL "
                    f"or too large) left out")
    if bad_value:
        source.warn(f"{bad_value} point(s) with no numeric value (NULL or text) left out")
    if not by_key:
        raise RunReadError(source.path, "no metric point of the run has a usable step and value")
    return [Series(k, np.array(o, dtype=np.int64), np.array(s, dtype=np.int64), _fix_inf(np.array(v)))
            for k, (o, s, v) in by_key.items()]
