"""Hugging Face Trainer: `trainer_state.json` and console dict lines."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import json as pajson

from postmortem.errors import RunReadError
from postmortem.run.aliases import canonical_name
from postmortem.run.assemble import STRICT, Collector, Series, to_number
from postmortem.run.model import Source
from postmortem.run.tables import JSON_BARE, SENTINEL_VALUES, SENTINELS

HIDDEN_NAN_NOTE = ("HF Trainer's logging_nan_inf_filter (on by default) logs a NaN/Inf loss as the "
                   "mean of the window: NaN losses can be hidden; trust grad_norm NaNs and loss 0.0")


def is_trainer_state(path: Path) -> bool:
    if path.suffix != ".json":
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    return b'"log_history"' in head or (head.lstrip().startswith(b"{") and _has_log_history(path))


def _has_log_history(path: Path) -> bool:
    # log_history can come after large keys; only look further in smallish files.
    try:
        if path.stat().st_size > 64 << 20:
            return False
        return b'"log_history"' in path.read_bytes()
    except OSError:
        return False


def _row_kind(row: dict) -> str:
    if "train_runtime" in row or ("train_loss" in row and "total_flos" in row):
        return "summary"
    if any(k.startswith(("predict_", "test_")) for k in row):
        return "predict"
    if any(k.startswith("eval_") for k in row):
        return "eval"
    return "train"


_STREAM_FROM = 8 << 20     # bigger files are parsed row by row: json.load would hold them as objects
_KEY = '"log_history"'


def _load_whole(path: Path) -> tuple[dict, list]:
    try:
        state = json.loads(path.read_bytes())
    except json.JSONDecodeError as err:
        raise RunReadError(path, f"not valid JSON at line {err.lineno} column {err.colno} "
                                 f"({err.msg}); truncated?") from None
    except UnicodeDecodeError:
        raise RunReadError(path, "not UTF-8 text") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise RunReadError(path, "no log_history list")
    return state, history


def _stream_rows(path: Path, state: dict):
    """log_history's rows one at a time, decoded from 4 MiB of text at a time; the other
    top-level keys land in `state` at the end."""
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8", errors="strict") as f:
        buf, pos = "", -1
        while pos < 0:                                # the text before the list
            more = f.read(4 << 20)
            if not more:
                raise RunReadError(path, "no log_history list")
            buf += more
            pos = buf.find(_KEY)
        at = buf.index("[", pos + len(_KEY))
        head, buf, i = buf[:at], buf[at + 1:], 0
        while True:
            while i < len(buf) and buf[i] in " \t\r\n,":
                i += 1
            if i < len(buf) and buf[i] == "]":
                break
            try:
                row, end = decoder.raw_decode(buf, i)
            except json.JSONDecodeError:
                more = f.read(4 << 20)
                if not more:
                    raise RunReadError(path, "not valid JSON inside log_history; truncated?") from None
                buf, i = buf[i:] + more, 0
                continue
            yield row
            i = end
            if i > (1 << 20):                          # drop what is parsed
                buf, i = buf[i:], 0
        tail = buf[i + 1:] + f.read()
    try:
        state.update(json.loads(head + "[]" + tail))
    except json.JSONDecodeError as err:
        raise RunReadError(path, f"not valid JSON after log_history ({err.msg}); truncated?") from None


_ARROW_FROM = 1 << 20      # bigger files: log_history parsed column-wise by arrow


def _history_bytes(data: bytes) -> tuple[bytes, dict] | None:
    """log_history's rows, one per line, and the file's other keys; None where the file's
    shape is not the plain one (the row-by-row route then reads it)."""
    key = data.find(b'"log_history"')
    start = data.find(b"[", key) if key >= 0 else -1
    if start < 0:
        return None
    end, state = len(data), None
    for _ in range(64):        # the list's end: the last "]" after which the other keys parse
        end = data.rfind(b"]", start, end)
        if end < 0:
            return None
        i = end - 1
        while data[i] in b" \t\r\n":
            i -= 1
        if data[i] not in b"}[":
            continue
        try:
            state = json.loads(data[:start] + b"[]" + data[end + 1:])
        except (ValueError, RecursionError):
            continue
        break
    if not isinstance(state, dict):
        return None
    rows = data[start + 1:end]
    if b"\n" in rows[:1 << 16]:              # HF writes indent=2: one row per line first
        rows = rows.replace(b"\r", b" ").replace(b"\n", b" ")
    return rows.replace(b"},", b"}\n"), state


@dataclass
class _Rows:
    """log_history's rows as arrow columns, with masks over them: which cells are present,
    which rows are read (train and eval rows with a step), which are eval rows."""

    table: pa.Table
    present: dict[str, np.ndarray]
    kept: np.ndarray
    evals: np.ndarray
    step: np.ndarray
    sentinel: bool          # bare NaN/Infinity were swapped for stand-ins (tables.SENTINELS)


def _arrow_series(path: Path, source: Source) -> list[Series] | None:
    """log_history column-wise: the same series as the row-by-row route, at about the cost of
    json.load (a nested row, a float step or an odd shape: None, and that route reads it)."""
    found = _history_table(path)
    if found is None:
        return None
    table, state, sentinel = found
    rows = _sort_rows(table, sentinel, source)
    out: list[Series] = []
    late: list[str] = []          # said last, as the row-by-row route does
    for name in table.column_names:
        series = None if name == "step" else _column_series(rows, name, source, late)
        if series is not None:
            out.append(series)
    _say_masked_nan_losses(rows, source)
    _finish(state, source)
    for message in late:
        source.warn(message)
    return out


def _history_table(path: Path) -> tuple[pa.Table, dict, bool] | None:
    """log_history parsed by arrow, the file's other keys, and whether stand-ins replaced bare
    NaN/Infinity; None where arrow cannot read it as the row-by-row route would."""
    found = _history_bytes(path.read_bytes())
    if found is None:
        return None
    rows, state = found
    if b"null" in rows:       # arrow cannot tell a null from an absent key; row kinds depend on keys
        return None
    sentinel = b"NaN" in rows or b"Infinity" in rows
    if sentinel:
        rows = JSON_BARE.sub(lambda m: m.group(1) + repr(SENTINELS[m.group(2)]).encode(), rows)
    try:
        table = pajson.read_json(pa.BufferReader(rows)) if rows.strip() else None
    except (pa.ArrowInvalid, pa.ArrowException):
        return None
    del rows
    if table is None or "step" not in table.column_names or not pa.types.is_integer(table["step"].type):
        return None
    return table, state, sentinel


def _sort_rows(table: pa.Table, sentinel: bool, source: Source) -> _Rows:
    """Train, eval, predict and summary rows told apart (as _row_kind does, a column at a time);
    the summary and the rows without a step kept in the source's extras."""
    n = table.num_rows
    present = {c: table[c].is_valid().to_numpy(zero_copy_only=False) for c in table.column_names}
    none = np.zeros(n, bool)

    def any_of(prefixes: tuple[str, ...]) -> np.ndarray:
        return np.logical_or.reduce([present[c] for c in present if c.startswith(prefixes)] or [none])
    summary = present.get("train_runtime", none) | (present.get("train_loss", none) & present.get("total_flos", none))
    predict = ~summary & any_of(("predict_", "test_"))
    evals = ~summary & ~predict & any_of(("eval_",))
    stepless = ~summary & ~predict & ~present["step"]
    kept = ~summary & ~predict & ~stepless

    def as_dicts(mask: np.ndarray) -> list[dict]:
        return [{k: v for k, v in r.items() if v is not None}
                for r in table.filter(pa.array(mask)).to_pylist()]
    if summary.any():
        source.extras["summary"] = as_dicts(summary)[-1]
    if (predict | stepless).any():
        source.extras["rows_without_step"] = as_dicts(predict | stepless)
    step = np.where(kept, table["step"].to_numpy(zero_copy_only=False), 0).astype(np.int64)
    return _Rows(table, present, kept, evals, step, sentinel)


