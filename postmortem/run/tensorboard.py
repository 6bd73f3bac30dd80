"""TensorBoard event files: TFRecord framing, CRC checked, scalars decoded in bulk.

Every record is framed as: u64 length | masked crc32c(length) | data | masked
crc32c(data). The common event (wall_time, step, one simple_value) is decoded
for all records at once with numpy; anything else (tensor scalars, several
values per event, text, hparams) goes through the general protobuf walk.
Nothing is sampled: every scalar of every tag is kept.
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import numpy as np

from postmortem.errors import RunReadError
from postmortem.run.assemble import Series
from postmortem.run.model import Source
from postmortem.run.protowire import (
    ProtoError,
    as_double,
    as_float,
    crc32c_columns,
    fields,
    masked,
    plugin_data,
    read_varint,
    record_starts,
    submessages,
    text,
)

try:  # C speed for large records; the numpy route below works without it
    import google_crc32c
except ImportError:  # pragma: no cover
    google_crc32c = None

# TensorProto dtypes we read as scalars.
_DT_FLOAT, _DT_DOUBLE, _DT_HALF, _DT_INT32, _DT_INT64, _DT_BFLOAT16 = 1, 2, 19, 3, 9, 14
# {tag: (record numbers, steps, values)}, each a list of the chunks read so far.
TagChunks = dict[str, tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]]


def is_event_file(path: Path) -> bool:
    """By name or by content: a first record whose length CRC holds."""
    if "tfevents" in path.name:
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    if len(head) < 12:
        return False
    crc = masked(crc32c_columns(np.frombuffer(head, np.uint8), np.zeros(1, np.int64), 8))[0]
    return int(crc) == struct.unpack("<I", head[8:12])[0]


def _frame_fast(buf: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Record offsets without a Python loop, when every event starts with its wall_time.

    Candidates are positions whose data starts with 0x09 and whose length is
    small. The chain of records from byte 0 is unique, so when the candidates
    that point at one another form exactly that chain, they are the records;
    anything else (another event shape, a torn record) returns None. The CRCs
    are checked afterwards as for every record.
    """
    n = len(buf)
    if n < 16:
        return None
    hits = np.flatnonzero(buf[12:n - 3] == 0x09)
    if not len(hits) or hits[0] != 0:
        return None
    low = buf[hits[:, None] + np.arange(8)].copy().view("<u8").ravel()
    keep = low < (1 << 31)
    hits, lengths = hits[keep], low[keep].astype(np.int64)
    if not len(hits) or hits[0] != 0:
        return None
    for _ in range(3):       # drop candidates that neither point at nor are pointed at by one
        nxt = hits + 16 + lengths
        pos = np.minimum(np.searchsorted(hits, nxt), len(hits) - 1)
        points = (hits[pos] == nxt) | (nxt >= n - 16)
        pointed = np.zeros(len(hits), dtype=bool)
        pointed[pos[points & (hits[pos] == nxt)]] = True
        pointed[0] = True
        keep = points & pointed
        if keep.all():
            break
        hits, lengths = hits[keep], lengths[keep]
        if not len(hits) or hits[0] != 0:
            return None
    nxt = hits + 16 + lengths
    if (nxt[:-1] != hits[1:]).any():
        return None
    return hits, int(nxt[-1])


def _frame_records(buf: np.ndarray, path: Path, source: Source, final: bool
                   ) -> tuple[np.ndarray, np.ndarray, int]:
    """Offsets and lengths of the whole records in `buf`, and the bytes they span."""
    fast = _frame_fast(buf)
    if fast is not None:
        offsets, end = fast
        if end > len(buf) or (len(offsets) and offsets[-1] >= end):
            offsets = offsets[:-1]
    else:
        offsets = np.array(record_starts(buf.data), dtype=np.int64)
    lengths = buf[offsets[:, None] + np.arange(8)].copy().view("<u8").ravel().astype(np.int64)
    end = int(offsets[-1] + 16 + lengths[-1]) if len(offsets) else 0
    if final and end != len(buf):
        source.warn(f"{path.name}: truncated record at byte {end} (file still being written?); "
                    f"read the whole records before it")
    return offsets, lengths, end


