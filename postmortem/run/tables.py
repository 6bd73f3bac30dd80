"""Tables: canonical CSV / JSONL / Parquet and Lightning's CSVLogger `metrics.csv`.

Missing and NaN stay apart: an empty CSV cell, an absent JSON key or a Parquet
null is "not logged"; `nan`, `NaN` or a NaN double is a logged NaN.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv as pacsv
from pyarrow import json as pajson

from postmortem.errors import RunReadError
from postmortem.run.aliases import canonical_name
from postmortem.run.assemble import (
    LAUNCH_COLUMNS,
    STRICT,
    Series,
    build_runlog,
    build_runlog_wide,
    series_from_wide,
    to_number,
)
from postmortem.run.model import RunLog, RunManifest, Source
from postmortem.run.nonfinite import nonfinite

STEP_NAMES = ("step", "_step", "global_step", "iteration", "iter", "trainer/global_step",
              "train/global_step", "current_steps", "global_step/max_steps")
# Steps under a name of one trainer's own, said by `info`: LLaMA-Factory's trainer_log.jsonl
# (hiyouga/LLaMA-Factory v0.5 src/llmtuner/extras/callbacks.py, v0.6+ src/llamafactory/train/
# callbacks.py LogCallback.on_log: `current_steps=self.cur_steps`, the Trainer's global step) and
# ms-swift's logging.jsonl (modelscope/ms-swift swift/trainers/callback.py add_train_message:
# `logs['global_step/max_steps'] = f'{state.global_step}/{state.max_steps}'`, 2.x and 3.x)
_OWN_STEP = {"current_steps": "current_steps (LLaMA-Factory's trainer_log.jsonl: the global step)",
             "global_step/max_steps": "global_step/max_steps (ms-swift: its numerator, the global step)"}
_OF_TOTAL = re.compile(r"\s*(\d+)\s*/\s*\d+\s*")


def step_number(cell: str) -> float | None:
    """A step cell as a number; `601/2161` (a step of its total) as its numerator."""
    m = _OF_TOTAL.fullmatch(cell)
    return float(m.group(1)) if m else to_number(cell)
# Arrow's JSON reader refuses bare NaN/Infinity: unlikely doubles stand in for them while it parses.
SENTINELS = {b"NaN": -1.2345678901234567e+308, b"Infinity": 1.2345678901234567e+308,
              b"-Infinity": -1.2345678901234565e+308}
SENTINEL_VALUES = {v: {b"NaN": np.nan, b"Infinity": np.inf, b"-Infinity": -np.inf}[k]
                    for k, v in SENTINELS.items()}
JSON_BARE = re.compile(rb"(?<=[:\[,])(\s*)(-?Infinity|NaN)(?=\s*[,}\]])")


# Tables indexed by epoch (Keras CSVLogger, Ultralytics results.csv, timm summary.csv, MAE/DeiT
# log.txt) have no step column: the epoch is their step.
EPOCH_NAMES = ("epoch", "epochs", "train/epoch")
ROW = "\0row"      # no step column at all: the row number is the step


def _step_column(names: list[str], path: Path, source: Source | None = None,
                 wanted: str | None = None) -> str:
    """The step column: the one asked for, else a step name, else the epoch, else the row."""
    lowered = {n.strip().lower(): n for n in names}
    if wanted:
        if wanted in names:
            return wanted
        if wanted.strip().lower() in lowered:
            return lowered[wanted.strip().lower()]
        raise RunReadError(path, f"no column {wanted!r} for --step; columns: "
                                 f"{', '.join(n.strip() for n in names[:8])}")
    for cand in STEP_NAMES:
        if cand in lowered:
            if source is not None and cand in _OWN_STEP:
                source.extras["step_from"] = _OWN_STEP[cand]
            return lowered[cand]
    for cand in EPOCH_NAMES:
        if cand in lowered:
            if source is not None:
                source.extras["step_from"] = f"{lowered[cand].strip()} (no step column: epoch-indexed)"
            return lowered[cand]
    if source is not None:
        source.warn(f"no step column (looked for {', '.join(STEP_NAMES[:4])}, ..., epoch): "
                    f"read by row, the first row as step 0 (--step COLUMN names one)")
        source.extras["step_from"] = "the row number (no step column)"
    return ROW


def _first_bad(path: Path, column: str, values: pa.ChunkedArray, offset_lines: int) -> str:
    strings = values.to_pylist()
    for i, v in enumerate(strings):
        if v is not None and step_number(v) is None:
            return f"line {i + offset_lines}: {column} is {v!r}, not a number"
    return f"{column} is not numeric"


def _unique_names(table, source: Source):
    """Column names stripped (Ultralytics pads them) and made unique: a second `loss` is `loss_2`."""
    names, seen = [], dict[str, int]()
    for raw in table.column_names:
        name = raw.strip() or "unnamed"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            source.warn(f"column {name!r} appears {seen[name]} times; the later one read as "
                        f"{name}_{seen[name]}")
            name = f"{name}_{seen[name]}"
        names.append(name)
    return table if names == table.column_names else table.rename_columns(names)


def _step_values(step, step_name: str, path: Path, header_lines: int) -> np.ndarray:
    """The step column as numbers (float where the file had a NaN or a fraction)."""
    if pa.types.is_string(step.type) or pa.types.is_large_string(step.type):
        cells = step.to_pylist()
        parsed = [None if v is None else step_number(v) for v in cells]
        if any(p is None and v is not None for p, v in zip(parsed, cells)):
            raise RunReadError(path, _first_bad(path, step_name, step, header_lines))
        return np.array([np.nan if p is None else p for p in parsed], dtype=np.float64)
    if pa.types.is_boolean(step.type) or pa.types.is_null(step.type):
        raise RunReadError(path, f"{step_name.strip()} holds {step.type} values, not step numbers")
    if not pa.types.is_integer(step.type) and not pa.types.is_floating(step.type):
        try:
            return _step_values(step.cast(pa.string()), step_name, path, header_lines)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            raise RunReadError(path, f"{step_name.strip()} holds {step.type} values, not step numbers") from None
    values = step.to_numpy(zero_copy_only=False)
    if step.null_count:
        values = values.astype(np.float64)
    return values


def _convert(batch, step_name: str, path: Path, source: Source, header_lines: int,
             sentinel: bool, skipped: set[str], row0: int = 0) -> tuple[np.ndarray, dict, dict]:
    """One batch (or a whole table) -> steps, float columns and logged-NaN masks."""
    batch, steps = _batch_steps(batch, step_name, path, source, header_lines, row0)
    columns, nan_masks = {}, {}
    for name in batch.column_names:
        if name != step_name and name.lower() in LAUNCH_COLUMNS:
            _launch_changes(name, batch.column(name), row0, source)
        if name == step_name or name in skipped:
            continue
        col = _as_numbers(batch.column(name), name, path, source, header_lines)
        if col is None:
            skipped.add(name)
        elif isinstance(col, np.ndarray):           # the batch hash, kept as text
            columns[name] = col
        else:
            columns[name], nan = _float_values(col, sentinel)
            if nan is not None:
                nan_masks[name] = nan
    return steps, columns, nan_masks


def _batch_steps(batch, step_name: str, path: Path, source: Source, header_lines: int,
                 row0: int) -> tuple[pa.Table | pa.RecordBatch, np.ndarray]:
    """The batch's steps (the row numbers where there is no step column), rows without a
    finite step dropped (said); a step beyond 64 bits is refused."""
    if step_name == ROW:
        return batch, np.arange(row0, row0 + batch.num_rows, dtype=np.int64)
    steps = _step_values(batch.column(step_name), step_name, path, header_lines)
    if steps.dtype.kind == "f":
        bad = ~np.isfinite(steps)
        if bad.any():
            source.warn(f"{int(bad.sum())} row(s) with no or a non-finite {step_name.strip()} "
                        f"(first at line {int(np.flatnonzero(bad)[0]) + header_lines}); dropped")
            batch = batch.filter(pa.array(~bad))
            steps = steps[~bad]
        if len(steps) and np.abs(steps).max() >= 2.0 ** 63:
            big = steps[np.abs(steps) >= 2.0 ** 63][0]
            raise RunReadError(path, f"step {big:.0f} is beyond a 64-bit integer "
                                     f"(tokens as the step axis? --step COLUMN picks another)")
    return batch, steps


def _as_numbers(col, name: str, path: Path, source: Source, header_lines: int):
    """A column as an arrow column of numbers, the batch hash as a text array, or None: not
    numbers, kept out of the table (said; refused where the checks need the column)."""
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        if name == "batch_hash" or canonical_name(name) == "batch_hash":
            return np.array(col.to_pylist(), dtype=object)
        # Mixed cells such as "nan%" or "1,234": coerce one by one, or refuse.
        cells = col.to_pylist()
        # `601/2161` is a step of its total only in a step column: elsewhere no number
        number = step_number if name.strip().lower() in STEP_NAMES else to_number
        parsed = [None if v is None else number(v) for v in cells]
        if any(p is None and v is not None for p, v in zip(parsed, cells)):
            if canonical_name(name) in STRICT:
                raise RunReadError(path, _first_bad(path, name, col, header_lines))
            source.warn(f"{name}: not numeric; kept out of the table")
            return None
        return pa.array(parsed, type=pa.float64())
    if pa.types.is_boolean(col.type) or pa.types.is_integer(col.type) or pa.types.is_null(col.type):
        return col.cast(pa.float64(), safe=False)     # an integer above 2^53 rounds, never fails
    if not pa.types.is_floating(col.type):
        source.warn(f"{name}: {col.type} values; kept out of the table")
        return None
    return col


def _float_values(col, sentinel: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """A column of numbers as float64, and where it held a logged NaN (None: nowhere)."""
    values = col.to_numpy(zero_copy_only=False)
    if values.dtype != np.float64:
        values = values.astype(np.float64)
    nan = None
    if col.null_count:
        # to_numpy gives NaN for nulls; flag the cells that were NaN in the file.
        nan = pc.fill_null(pc.is_nan(col), False).to_numpy(zero_copy_only=False)
    elif np.isnan(values).any():
        nan = np.isnan(values)
    if sentinel:
        for stand_in, real in SENTINEL_VALUES.items():
            hit = values == stand_in
            if hit.any():
                values = values.copy()
                values[hit] = real
                if np.isnan(real):
                    nan = (nan if nan is not None else np.zeros(len(values), bool)) | hit
    return values, nan


def _launch_changes(name: str, col, row0: int, source: Source) -> None:
    """Rows where a run / phase column (text or number) changes value: each starts a segment
    (a relaunch that keeps counting), whether the column stays in the table or not."""
    values = col.to_pylist()
    last = source.extras.setdefault("launch_values", {})
    prev = last.get(name)
    for i, v in enumerate(values):
        if v is None:
            continue
        if prev is not None and v != prev:
            source.resumes.append(row0 + i)
            reasons = source.extras.setdefault("segment_reasons", [])
            if f"{name} changing" not in reasons:
                reasons.append(f"{name} changing")
            source.warn(f"{name} changes value (a launch or phase of its own): read as a new "
                        f"segment at each change")
        prev = v
    last[name] = prev


class _Columns:
    """Columns filled batch by batch into arrays sized from an estimate of the row count,
    so the table is never held twice (as chunks and as their concatenation)."""

    def __init__(self, capacity: int):
        self.capacity, self.rows = max(capacity, 1), 0
        self.data: dict[str, np.ndarray] = {}

    def _column(self, name: str, dtype, fill) -> np.ndarray:
        col = self.data.get(name)
        if col is None:
            col = self.data[name] = np.full(self.capacity, fill, dtype=dtype)
        return col

    def add(self, n: int, values: dict[str, np.ndarray], fills: dict[str, object]) -> None:
        if self.rows + n > self.capacity:
            grow = max(self.rows + n, int(self.capacity * 1.25))
            for name, col in self.data.items():
                bigger = np.full(grow, fills.get(name, np.nan), dtype=col.dtype)
                bigger[:self.rows] = col[:self.rows]
                self.data[name] = bigger
            self.capacity = grow
        for name, v in values.items():
            self._column(name, v.dtype, fills.get(name, np.nan))[self.rows:self.rows + n] = v
        self.rows += n

    def finish(self) -> dict[str, np.ndarray]:
        return {name: col[:self.rows] for name, col in self.data.items()}


def _batches_to_runlog(batches, path: Path, source: Source, manifest: RunManifest | None,
                       header_lines: int, sentinel: bool = False, chunk_bytes: int = 0,
                       step_column: str | None = None) -> RunLog:
    """Batches (pieces of the file, or one whole table) into a RunLog, a batch at a time."""
    if isinstance(batches, list) and len(batches) == 1:
        # One whole table: its columns are the result, no store to copy them into.
        table = _unique_names(batches.pop(), source)
        st, columns, nan_masks = _convert(table, _step_column(table.column_names, path, source, step_column),
                                          path, source, header_lines, sentinel, set())
        del table
        return build_runlog_wide(st, columns, source, manifest, nan_masks)
    store = None
    skipped: set[str] = set()
    step_name: str | None = None
    for batch in batches:
        batch = _unique_names(batch, source)
        if step_name is None:
            step_name = _step_column(batch.column_names, path, source, step_column)
        rows = store.rows if store else 0
        st, columns, nan_masks = _convert(batch, step_name, path, source, header_lines + rows,
                                          sentinel, skipped, row0=rows)
        n = len(st)
        if store is None:
            size = path.stat().st_size
            pieces = size / chunk_bytes if chunk_bytes and size > chunk_bytes else 1
            store = _Columns(int(n * pieces * 1.05) + 1)
        values = {"\0step": st.astype(np.int64, copy=False)}
        fills: dict[str, object] = {"\0step": 0}
        for name, v in columns.items():
            values[name] = v
            fills[name] = None if v.dtype == object else np.nan
        for name, mask in nan_masks.items():
            values["\0nan:" + name] = mask
            fills["\0nan:" + name] = False
        for name in store.data:            # columns absent from this batch stay missing
            if name not in values:
                kind = store.data[name].dtype
                values[name] = np.full(n, fills.setdefault(name, False if kind == bool else
                                                            None if kind == object else np.nan),
                                       dtype=kind)
        store.add(n, values, fills)
    if store is None:
        raise RunReadError(path, "no rows")
    data = store.finish()
    steps = data.pop("\0step")
    nan_out = {k[5:]: data.pop(k) for k in [k for k in data if k.startswith("\0nan:")]}
    out = {k: v for k, v in data.items() if k not in skipped}
    return build_runlog_wide(steps, out, source, manifest, nan_out)


_CSV_CONVERT = dict(null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=True)
_CHUNK = 16 << 20
# The system allocator hands each piece's memory back at once; arrow's default pool
# keeps it, which would double the peak for nothing.
_POOL = pa.system_memory_pool()


def _line_chunks(path: Path, limit: int | None = None):
    """Pieces of whole lines, read into one reused buffer (no copies): memory stays near
    the size of the result while arrow still parses each piece on every core.

    Yields (buffer, is_first); a buffer is only valid until the next one is asked for.
    `limit` stops after that many bytes (a cut-off last line left out).
    """
    with open(path, "rb") as f:
        # no bigger than the file: a 16 MB buffer zeroed for a 40 KB log costs ~5 ms
        buf = bytearray(max(1, min(_CHUNK, os.fstat(f.fileno()).st_size + 1)))
        view = memoryview(buf)
        filled, first, left = 0, True, limit
        while True:
            if filled == len(buf):          # one line longer than the buffer (or the file grew)
                # a new, bigger buffer: the old one cannot be resized while arrow or a
                # memoryview still points into it
                bigger = bytearray(2 * len(buf))
                bigger[:filled] = buf[:filled]
                buf, view = bigger, memoryview(bigger)
            room = view[filled:] if left is None else view[filled:filled + min(left, len(buf) - filled)]
            got = f.readinto(room) if len(room) else 0
            if left is not None:
                left -= got
            filled += got
            if not got:
                if view[:filled].tobytes().strip():
                    yield pa.py_buffer(view[:filled]), first
                return
            cut = buf.rfind(b"\n", 0, filled) + 1
            if cut == 0:
                continue
            yield pa.py_buffer(view[:cut]), first
            first = False
            tail = filled - cut
            buf[:tail] = buf[cut:filled]
            filled = tail


def _csv_shape(path: Path, source: Source) -> tuple[str, int | None]:
    """The header's encoding, and where to stop when the last line was cut off mid-row."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - (1 << 16)))
        tail = f.read()
    header = head.split(b"\n", 1)[0]
    encoding = "utf8"
    try:
        header.decode("utf-8")
    except UnicodeDecodeError:
        encoding = "latin-1"
        source.warn(f"{path.name}: the header is not UTF-8; read as Latin-1")
    limit = None
    if tail and not tail.endswith(b"\n") and b"\n" in head:
        last = tail.rsplit(b"\n", 1)[-1]
        if last.count(b",") < header.count(b","):   # fewer cells than the header: a torn row
            limit = size - len(last)
            source.warn(f"{path.name}: the last line is cut off ({last[:40].decode('utf-8', 'replace')!r}, "
                        f"{last.count(b',') + 1} of {header.count(b',') + 1} cells; file still being "
                        f"written?); dropped it")
    return encoding, limit


