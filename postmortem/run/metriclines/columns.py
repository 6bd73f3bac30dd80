"""Column-wise reading: lines grouped by shape, each shape parsed once.

A line's shape is the line with its digits taken out. All lines of one shape
(and one count of digit runs) print the same names in the same places, so the
first of them is parsed in Python (`pairs.parse`) and the values of all the
others are cut from the raw bytes at the same digit runs and converted by
Arrow in one call per column. A 1M-line log has a handful of shapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from postmortem.run.assemble import to_number
from postmortem.run.metriclines.pairs import Parsed, parse

_DIGITS = b"0123456789"
_CR_TO_LF = bytes.maketrans(b"\r", b"\n")
_RUN = re.compile(rb"[0-9]+")
_MAX_RUNS = 1 << 12


@dataclass
class Group:
    """Lines of one shape: their line numbers, what the first of them says, the columns."""

    rows: np.ndarray
    parsed: Parsed
    text: str                     # the first line of the group, as printed
    values: dict[str, np.ndarray] = field(default_factory=dict)
    counters: dict[str, np.ndarray] = field(default_factory=dict)  # step kinds, epoch, batch...
    masks: dict[str, np.ndarray] = field(default_factory=dict)     # a column on some rows only


def split_lines(data) -> bytes:
    """The text with tqdm's `\\r` frames as lines of their own."""
    if data.find(b"\r") >= 0:
        data = bytes(data).replace(b"\r\n", b"\n").translate(_CR_TO_LF)
    return data


_CHUNK = 1 << 19      # scanned a piece at a time: each pass over a piece stays in the CPU cache


class _Shapes:
    """Ids for line shapes (a line with its digits taken out), the same over all pieces."""

    def __init__(self) -> None:
        self.ids: dict[bytes, int] = {}

    def of(self, piece: bytes, line_starts: np.ndarray, digits_before: np.ndarray) -> np.ndarray:
        stripped = piece.translate(None, _DIGITS)
        offsets = np.append(line_starts - digits_before, len(stripped)).astype(np.int64)
        size = int(offsets[1]) if len(offsets) > 1 else 0
        if size and size * len(line_starts) == len(stripped) and stripped == stripped[:size] * len(line_starts):
            # every line of the piece has one shape (the common case: a run of step lines)
            return np.full(len(line_starts), self.ids.setdefault(stripped[:size], len(self.ids)), np.int64)
        arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(line_starts),
                                               [None, pa.py_buffer(offsets), pa.py_buffer(stripped)])
        enc = pc.dictionary_encode(arr)
        ids = self.ids
        known = np.array([ids.setdefault(v, len(ids)) for v in enc.dictionary.to_pylist()], dtype=np.int64)
        return known[enc.indices.to_numpy(zero_copy_only=False)]