def _check_crcs(buf: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                path: Path, source: Source, first_chunk: bool) -> tuple[np.ndarray, bool]:
    """Mask of records whose data CRC holds, and whether a bad length CRC ends the file."""
    def stored(at: np.ndarray) -> np.ndarray:
        return buf[at[:, None] + np.arange(4)].copy().view("<u4").ravel()

    good_len = masked(crc32c_columns(buf, offsets, 8)) == stored(offsets + 8)
    keep = np.ones(len(offsets), dtype=bool)
    stop = False
    if not good_len.all():
        first_bad = int(np.argmin(good_len))
        if first_bad == 0 and first_chunk:
            raise RunReadError(path, "not a TensorBoard event file (first record fails its CRC)")
        source.warn(f"{path.name}: a record has a corrupt length; read the records before it")
        keep[first_bad:] = False
        stop = True
    data_crc = np.zeros(len(offsets), dtype=np.uint32)
    starts = offsets + 12
    for length in np.unique(lengths[keep]):
        idx = np.flatnonzero(keep & (lengths == length))
        if length > 512 and google_crc32c is not None:
            data_crc[idx] = [google_crc32c.value(buf[s:s + length].tobytes()) for s in starts[idx]]
        else:
            data_crc[idx] = crc32c_columns(buf, starts[idx], int(length))
    bad = keep & (masked(data_crc) != stored(starts + lengths))
    if bad.any():
        source.warn(f"{path.name}: {int(bad.sum())} record(s) fail their data CRC and were "
                    f"skipped (first at byte {offsets[bad][0]})")
        keep &= ~bad
    return keep, stop