def read_csv(path: Path, source: Source, manifest: RunManifest | None = None,
             step_column: str | None = None) -> RunLog:
    options = pacsv.ConvertOptions(**_CSV_CONVERT)
    encoding, limit = _csv_shape(path, source)

    def tables():
        names = None
        for chunk, first in _line_chunks(path, limit=limit):
            read = (pacsv.ReadOptions(encoding=encoding) if first
                    else pacsv.ReadOptions(column_names=names, encoding=encoding))
            try:
                table = pacsv.read_csv(pa.BufferReader(chunk), read_options=read, convert_options=options,
                                     memory_pool=_POOL)
            except (pa.ArrowInvalid, pa.ArrowException) as err:
                raise RunReadError(path, f"not a readable CSV: {str(err).splitlines()[0]}") from None
            names = table.column_names
            yield table
    try:
        return _batches_to_runlog(tables(), path, source, manifest, header_lines=2,
                                  chunk_bytes=_CHUNK, step_column=step_column)
    except RunReadError:
        pass    # a quoted newline can split a piece: parse the file whole to be sure
    with open(path, "rb") as f:
        data = f.read(limit if limit is not None else -1)
    try:
        table = pacsv.read_csv(pa.BufferReader(data), convert_options=options,
                             read_options=pacsv.ReadOptions(encoding=encoding))
    except (pa.ArrowInvalid, pa.ArrowException) as err:
        raise RunReadError(path, f"not a readable CSV: {str(err).splitlines()[0]}") from None
    try:
        return _batches_to_runlog([table], path, source, manifest, header_lines=2,
                                  step_column=step_column)
    except RunReadError:
        data, starts = _without_headers_again(data)
        if not starts:
            raise
    # two logs joined (`cat a.csv b.csv`, a relaunch appending its own header): each header
    # again starts a segment, the rows between are read as they are
    source.resumes.extend(starts)
    source.warn(f"the header line is written again {len(starts)} time(s) (logs joined, or a "
                f"relaunch appending to the file): a new segment at each")
    table = pacsv.read_csv(pa.BufferReader(data), convert_options=options,
                           read_options=pacsv.ReadOptions(encoding=encoding))
    return _batches_to_runlog([table], path, source, manifest, header_lines=2,
                              step_column=step_column)