def scan(data) -> tuple[np.ndarray, ...]:
    """Line starts and ends, digit-run starts and ends, each line's first run, and each
    line's shape id (equal for lines equal once their digits are taken out).

    One piece of the text at a time (whole lines), so every pass stays in the CPU cache
    and what a piece needs is allocated once, not once per pass over the whole text."""
    b = np.frombuffer(data, dtype=np.uint8)
    n = len(b)
    nls, rss, res, firsts, shapes = [], [], [], [], []
    runs_before, pos = 0, 0
    work, edge, newline = np.empty(0, dtype=np.uint8), np.empty(0, dtype=bool), np.empty(0, dtype=bool)
    small = np.int32 if n < (1 << 31) - 1 else np.int64
    shape_ids = _Shapes()
    while pos < n:
        end = min(pos + _CHUNK, n)
        if end < n:
            cut = data.rfind(b"\n", pos, end)
            end = cut + 1 if cut >= pos else (data.find(b"\n", end) + 1 or n)
        piece = data[pos:end]               # a copy in the cache, read by every pass below
        c = np.frombuffer(piece, dtype=np.uint8)
        m = len(c)
        if len(work) < m + 1:
            work = np.empty(m + 1, dtype=np.uint8)
            edge = np.empty(m + 1, dtype=bool)
            newline = np.empty(m, dtype=bool)
        isd = work[:m]
        np.subtract(c, 48, out=isd)          # uint8 wraps: one comparison for '0'..'9'
        isd = isd.view(bool)
        np.less(work[:m], 10, out=isd)
        e = edge[:m + 1]
        e[0], e[-1] = isd[0], isd[-1]
        np.not_equal(isd[1:], isd[:-1], out=e[1:-1])
        nz = np.flatnonzero(e)               # a run's start and end alternate; bool: numpy's fast path
        rs, re_ = nz[0::2], nz[1::2]
        nl = np.flatnonzero(np.equal(c, 10, out=newline[:m]))
        line_starts = np.concatenate([[0], nl + 1])
        if len(nl) and nl[-1] + 1 == len(c):
            line_starts = line_starts[:-1]
        first = np.searchsorted(rs, line_starts)
        lengths = np.concatenate([[0], np.cumsum(re_ - rs)])
        shapes.append(shape_ids.of(piece, line_starts, lengths[first]))
        firsts.append(first + runs_before)
        runs_before += len(rs)
        rss.append((rs + pos).astype(small))     # int32 where the text allows: half the memory
        res.append((re_ + pos).astype(small))
        nls.append(nl + pos)
        pos = end
    empty = np.empty(0, np.int64)
    nl = np.concatenate(nls) if nls else empty
    starts = np.concatenate([[0], nl + 1]).astype(np.int64)
    ends = np.append(nl, n).astype(np.int64)
    if len(starts) and starts[-1] == ends[-1]:
        starts, ends = starts[:-1], ends[:-1]
    k = len(starts)
    first_run = np.concatenate(firsts)[:k] if firsts else empty
    shape = np.concatenate(shapes)[:k] if shapes else empty
    run_s = np.concatenate(rss) if rss else empty
    run_e = np.concatenate(res) if res else empty
    return starts, ends, run_s, run_e, first_run, shape


def _byte_span(line: str, span: tuple[int, int]) -> tuple[int, int]:
    s, e = span
    if line.isascii():
        return s, e
    return len(line[:s].encode("utf-8", "surrogateescape")), len(line[:e].encode("utf-8", "surrogateescape"))


class _Cutter:
    """Cuts the token at one span of a representative line out of every line of its group."""

    def __init__(self, data: bytes, run_s: np.ndarray, run_e: np.ndarray, first_run: np.ndarray):
        self.data, self.run_s, self.run_e, self.first_run = data, run_s, run_e, first_run
        self.buf = pa.py_buffer(data)
        self._rows: np.ndarray | None = None
        self._base = np.empty(0, np.int64)

    def spans(self, rep: bytes, rep_runs: list[tuple[int, int]], span: tuple[int, int],
              rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        bs, be = span
        inside = [i for i, (s, e) in enumerate(rep_runs) if s >= bs and e <= be]
        if not inside:
            return None
        a, b = inside[0], inside[-1]
        base = self.first_run[rows] if self._rows is not rows else self._base
        self._rows, self._base = rows, base       # the same rows for every span of a group
        return (self.run_s[base + a] + (bs - rep_runs[a][0]),
                self.run_e[base + b] + (be - rep_runs[b][1]))

    def numbers(self, starts: np.ndarray, ends: np.ndarray, commas: bool
                ) -> tuple[np.ndarray, np.ndarray | None]:
        """The tokens as floats, and which of them were numbers (None: all)."""
        m = len(starts)
        if m == 0:
            return np.empty(0), None
        wide = len(self.data) >= (1 << 31) - 1
        pos = np.empty(2 * m, dtype=np.int64 if wide else np.int32)
        pos[0::2], pos[1::2] = starts, ends
        # Tokens and the gaps between them as one string array over the raw bytes: no copy;
        # the gaps are null (bits 0b01010101...), so the cast skips them and nothing is taken.
        mask = pa.py_buffer(b"\x55" * ((2 * m + 6) // 8))
        kind = pa.LargeStringArray if wide else pa.StringArray
        arr = kind.from_buffers(2 * m - 1, pa.py_buffer(pos), self.buf, mask, m - 1)
        if commas:
            arr = pc.replace_substring(arr, ",", "")
        try:
            floats = pc.cast(arr, pa.float64())
            # the values buffer as it is: the null gaps are dropped by the stride, not filled
            return np.frombuffer(floats.buffers()[1], np.float64, 2 * m - 1)[0::2], None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            # a line of this shape with no number there: that value was not logged (not a NaN)
            out = [to_number(t) for t in arr.to_pylist()[0::2]]
            valid = np.array([v is not None for v in out])
            return np.array([np.nan if v is None else v for v in out], dtype=np.float64), valid


def read_groups(data: bytes) -> tuple[list[Group], int]:
    """Every useful line of the text, grouped by shape, with its values; and the line count."""
    data = split_lines(data)
    starts, ends, run_s, run_e, first_run, shape = scan(data)
    n = len(starts)
    if n == 0:
        return [], 0
    n_runs = np.append(first_run[1:], len(run_s)) - first_run
    key = shape * _MAX_RUNS + np.minimum(n_runs, _MAX_RUNS - 1)
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=len(uniq)))])
    cutter = _Cutter(data, run_s, run_e, first_run)
    groups = []
    for g, line_no in enumerate(first):
        rep = data[starts[line_no]:ends[line_no]]
        if not rep.strip():
            continue
        text = rep.decode("utf-8", "surrogateescape")     # byte offsets survive bad bytes
        parsed = parse(text)
        if not parsed.useful:
            continue
        rows = order[bounds[g]:bounds[g + 1]]
        groups.append(_extract(cutter, rep, text, parsed, rows))
    return groups, n