def _varint_at(buf: np.ndarray, pos: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised varint decode: (value, byte count, ok) at each position."""
    n = len(pos)
    value = np.zeros(n, dtype=np.uint64)
    size = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=bool)
    limit = len(buf)
    for k in range(max_bytes):
        at = np.minimum(pos + k, limit - 1)
        b = buf[at].astype(np.uint64)
        live = ~done
        value[live] |= (b[live] & np.uint64(0x7F)) << np.uint64(7 * k)
        ends = live & (b < 0x80)
        size[ends] = k + 1
        done |= ends
    return value, size, done


def _fast_scalars(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode events shaped wall_time, [step], summary{value{tag, simple_value}} in bulk.

    Returns (ok mask, wall_time, step, tag_start, tag_len, value) for all records.
    """
    n = len(starts)
    limit = len(buf) - 1
    ok = (ends - starts >= 9) & (buf[np.minimum(starts, limit)] == 0x09)
    wall = np.zeros(n)
    if ok.any():
        wall[ok] = buf[starts[ok, None] + 1 + np.arange(8)].copy().view("<f8").ravel()
    p = starts + 9
    has_step = ok & (buf[np.minimum(p, limit)] == 0x10)
    step_v, step_n, step_ok = _varint_at(buf, p + 1, 10)
    ok &= ~has_step | step_ok
    step = np.where(has_step, step_v, 0).astype(np.int64)
    p = np.where(has_step, p + 1 + step_n, p)
    ok &= buf[np.minimum(p, limit)] == 0x2A                          # Event.summary
    sum_len, sum_n, sum_ok = _varint_at(buf, p + 1, 3)
    p = p + 1 + sum_n
    ok &= sum_ok & (p + sum_len.astype(np.int64) == ends)
    ok &= buf[np.minimum(p, limit)] == 0x0A                          # Summary.value
    val_len, val_n, val_ok = _varint_at(buf, p + 1, 3)
    p = p + 1 + val_n
    ok &= val_ok & (p + val_len.astype(np.int64) == ends)            # exactly one value
    ok &= buf[np.minimum(p, limit)] == 0x0A                          # Value.tag
    tag_len, tag_n, tag_ok = _varint_at(buf, p + 1, 2)
    tag_start = p + 1 + tag_n
    tag_len = tag_len.astype(np.int64)
    q = tag_start + tag_len
    ok &= tag_ok & (q + 5 == ends)
    ok &= buf[np.minimum(q, limit)] == 0x15                          # Value.simple_value
    value = np.zeros(n, dtype=np.float32)
    if ok.any():
        value[ok] = buf[q[ok, None] + 1 + np.arange(4)].copy().view("<f4").ravel()
    return ok, wall, step, tag_start, tag_len, value


def _packed_ints(packed: bytes) -> list[float]:
    """Packed varints (TensorProto int_val / int64_val), as signed 64-bit numbers."""
    vals: list[float] = []
    pos = 0
    while pos < len(packed):
        x, pos = read_varint(packed, pos, len(packed))
        vals.append(float(x - (1 << 64) if x >= 1 << 63 else x))
    return vals


def _tensor_scalar(raw: bytes) -> float | None:
    """A scalar from a TensorProto (TF2 `tf.summary.scalar`), or None if it is not one."""
    dtype: int | None = None
    vals: list[float] = []
    content = b""
    for field in fields(raw):
        match field:
            case (1, 0, int() as d):
                dtype = d
            case (4, 2, bytes() as c):
                content = c
            case (5, 2, bytes() as packed):                 # packed float_val
                vals += list(struct.unpack(f"<{len(packed) // 4}f", packed))
            case (6, 2, bytes() as packed):                 # packed double_val
                vals += list(struct.unpack(f"<{len(packed) // 8}d", packed))
            case (7 | 10, 2, bytes() as packed):            # packed int_val / int64_val
                vals += _packed_ints(packed)
            case (5, 5, bytes() as x):
                vals.append(as_float(x))
            case (6, 1, bytes() as x):
                vals.append(as_double(x))
    if content and not vals:
        fmt = {_DT_FLOAT: "<f4", _DT_DOUBLE: "<f8", _DT_HALF: "<f2", _DT_INT32: "<i4",
               _DT_INT64: "<i8"}.get(dtype) if dtype is not None else None
        if fmt is None:
            return None
        arr = np.frombuffer(content, dtype=fmt)
        return float(arr[0]) if arr.size == 1 else None
    if dtype not in (_DT_FLOAT, _DT_DOUBLE, _DT_HALF, _DT_INT32, _DT_INT64, _DT_BFLOAT16, None):
        return None
    return float(vals[0]) if len(vals) == 1 else None


def _value_scalar(value: bytes) -> tuple[str, float] | None:
    """One Summary.Value: (tag, scalar) when it holds a scalar of the scalars plugin."""
    tag: str | None = None
    scalar: float | None = None
    plugin: str | None = None
    for field in fields(value):
        match field:
            case (1, 2, bytes() as t):
                tag = text(t)
            case (2, 5, bytes() as simple):
                scalar = as_float(simple)
            case (8, 2, bytes() as tensor):
                scalar = _tensor_scalar(tensor)
            case (9, 2, bytes() as metadata):               # SummaryMetadata.plugin_data.plugin_name
                plugin, _ = plugin_data(metadata, plugin)
    if tag is not None and scalar is not None and plugin in (None, "scalars"):
        return tag, scalar
    return None


def _slow_event(raw: bytes) -> tuple[float, int, list[tuple[str, float]]]:
    """Any event through the general protobuf walk: (wall_time, step, [(tag, value)])."""
    wall, step = 0.0, 0
    scalars: list[tuple[str, float]] = []
    for field in fields(raw):
        match field:
            case (1, 1, bytes() as w):
                wall = as_double(w)
            case (2, 0, int() as s):
                step = s - (1 << 64) if s >= 1 << 63 else s
            case (5, 2, bytes() as summary):
                for value in submessages(summary, 1):
                    found = _value_scalar(value)
                    if found is not None:
                        scalars.append(found)
    return wall, step, scalars


def _trim() -> None:
    """Hand the chunk's freed scratch memory back to the OS (glibc keeps it otherwise)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


_LIBC: ctypes.CDLL | None
try:
    _LIBC = ctypes.CDLL("libc.so.6")
    _LIBC.malloc_trim  # noqa: B018 - glibc only
except (OSError, AttributeError):
    _LIBC = None

_CHUNK = 16 << 20   # bytes read at a time: memory stays near the size of the result


class _Walls:
    """The wall time of every record (8 bytes a record): the wall_time column is then taken
    from the most logged tag's records, and several files interleave by it."""

    def __init__(self) -> None:
        self.records: list[np.ndarray] = []

    def add_chunk(self, wall: np.ndarray) -> None:
        self.records.append(wall)

    def per_record(self) -> np.ndarray:
        return np.concatenate(self.records) if self.records else np.empty(0)


def read_event_file(path: Path, source: Source, walls: _Walls) -> TagChunks:
    """All scalars of one event file: {tag: (record no, step, value) chunks}."""
    tags: TagChunks = {}
    carry = b""
    base = 0
    with open(path, "rb") as f:
        while True:
            data = f.read(_CHUNK)
            final = not data
            raw = carry + data if carry else data
            buf = np.frombuffer(raw, dtype=np.uint8)
            offsets, lengths, end = _frame_records(buf, path, source, final)
            if len(offsets):
                keep, stop = _check_crcs(buf, offsets, lengths, path, source, base == 0)
                _decode_chunk(buf, raw, offsets, lengths, keep, base, tags, walls, path, source)
                base += len(offsets)
                if stop:
                    break
            elif final and base == 0:
                source.warn(f"{path.name}: no whole record")
            carry = raw[end:]
            del buf, raw
            _trim()
            if final:
                break
    return tags


def _compact(ints: np.ndarray) -> np.ndarray:
    """int32 where it fits: a million-step run of six tags is 6M points to hold."""
    if len(ints) and 0 <= ints.min() and ints.max() < (1 << 31):
        return ints.astype(np.int32)
    return ints


def _decode_chunk(buf: np.ndarray, raw: bytes, offsets: np.ndarray, lengths: np.ndarray, keep: np.ndarray,
                  base: int, tags: TagChunks, walls: _Walls, path: Path, source: Source) -> None:
    """Decode one chunk's records into `tags` (and their wall times into `walls`)."""
    starts, ends = offsets + 12, offsets + 12 + lengths
    ok, wall, step, tag_start, tag_len, value = _fast_scalars(buf, starts, ends)
    ok &= keep
    order = base + np.arange(len(offsets), dtype=np.int64)
    # Group the fast records by tag bytes: one np.unique per tag length.
    for tl in np.unique(tag_len[ok]):
        idx = np.flatnonzero(ok & (tag_len == tl))
        raw_tags = np.ascontiguousarray(buf[tag_start[idx, None] + np.arange(max(int(tl), 1))])
        uniq, inverse = np.unique(raw_tags.view(f"V{max(int(tl), 1)}").ravel(), return_inverse=True)
        for k, u in enumerate(uniq):
            tag = bytes(u)[:tl].decode("utf-8", "replace")
            sel = idx[inverse == k]
            chunk = tags.setdefault(tag, ([], [], []))
            chunk[0].append(_compact(order[sel]))
            chunk[1].append(_compact(step[sel]))
            chunk[2].append(value[sel])
    bad = 0
    for i in np.flatnonzero(keep & ~ok):
        try:
            w, s, scalars = _slow_event(raw[starts[i]:ends[i]])
        except ProtoError:
            bad += 1
            continue
        wall[i] = w
        for tag, v in scalars:
            chunk = tags.setdefault(tag, ([], [], []))
            chunk[0].append(np.array([order[i]]))
            chunk[1].append(np.array([s], dtype=np.int64))
            chunk[2].append(np.array([v], dtype=np.float64))
    walls.add_chunk(wall)
    if bad:
        source.warn(f"{path.name}: {bad} record(s) are not valid events and were skipped")


def read_tensorboard(files: list[Path], root: Path, source: Source) -> list[Series]:
    """Every scalar of every event file under `root`.

    Files written at the same time (Keras' train/ and validation/, HF's hparams
    file) interleave by wall time; a later writer whose steps go back is a resume.
    """
    several = len(files) > 1
    per_file = []
    for path in files:
        walls = _Walls()
        per_file.append((path, read_event_file(path, source, walls), walls))
    if several:
        # Global order: wall time first, then file, then record within the file.
        record_walls = [w.per_record() for _, _, w in per_file]
        sizes = [len(w) for w in record_walls]
        all_walls = np.concatenate(record_walls)
        file_no = np.repeat(np.arange(len(per_file)), sizes)
        rec_no = np.concatenate([np.arange(n) for n in sizes])
        by_rank = np.lexsort((rec_no, file_no, all_walls))
        rank = np.empty(len(all_walls), dtype=np.int64)
        rank[by_rank] = np.arange(len(all_walls))
        bases = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    dirs_of_tag: dict[str, set[Path]] = {}
    for path, tags, _ in per_file:
        for tag in tags:
            dirs_of_tag.setdefault(tag, set()).add(path.parent)
    merged: dict[str, tuple[list, list, list]] = {}
    for i, (path, tags, _) in enumerate(per_file):
        sub = path.parent.relative_to(root).as_posix() if path.parent != root else ""
        for tag, (o, s, v) in tags.items():
            # Keras writes train/ and validation/ with the same tags: keep them apart.
            name = f"{sub}/{tag}" if len(dirs_of_tag[tag]) > 1 and sub else tag
            dst = merged.setdefault(name, ([], [], []))
            dst[0].extend(rank[bases[i] + oo] if several else oo for oo in o)
            dst[1].extend(s)
            dst[2].extend(v)
        tags.clear()               # merged holds the only references now
    if not merged:
        raise RunReadError(root, "the TensorBoard event files hold no scalars")
    series = []
    for tag in list(merged):       # one tag at a time, freeing its pieces as we go
        o, s, v = merged.pop(tag)
        series.append(Series(tag, np.concatenate(o), np.concatenate(s), np.concatenate(v)))
        del o, s, v
    # wall_time per step from the most logged tag (resumes show as gaps), with one file or several
    main = max(series, key=lambda s: len(s.step))
    walls = all_walls[by_rank[main.order]] if several else per_file[0][2].per_record()[main.order]
    series.append(Series("wall_time", main.order, main.step, walls))
    return series


# Folders TensorBoard shows as runs that are parts of one training run (Keras' train/ and
# validation/, the eval/ of an estimator): joined into their parent's run.
_SPLITS = {"train", "training", "validation", "valid", "val", "eval", "evaluation", "test"}


def group_runs(files: list[Path], root: Path) -> list[tuple[Path, list[Path]]]:
    """Event files by the run they belong to: a run is a folder of event files, with the split
    folders (train/, validation/) and the folders nested inside it (HF's hparams file) joined in."""
    by_dir: dict[Path, list[Path]] = {}
    for f in files:
        d = f.parent
        if d.name.lower() in _SPLITS and d != root and root in d.parents:
            d = d.parent
        by_dir.setdefault(d, []).append(f)
    runs: dict[Path, list[Path]] = {}
    for d in sorted(by_dir, key=lambda p: len(p.parts)):
        home = next((a for a in d.parents if a in runs), d)
        runs.setdefault(home, []).extend(by_dir[d])
    return [(d, sorted(fs)) for d, fs in runs.items()]