def _without_headers_again(data: bytes) -> tuple[bytes, list[int]]:
    """The CSV without the lines that repeat its header, and the data row each one stood
    before (the first row of a segment)."""
    lines = data.splitlines(keepends=True)
    head = lines[0].rstrip(b"\r\n") if lines else b""
    kept, starts = lines[:1], []
    for line in lines[1:]:
        if head and line.rstrip(b"\r\n") == head:
            starts.append(len(kept) - 1)
        else:
            kept.append(line)
    return b"".join(kept), starts


def read_parquet(path: Path, source: Source, manifest: RunManifest | None = None,
                 step_column: str | None = None) -> RunLog:
    import pyarrow.parquet as pq  # noqa: PLC0415 here, not at start-up: only Parquet runs need it (40 ms)
    try:
        table = pq.read_table(path, memory_map=True)
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as err:
        raise RunReadError(path, f"not a readable Parquet file: {str(err).splitlines()[0]}") from None
    return _batches_to_runlog([table], path, source, manifest, header_lines=0,
                              step_column=step_column)


def read_jsonl(path: Path, source: Source, manifest: RunManifest | None = None,
               step_column: str | None = None) -> RunLog:
    """One JSON object per line; bare NaN/Infinity accepted; a torn last line is dropped,
    a whole one without its newline kept. A file that is one JSON list of such objects is
    read whole (`_json_list`)."""
    if _starts_list(path):
        return _batches_to_runlog([_json_list(path)], path, source, manifest, header_lines=0,
                                  step_column=step_column)
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 1))
        whole_lines = f.read(1) in (b"\n", b"")
    if whole_lines:
        try:   # in pieces; arrow refuses bare NaN tokens, which the route below handles
            tables = (pajson.read_json(pa.BufferReader(c), memory_pool=_POOL)
                      for c, _ in _line_chunks(path))
            return _batches_to_runlog(tables, path, source, manifest, header_lines=1,
                                      chunk_bytes=_CHUNK, step_column=step_column)
        except (pa.ArrowInvalid, pa.ArrowException, UnicodeDecodeError):
            pass
    raw = path.read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:      # arrow takes a stray byte into a key's name
        line = raw.count(b"\n", 0, err.start) + 1
        source.warn(f"{path.name} is not UTF-8 (line {line}): bytes that are not are shown as \ufffd")
        raw = raw.decode("utf-8", "replace").encode("utf-8")
    if raw and not raw.endswith(b"\n"):
        cut = raw.rfind(b"\n") + 1
        if _whole_object(raw[cut:]):        # a crash's last record, complete but for its newline
            raw += b"\n"
        else:
            if not raw[:cut].strip():
                raise RunReadError(path, "its only line is incomplete (file still being written, "
                                         "or cut short?): no complete JSON line to read")
            source.warn(f"{path.name}: last line is incomplete (file still being written?); dropped it")
            raw = raw[:cut]
    sentinel = b"NaN" in raw or b"Infinity" in raw
    if sentinel:
        raw = JSON_BARE.sub(lambda m: m.group(1) + repr(SENTINELS[m.group(2)]).encode(), raw)
    try:
        table = pajson.read_json(pa.BufferReader(raw))
    except (pa.ArrowInvalid, pa.ArrowException) as err:
        table, sentinel = _quoted_nonfinite(raw, sentinel), True
        if table is None:
            raise RunReadError(path, f"not valid JSON lines: {str(err).splitlines()[0]}") from None
    return _batches_to_runlog([table], path, source, manifest, header_lines=1, sentinel=sentinel,
                              step_column=step_column)