def _column_series(rows: _Rows, name: str, source: Source, late: list[str]) -> Series | None:
    """One column's points on the rows read; a column that is not numbers is left out (said in
    `late`), refused where it is one the checks need, kept as text where it is the batch hash."""
    col = rows.table[name]
    mask = rows.present[name] & rows.kept & (~rows.evals if name == "epoch" else True)
    if not mask.any():
        return None
    order = np.arange(rows.table.num_rows, dtype=np.int64)
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type):
        values = col.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        if rows.sentinel:
            for stand_in, real in SENTINEL_VALUES.items():
                values = np.where(values == stand_in, real, values)
        return Series(name, order[mask], rows.step[mask], values[mask])
    cells = col.to_pylist() if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) else None
    parsed = [] if cells is None else [to_number(v) if m else None for v, m in zip(cells, mask)]
    bad = next((i for i in np.flatnonzero(mask) if cells is None or parsed[i] is None), None)
    if bad is None:
        values = np.array([np.nan if p is None else p for p in parsed], dtype=np.float64)
        return Series(name, order[mask], rows.step[mask], values[mask])
    raw = cells[bad] if cells is not None else pc.take(col, [int(bad)]).to_pylist()[0]
    if name == "batch_hash":
        texts = cells if cells is not None else col.to_pylist()
        return Series(name, order[mask], rows.step[mask],
                      np.array([str(texts[i]) for i in np.flatnonzero(mask)], dtype=object))
    if canonical_name(name) in STRICT:
        raise RunReadError(source.path, f"step {int(rows.step[bad])}: {name} is {raw!r}, not a number")
    late.append(f"{name}: not numeric (e.g. {repr(raw)[:40]}); kept out of the table")
    return None


