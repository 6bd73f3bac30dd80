"""W&B run directories: the `.wandb` transaction log (LevelDB log framing, protobuf records)."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from postmortem.errors import RunReadError
from postmortem.run.assemble import Series, series_from_records
from postmortem.run.model import Source
from postmortem.run.protowire import ProtoError, fields, submessages, text

MAGIC = b":W&B"
_BLOCK = 32768
_HEADER = struct.Struct("<IHB")
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
# wandb_internal.proto: Record.history = 2, Record.summary = 3, Record.config = 5;
# HistoryRecord.item = 1, HistoryRecord.step = 2; HistoryItem.key = 1, nested_key = 2,
# value_json = 16; HistoryStep.num = 1.
_REC_HISTORY = 2
_REC_RUN, _RUN_DISPLAY_NAME = 17, 8          # Record.run; RunRecord.display_name
_TYPE_CRC = {t: zlib.crc32(bytes([t])) for t in range(5)}


def _records(data: bytes, path: Path, source: Source) -> Iterator[bytes]:
    """Whole records of the log; a torn or corrupt tail ends the scan with a warning."""
    if len(data) < 7 or data[:4] != MAGIC:
        raise RunReadError(path, "not a W&B transaction log (no :W&B header)")
    pos, pending = 7, None
    while pos < len(data):
        room = _BLOCK - pos % _BLOCK
        if room < 7:                        # block trailer: zeros to skip
            pos += room
            continue
        if pos + 7 > len(data):
            source.warn(f"{path.name}: truncated at byte {pos}; read what came before")
            return
        crc, length, kind = _HEADER.unpack_from(data, pos)
        if kind == 0 and length == 0:       # preallocated zeros: the end of what was written
            return
        payload = data[pos + 7:pos + 7 + length]
        if len(payload) < length or kind not in _TYPE_CRC:
            source.warn(f"{path.name}: truncated or corrupt record at byte {pos}; read what came before")
            return
        if zlib.crc32(payload, _TYPE_CRC[kind]) & 0xFFFFFFFF != crc:
            source.warn(f"{path.name}: record at byte {pos} fails its CRC; read what came before")
            return
        pos += 7 + length
        if kind == _FULL:
            yield payload
        elif kind == _FIRST:
            pending = payload
        elif kind == _MIDDLE and pending is not None:
            pending += payload
        elif kind == _LAST and pending is not None:
            yield pending + payload
            pending = None


def _history_item(item: bytes) -> tuple[str, Any] | None:
    """HistoryItem: (key or nested keys joined by /, its value_json read), or None without both."""
    key, nested, vjson = None, [], None
    for field in fields(item):
        match field:
            case (1, 2, bytes() as k):
                key = text(k)
            case (2, 2, bytes() as part):
                nested.append(text(part))
            case (16, 2, bytes() as v):
                vjson = v
    name = key if key else "/".join(nested)
    if not name or vjson is None:
        return None
    try:
        return name, json.loads(vjson)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return name, None


def _history_row(raw: bytes) -> tuple[dict[str, Any], int | None]:
    """HistoryRecord: ({name: value}, its step number or None)."""
    row: dict[str, Any] = {}
    step = None
    for field in fields(raw):
        match field:
            case (1, 2, bytes() as item):
                named = _history_item(item)
                if named is not None:
                    row[named[0]] = named[1]
            case (2, 2, bytes() as history_step):
                for step_field in fields(history_step):
                    match step_field:
                        case (1, 0, int() as num):
                            step = num
    return row, step


def run_name(path: Path, head: int = 1 << 18) -> str | None:
    """The run's display name, from its run record near the start of the log (for a listing)."""
    try:
        with open(path, "rb") as f:
            data = f.read(head)
        for rec in _records(data, path, Source("wandb", str(path))):
            for run in submessages(rec, _REC_RUN):
                names = list(submessages(run, _RUN_DISPLAY_NAME))
                return text(names[0]) if names else None
    except (OSError, ProtoError, RunReadError):
        return None
    return None


def history_steps(path: Path, limit: int = 64 << 20) -> int | None:
    """The distinct steps of the run's history records (for a listing): each record's step
    number alone, no value decoded; None for a log too large to be worth the read here."""
    try:
        if path.stat().st_size > limit:
            return None
        steps: set[int] = set()
        for rec in _records(path.read_bytes(), path, Source("wandb", str(path))):
            for history in submessages(rec, _REC_HISTORY):
                for history_step in submessages(history, 2):        # HistoryRecord.step
                    num = 0                                         # proto3 leaves a 0 out
                    for field in fields(history_step):
                        match field:
                            case (1, 0, int() as n):
                                num = n
                    steps.add(num)
        return len(steps)
    except (OSError, ProtoError, RunReadError):
        return None


def _step(value: object) -> int | None:
    """A history row's step: a whole number that fits in 64 bits, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    value = int(value)
    return value if -(1 << 63) <= value < (1 << 63) else None


def read_wandb(path: Path, source: Source) -> list[Series]:
    """History rows of the run; the step is `train/global_step` when every train row has it."""
    rows = []
    try:
        for rec in _records(path.read_bytes(), path, source):
            for history in submessages(rec, _REC_HISTORY):
                rows.append(_history_row(history))
    except ProtoError as err:
        raise RunReadError(path, f"corrupt record ({err})") from None
    if not rows:
        raise RunReadError(path, "no history rows in the W&B log")
    custom = "train/global_step"
    use_custom = all(custom in r for r, _ in rows if any(not k.startswith("_") for k in r))
    records, bad = [], 0
    for row, step in rows:
        s = _step(row.get(custom)) if use_custom else None
        if s is None:
            s = _step(row.get("_step", step))
        if s is None:
            s = _step(step)
        if s is None:
            bad += 1
            continue
        values = {k: v for k, v in row.items() if k not in ("_step", custom) and not isinstance(v, dict)}
        records.append((s, values))
    if bad:
        source.warn(f"{bad} history row(s) whose step is not a 64-bit integer (text, inf, 20 digits) "
                    f"left out")
    if use_custom:
        source.warn("steps are train/global_step (W&B's _step is its own counter, one less)")
    source.extras["wandb_run_id"] = path.stem.removeprefix("run-")     # run-<id>.wandb
    _read_side_files(path.parent, source)
    return series_from_records(records, source)


def _read_side_files(run_dir: Path, source: Source) -> None:
    files = run_dir / "files"
    cfg = files / "config.yaml"
    if cfg.exists():
        import yaml  # noqa: PLC0415 - here, not at start-up: only W&B runs with a config need it
        try:
            source.extras["config"] = yaml.safe_load(cfg.read_text(errors="replace"))
        except yaml.YAMLError:
            source.warn("files/config.yaml: not valid YAML; ignored")
    summary = files / "wandb-summary.json"
    if summary.exists():
        try:
            source.extras["summary"] = json.loads(summary.read_text(errors="replace"))
        except json.JSONDecodeError:
            source.warn("files/wandb-summary.json: not valid JSON; ignored")