def _starts_list(path: Path) -> bool:
    with open(path, "rb") as f:
        return re.match(rb"\[\s*\{", f.read(256).lstrip(b"\xef\xbb\xbf \t\r\n")) is not None


def _json_list(path: Path):
    """A JSON list of records as a table: Chainer's and pytorch-pfn-extras' LogReport `log`
    (`json.dump(self._log, f, indent=4)`, chainer/training/extensions/log_report.py v7.8.1;
    ppe `LogWriterSaveFunc` format 'json'), written whole at each report. Python's json writes
    a NaN as `NaN` and reads it back; a key a record lacks is not logged there."""
    try:
        records = json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as err:
        raise RunReadError(path, f"not UTF-8 (byte {err.start})") from None
    except (ValueError, RecursionError) as err:
        raise RunReadError(path, f"not a complete JSON list (file still being written?): {err}") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise RunReadError(path, "a JSON list, but not of records (objects)")
    if not records:
        raise RunReadError(path, "an empty JSON list: no record to read")
    try:
        # every record's keys (`from_pylist` would take only the first's: the validation
        # columns appear at the first evaluation)
        names = dict.fromkeys(k for r in records for k in r)
        return pa.table({k: pa.array([r.get(k) for r in records]) for k in names})
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as err:     # OverflowError: an int over 2^64
        raise RunReadError(path, f"records that do not make a table: {str(err).splitlines()[0]}") from None