def _say_masked_nan_losses(rows: _Rows, source: Source) -> None:
    """A loss of 0.0 beside a NaN grad norm: HF's filter may have put the 0 there."""
    def numbers(name: str) -> np.ndarray | None:
        t = rows.table[name].type if name in rows.table.column_names else None
        if t is None or not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            return None
        return rows.table[name].cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    loss, gn = numbers("loss"), numbers("grad_norm")
    if loss is None or gn is None:
        return
    if rows.sentinel:
        gn = np.where(gn == SENTINELS[b"NaN"], np.nan, gn)
    for i in np.flatnonzero(rows.kept & rows.present["loss"] & rows.present["grad_norm"]
                            & (loss == 0.0) & np.isnan(gn)):
        source.warn(f"step {int(rows.step[i])}: loss 0.0 beside a NaN grad_norm (a NaN loss masked as 0?)")


def _finish(state: dict, source: Source) -> None:
    extras = source.extras
    if extras.get("rows_without_step"):
        source.warn(f"{len(extras['rows_without_step'])} predict/test row(s) have no step; kept "
                    f"out of the table")
    for key in ("max_steps", "logging_steps", "eval_steps", "save_steps", "global_step",
                "train_batch_size", "num_train_epochs"):
        if key in state:
            extras[key] = state[key]
    source.warn(HIDDEN_NAN_NOTE)


def read_trainer_state(path: Path, source: Source) -> list[Series]:
    """Train, eval, predict and summary rows told apart; bare NaN/Infinity accepted."""
    state: dict = {}
    if path.stat().st_size > _ARROW_FROM:
        try:
            series = _arrow_series(path, source)
        except MemoryError:
            series = None
        if series is not None:
            return series
    try:
        if path.stat().st_size > _STREAM_FROM:
            history = _stream_rows(path, state)
        else:
            state, history = _load_whole(path)
    except UnicodeDecodeError:
        raise RunReadError(path, "not UTF-8 text") from None
    out = Collector(source)
    extras = source.extras
    for row in history:
        if not isinstance(row, dict):
            raise RunReadError(path, f"log_history holds a {type(row).__name__}, not an object")
        kind = _row_kind(row)
        step = row.get("step")
        if kind == "summary":
            extras["summary"] = row
            continue
        if kind == "predict" or step is None:
            extras.setdefault("rows_without_step", []).append(row)
            continue
        if not isinstance(step, int):
            raise RunReadError(path, f"step {step!r} is not an integer")
        if not -(1 << 63) <= step < (1 << 63):
            raise RunReadError(path, f"step {step} is beyond a 64-bit integer")
        values = {k: v for k, v in row.items() if k not in ("step",)}
        if kind == "eval":
            values = {k: v for k, v in values.items() if k != "epoch"}
        out.add(step, values)
        loss, gn = to_number(row.get("loss")), to_number(row.get("grad_norm"))
        if loss == 0.0 and gn is not None and math.isnan(gn):
            source.warn(f"step {step}: loss 0.0 beside a NaN grad_norm (a NaN loss masked as 0?)")
    _finish(state, source)
    return out.series()


def pick_trainer_state(files: list[Path]) -> Path:
    """The output dir's own file, else the latest checkpoint's (it holds the whole history)."""
    top = [f for f in files if not f.parent.name.startswith("checkpoint-")]
    if top:
        return min(top, key=lambda f: len(f.parts))

    def ckpt_step(f: Path) -> int:
        tail = f.parent.name.rsplit("-", 1)[-1]
        return int(tail) if tail.isdigit() else -1
    return max(files, key=ckpt_step)
