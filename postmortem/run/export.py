"""Write a RunLog as a clean canonical table: CSV, Parquet or JSONL, atomically."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pandas.api.types import is_numeric_dtype

from postmortem.errors import RunReadError
from postmortem.files import atomic_write
from postmortem.run.logconfig import FACTS
from postmortem.run.model import RunLog

if TYPE_CHECKING:        # pyarrow is loaded only when a table is written
    import pyarrow as pa

SUFFIXES = (".csv", ".parquet", ".jsonl")


def info(log: RunLog) -> dict[str, Any]:
    """What was read: format, files, segments, steps, metrics with counts and NaN counts."""
    frame = log.frame
    extras = log.source.extras
    names = {k: list(v) for k, v in extras.get("names", {}).items()}
    for canon in ("loss", "val_loss"):
        if extras.get(f"{canon}_from") and canon not in names:
            names[canon] = [extras[f"{canon}_from"]]
    dialects = extras.get("series_dialects", {})
    metrics: list[dict[str, Any]] = []
    for name in log.metrics:
        col = frame[name]
        logged = log.logged_mask(name)
        entry: dict[str, Any] = {"name": name, "count": int(logged.sum()),
                 "nan": int(len(log.logged_nan.get(name, ())))}
        if name in names:
            entry["from"] = names[name]
        if name in dialects:          # the catalogue entries whose messages made the series
            entry["dialect"] = dialects[name]
        if is_numeric_dtype(col):
            values = col.to_numpy()
            finite = np.isfinite(values)
            entry["inf"] = int(np.isinf(values).sum())
            if finite.any():
                entry["min"] = float(values[finite].min())
                entry["max"] = float(values[finite].max())
        steps = frame["step"].to_numpy()[logged]
        if len(steps):
            entry["first_step"], entry["last_step"] = int(steps.min()), int(steps.max())
        metrics.append(entry)
    steps = frame["step"]
    return {
        "run": {"id": log.run_id, "path": log.source.path, "format": log.source.format,
                "files": log.source.files, "dtype": log.dtype},
        "steps": {"rows": len(frame), "first": int(steps.min()), "last": int(steps.max())},
        "segments": log.segments(),
        "metrics": metrics,
        "read": {"step": extras.get("step_from", "step"), "loss": extras.get("loss_from"),
                 "val_loss": extras.get("val_loss_from"), "events": extras.get("events_placed"),
                 "segments": extras.get("segments_from"), **_text_events(extras)},
        "facts": _facts(log),
        "warnings": log.source.warnings,
        "manifest": log.manifest.model_dump(exclude_none=True) if log.manifest else None,
    }


# the events the text readers keep beside the series, each [{step, dialect}]: under `read`
# only where the log had some (an output without them stays as it was)
TEXT_EVENTS = ("resumes", "checkpoints", "evals")


def _text_events(extras: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The resumes, checkpoint loads and evaluations the readers kept, by name, where any."""
    return {name: list(extras[name]) for name in TEXT_EVENTS if extras.get(name)}


def _facts(log: RunLog) -> dict[str, dict[str, Any]]:
    """Each configured fact the checks use, its value and where it came from."""
    origins = log.source.extras.get("facts_from", {})
    m = log.manifest
    out: dict[str, dict[str, Any]] = {}
    for fact in FACTS:
        if fact == "run_name":
            value = log.source.extras.get("run_name") or (m.run_id if m else None)
        elif fact in ("vocab_size", "dtype"):
            value = getattr(m, fact, None) if m else None
        else:
            value = getattr(m.config, fact, None) if m else None
        if value is not None:
            out[fact] = {"value": value, "from": origins.get(fact, "manifest.json")}
    if "dtype" not in out and log.dtype:
        out["dtype"] = {"value": log.dtype, "from": log.source.extras.get("dtype_from", "the log")}
    return out


def _arrow_table(log: RunLog) -> pa.Table:
    import pyarrow as pa  # noqa: PLC0415 - pyarrow only when a table is written
    cols = {}
    for name in log.frame.columns:
        col = log.frame[name]
        values = col.to_numpy()
        if name in ("segment", "step"):
            cols[name] = pa.array(values, type=pa.int64())
        elif not is_numeric_dtype(col):
            cols[name] = pa.array(col.astype(object).where(col.notna(), None), type=pa.string())
        else:
            # Missing is null; a logged NaN stays a NaN value.
            cols[name] = pa.array(values, mask=np.isnan(values) & ~log.nan_mask(name),
                                  type=pa.float64())
    return pa.table(cols)


def _jsonl(log: RunLog, path: Path) -> None:
    frame = log.frame
    names = list(frame.columns)
    arrays = [frame[n].to_numpy() for n in names]
    nan_masks = {n: log.nan_mask(n) for n in log.logged_nan}
    with open(path, "w", encoding="utf-8") as f:
        for i in range(len(frame)):
            row: dict[str, int | float | str] = {}
            for name, arr in zip(names, arrays):
                v = arr[i]
                if v is None or (isinstance(v, float) and math.isnan(v) and not (
                        name in nan_masks and nan_masks[name][i])):
                    continue
                row[name] = int(v) if name in ("segment", "step") else (
                    v if isinstance(v, str) else float(v))
            f.write(json.dumps(row) + "\n")


def export(log: RunLog, out: str | Path) -> Path:
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in SUFFIXES:
        raise RunReadError(out, f"unknown export format {suffix or '(none)'}; use "
                                f"{', '.join(SUFFIXES)}")
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # noqa: PLC0415 - pyarrow only when a table is written
        atomic_write(out, lambda p: pq.write_table(_arrow_table(log), p))
    elif suffix == ".csv":
        from pyarrow import csv  # noqa: PLC0415 - pyarrow only when a table is written
        atomic_write(out, lambda p: csv.write_csv(_arrow_table(log), p))
    else:
        atomic_write(out, lambda p: _jsonl(log, p))
    return out