def _extract(cutter: _Cutter, rep: bytes, text: str, parsed: Parsed, rows: np.ndarray) -> Group:
    rep_runs = [m.span() for m in _RUN.finditer(rep)]
    group = Group(rows=rows, parsed=parsed, text=text)
    wanted: list[tuple[dict, str, tuple[int, int]]] = []     # (where, name, char span)
    for v in parsed.values:
        if v.const is not None:
            group.values[v.column] = np.full(len(rows), v.const)
        else:
            wanted.append((group.values, v.column, (v.start, v.end)))
    extra = dict(parsed.counters)
    extra["epoch"] = parsed.epoch
    if parsed.batch:
        extra["batch_i"], extra["batch_n"] = parsed.batch
    if parsed.progress:
        extra["progress_i"], extra["progress_n"] = parsed.progress
    if parsed.period:
        extra["period"] = parsed.period
    if parsed.epoch_base is not None:
        group.counters["epoch_base"] = np.full(len(rows), float(parsed.epoch_base))
    if parsed.overflow:
        extra["overflow_scale"] = parsed.overflow["scale"]
        extra["overflow_rank"] = parsed.overflow["rank"]
    wanted += [(group.counters, kind, span) for kind, span in extra.items() if span is not None]
    cuts = []
    for where, name, span in wanted:
        bs, be = _byte_span(text, span)
        cut = cutter.spans(rep, rep_runs, (bs, be), rows)
        if cut is not None:
            cuts.append((bs, be, where, name, cut, "," in text[span[0]:span[1]]))
    cuts.sort(key=lambda c: c[0])
    apart = all(a[1] <= b[0] for a, b in zip(cuts, cuts[1:]))
    if apart and len(cuts) > 1:
        # every token of every line in one array, in file order: one take and one cast
        starts = np.stack([c[4][0] for c in cuts], axis=1).ravel()
        ends = np.stack([c[4][1] for c in cuts], axis=1).ravel()
        flat, valid = cutter.numbers(starts, ends, any(c[5] for c in cuts))
        values = flat.reshape(len(rows), len(cuts))
        valid = valid.reshape(len(rows), len(cuts)) if valid is not None else None
        for j, (_, _, where, name, _, _) in enumerate(cuts):
            _place(group, where, name, values[:, j], None if valid is None else valid[:, j])
    else:
        for _, _, where, name, (st, en), commas in cuts:
            _place(group, where, name, *cutter.numbers(st, en, commas))
    return group


def _place(group: Group, where: dict, name: str, values: np.ndarray, valid: np.ndarray | None) -> None:
    where[name] = values
    if valid is not None and where is group.values:
        group.masks[name] = valid