# A non-finite number written as a string, as JSON without NaN makes writers do: `"NaN"`
# (Jackson, Newtonsoft, a Python logger's str()), `"+Inf"` (Go), `"nan"`, `"-nan(ind)"`.
JSON_QUOTED = re.compile(rb'(?<=:)(\s*)"([-+]?(?:\d\.#(?:QNAN|SNAN|IND|INF)\d*|(?i:nan(?:\(\w*\))?|inf(?:inity)?)))"'
                         rb'(?=\s*[,}\]])')
_SENTINEL_OF = {"nan": SENTINELS[b"NaN"], "+inf": SENTINELS[b"Infinity"], "-inf": SENTINELS[b"-Infinity"]}


def _quoted_nonfinite(raw: bytes, sentinel: bool):
    """The lines parsed with each quoted NaN / Inf as a number, where a column of numbers
    holding them is what arrow refused (None: something else is wrong)."""
    if not JSON_QUOTED.search(raw):
        return None

    def stand_in(m: re.Match[bytes]) -> bytes:
        value = nonfinite(m.group(2).decode())
        key = "nan" if value is None or value != value else "+inf" if value > 0 else "-inf"
        return m.group(1) + repr(_SENTINEL_OF[key]).encode()
    try:
        return pajson.read_json(pa.BufferReader(JSON_QUOTED.sub(stand_in, raw)))
    except (pa.ArrowInvalid, pa.ArrowException):
        return None


def _whole_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


# --- Lightning CSVLogger --------------------------------------------------------

def is_lightning_dir(path: Path) -> bool:
    return re.fullmatch(r"version_\d+", path.name) is not None and (path / "metrics.csv").exists()


def read_lightning(version_dirs: list[Path], source: Source, manifest: RunManifest | None,
                   step_column: str | None = None) -> RunLog:
    """version_N directories of one run, joined in order; each later one is a resume segment."""
    version_dirs = sorted(version_dirs, key=lambda d: int(d.name.split("_")[1]))
    series_all: list[Series] = []
    resumes: list[int] = []
    base = 0
    prev_first = None
    good = []
    for vdir in version_dirs:
        sub = Source(source.format, str(vdir))
        try:
            log = read_csv(vdir / "metrics.csv", sub, step_column=step_column)
        except RunReadError as err:
            if len(version_dirs) == 1:
                raise
            # one empty or broken version among good ones: say so, read the others
            source.warn(f"{vdir.name}/metrics.csv: {err.problem}; left out")
            continue
        except OSError as err:
            if len(version_dirs) == 1:
                raise
            source.warn(f"{vdir.name}/metrics.csv: {err.strerror or err}; left out")
            continue
        good.append(vdir)
        source.warnings += [f"{vdir.name}: {w}" for w in sub.warnings]
        first = int(log.frame["step"].iloc[0])
        if prev_first is not None and first <= prev_first:
            raise RunReadError(source.path, f"{vdir.name} starts again at step {first}: a different "
                                            f"run, not a resume; pass one version_N directory")
        prev_first = first
        hp = vdir / "hparams.yaml"
        if hp.exists():
            import yaml  # noqa: PLC0415 here, not at start-up: only Lightning runs need it (14 ms)

            from postmortem.run import yamlconfig  # noqa: PLC0415 (PyYAML, as above)
            try:
                source.extras.setdefault("hparams", {})[vdir.name] = yamlconfig.load(hp.read_text(errors="replace"))
            except yaml.YAMLError:
                source.warn(f"{vdir.name}/hparams.yaml: not valid YAML; ignored")
        frame = log.frame
        steps = frame["step"].to_numpy()
        cols = {c: frame[c].to_numpy() for c in log.metrics}
        flagged = {c: log.nan_mask(c) for c in log.logged_nan}
        if series_all:
            resumes.append(base)
        for s in series_from_wide(steps, cols, flagged):
            s.order = s.order + base
            series_all.append(s)
        base += len(steps)
    if not good:
        raise RunReadError(source.path, "no version_N/metrics.csv could be read")
    if len(good) > 1:
        source.warn(f"joined {len(good)} version directories in order: "
                    f"{', '.join(d.name for d in good)} (each later one a resume)")
    return build_runlog(series_all, source, manifest, resumes=resumes)
