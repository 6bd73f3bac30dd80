"""Column-wise reading: lines grouped by shape, each shape parsed once.

A line's shape is the line with its digits taken out. All lines of one shape
(and one count of digit runs) print the same names in the same places, so the
first of them is parsed in Python (`pairs.parse`) and the values of all the
others are cut from the raw bytes at the same digit runs and converted by
Arrow in one call per column. A 1M-line log has a handful of shapes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from postmortem.run import readprogress
from postmortem.run.assemble import to_number
from postmortem.run.dialects import catalogue, progress
from postmortem.run.metriclines import code, evalpass, table
from postmortem.run.metriclines.clean import clean
from postmortem.run.metriclines.pairs import Parsed, Value, parse, split_event
from postmortem.run.metriclines.steps import STEP_KINDS

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


def _shapes(piece: bytes, line_starts: np.ndarray, digits_before: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """The piece's distinct line shapes (a line with its digits taken out) and each line's."""
    stripped = piece.translate(None, _DIGITS)
    offsets = np.append(line_starts - digits_before, len(stripped)).astype(np.int64)
    size = int(offsets[1]) if len(offsets) > 1 else 0
    if size and size * len(line_starts) == len(stripped) and stripped == stripped[:size] * len(line_starts):
        # every line of the piece has one shape (the common case: a run of step lines)
        return [stripped[:size]], np.zeros(len(line_starts), np.int64)
    arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(line_starts),
                                           [None, pa.py_buffer(offsets), pa.py_buffer(stripped)])
    enc = pc.dictionary_encode(arr)
    return enc.dictionary.to_pylist(), enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)


@dataclass
class _Piece:
    newlines: np.ndarray          # positions in the text
    run_s: np.ndarray | None      # digit runs, positions in the text
    run_e: np.ndarray | None
    first: np.ndarray             # each line's first run, counted in the piece
    shapes: list[bytes]
    shape: np.ndarray             # each line's, into `shapes`


def _scan_piece(data, pos: int, end: int) -> _Piece:
    piece = data[pos:end]                   # a copy in the cache, read by every pass below
    c = np.frombuffer(piece, dtype=np.uint8)
    m = len(c)
    work = np.subtract(c, 48, dtype=np.uint8)   # uint8 wraps: one comparison for '0'..'9'
    isd = np.less(work, 10, out=work.view(bool))
    e = np.empty(m + 1, dtype=bool)
    e[0], e[-1] = isd[0], isd[-1]
    np.not_equal(isd[1:], isd[:-1], out=e[1:-1])
    nz = np.flatnonzero(e)                  # a run's start and end alternate; bool: numpy's fast path
    rs, re_ = nz[0::2], nz[1::2]
    nl = np.flatnonzero(np.equal(c, 10, out=e[:m]))
    line_starts = np.concatenate([[0], nl + 1])
    if len(nl) and nl[-1] + 1 == m:
        line_starts = line_starts[:-1]
    first = np.searchsorted(rs, line_starts)
    lengths = np.concatenate([[0], np.cumsum(re_ - rs)])
    shapes, shape = _shapes(piece, line_starts, lengths[first])
    small = _position_type(len(data))
    return _Piece(nl + pos, (rs + pos).astype(small), (re_ + pos).astype(small), first, shapes, shape)


def _position_type(n: int) -> type:
    return np.int32 if n < (1 << 31) - 1 else np.int64      # int32 where it fits: half the memory


def _pieces(data) -> list[tuple[int, int]]:
    n, pos, out = len(data), 0, []
    while pos < n:
        end = min(pos + _CHUNK, n)
        if end < n:
            cut = data.rfind(b"\n", pos, end)
            end = cut + 1 if cut >= pos else (data.find(b"\n", end) + 1 or n)
        out.append((pos, end))
        pos = end
    return out


def _workers() -> int:
    """Threads for the scan: the cores this process may use that other processes leave idle
    (on a busy machine more threads only add their own overhead)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:                  # not Linux
        cores = os.cpu_count() or 1
    try:
        idle = cores - os.getloadavg()[0] + 1     # + 1: this process's own share
    except (OSError, AttributeError):            # no load average (Windows)
        idle = cores
    return max(1, min(8, cores, int(idle)))


def _reserve(n: int, pieces: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Room for every digit run of a text of n bytes in `pieces` pieces (a piece of k bytes
    has at most (k+1)/2 runs), or None where that is more than half the machine's memory."""
    if pieces < 2:
        return None
    bound, dtype = n // 2 + pieces + 1, _position_type(n)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    if 2 * bound * np.dtype(dtype).itemsize > memory // 2:
        return None
    return np.empty(bound, dtype=dtype), np.empty(bound, dtype=dtype)


def scan(data) -> tuple[np.ndarray, ...]:
    """Line starts and ends, digit-run starts and ends, each line's first run, and each
    line's shape id (equal for lines equal once their digits are taken out).

    One piece of the text at a time (whole lines), so every pass stays in the CPU cache;
    the pieces on every core the process may use (numpy and Arrow let go of the GIL)."""
    n = len(data)
    bounds = _pieces(data)
    # The runs go into one array as the pieces come, each piece's own arrays freed once
    # copied (the next pieces reuse their memory): one array's worth of new memory, not two.
    # It is reserved at its bound; what is never written is never mapped. A text too big
    # for that: the pieces' arrays joined at the end.
    joined = _reserve(n, len(bounds))
    ids: dict[bytes, int] = {}
    pieces, firsts, shape_ids, runs_before = [], [], [], 0
    parallel = len(bounds) > 2 and _workers() > 1
    with ThreadPoolExecutor(_workers()) if parallel else contextlib.nullcontext() as pool:
        scanned = (pool.map(lambda b: _scan_piece(data, *b), bounds) if pool is not None
                   else (_scan_piece(data, *b) for b in bounds))
        for (_, piece_end), p in zip(bounds, scanned):   # in text order: the same shape ids
            readprogress.advance(piece_end, n)                # on every read
            known = np.array([ids.setdefault(v, len(ids)) for v in p.shapes], dtype=np.int64)
            shape_ids.append(known[p.shape])
            firsts.append(p.first + runs_before)
            assert p.run_s is not None and p.run_e is not None     # emptied only just below
            k = len(p.run_s)
            if joined is not None:
                joined[0][runs_before:runs_before + k] = p.run_s
                joined[1][runs_before:runs_before + k] = p.run_e
                p.run_s = p.run_e = None
            runs_before += k
            pieces.append(p)
    empty = np.empty(0, np.int64)
    nl = np.concatenate([p.newlines for p in pieces]) if pieces else empty
    starts = np.concatenate([[0], nl + 1]).astype(np.int64)
    ends = np.append(nl, n).astype(np.int64)
    if len(starts) and starts[-1] == ends[-1]:
        starts, ends = starts[:-1], ends[:-1]
    k = len(starts)
    first_run = np.concatenate(firsts)[:k] if firsts else empty
    shape = np.concatenate(shape_ids)[:k] if shape_ids else empty
    if joined is not None:
        run_s, run_e = joined[0][:runs_before], joined[1][:runs_before]
    else:
        run_s = np.concatenate([p.run_s for p in pieces]) if pieces else empty
        run_e = np.concatenate([p.run_e for p in pieces]) if pieces else empty
    del pieces
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

    def runs(self, rep_runs: list[tuple[int, int]], span: tuple[int, int]) -> tuple[int, int, int, int] | None:
        """The span as (first run, offset from its start, last run, offset from its end)."""
        bs, be = span
        inside = [i for i, (s, e) in enumerate(rep_runs) if s >= bs and e <= be]
        if not inside:
            return None
        a, b = inside[0], inside[-1]
        return a, bs - rep_runs[a][0], b, be - rep_runs[b][1]

    def spans(self, where: list[tuple[int, int, int, int]], rows: np.ndarray) -> np.ndarray:
        """Start and end of each span in every row: (rows, 2 x spans), the runs gathered at once."""
        base = self.first_run[rows]
        pos = np.empty((len(rows), 2 * len(where)), dtype=self.run_s.dtype)
        # one span at a time (1-D gathers, written in place): half the time of one 2-D
        # gather with its (rows, spans) index arrays on a 1M-line log
        for j, (a, da, b, db) in enumerate(where):
            np.add(np.take(self.run_s, base + a), da, out=pos[:, 2 * j], casting="unsafe")
            np.add(np.take(self.run_e, base + b), db, out=pos[:, 2 * j + 1], casting="unsafe")
        return pos

    def numbers_at(self, pos: np.ndarray, commas: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """The tokens at [pos[0], pos[1]), [pos[2], pos[3]), ... as floats, and which of them
        were numbers (None: all)."""
        m = len(pos) // 2
        if m == 0:
            return np.empty(0), None
        wide = pos.dtype == np.int64
        pos = np.ascontiguousarray(pos, dtype=np.int64 if wide else np.int32)
        # Tokens and the gaps between them as one string array over the raw bytes: no copy;
        # the gaps are null (bits 0b01010101...), so the cast skips them and nothing is taken.
        mask = pa.py_buffer(b"\x55" * ((2 * m + 6) // 8))
        kind = pa.LargeStringArray if wide else pa.StringArray
        arr = kind.from_buffers(2 * m - 1, pa.py_buffer(pos), self.buf, mask, m - 1)
        if commas:
            arr = pc.replace_substring(arr, ",", "")
        try:
            return _cast(arr), None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            # a line of this shape with no number there: that value was not logged (not a NaN)
            out = [to_number(t) for t in arr.to_pylist()[0::2]]
            valid = np.array([v is not None for v in out])
            return np.array([np.nan if v is None else v for v in out], dtype=np.float64), valid


_CAST_SLICE = 1 << 21


def _cast_slice(arr: pa.Array) -> np.ndarray:
    floats = pc.cast(arr, pa.float64())
    # the values buffer as it is: the null gaps are dropped by the stride, not filled
    off = floats.offset
    return np.frombuffer(floats.buffers()[1], np.float64, off + len(floats))[off::2]


def _cast(arr: pa.Array) -> np.ndarray:
    """Every other slot of `arr` (tokens between null gaps) as floats, in slices on every core."""
    if len(arr) <= 2 * _CAST_SLICE or _workers() < 2:
        return _cast_slice(arr)
    slices = [arr.slice(i, 2 * _CAST_SLICE) for i in range(0, len(arr), 2 * _CAST_SLICE)]   # even starts
    with ThreadPoolExecutor(_workers()) as pool:
        return np.concatenate(list(pool.map(_cast_slice, slices)))


# What a launch prints once, at its start, before its first step: Megatron's argument dump
# (megatron/arguments.py `_print_args`: '---- arguments ----'), argparse's `print(args)`
# (`Namespace(...)`), Lightning's Trainer (`_log_device_info`: 'GPU available: ...'), HF's
# Trainer (`_inner_training_loop`: '***** Running training *****'), DeepSpeed's engine
# (`DeepSpeed info: version=...`). Seen again between metric lines: a relaunch appended to
# the same log (`textlogs`), whose steps may carry on from its checkpoint.
LAUNCH_BANNER = re.compile(r"-{8,} arguments -{8,}|(?:^|[\]>:] )Namespace\(|GPU available: (?:True|False)"
                           r"|\*{5} Running training \*{5}|DeepSpeed info: version=")


def read_groups(data: bytes, binary: list[int] | None = None,
                banners: list[int] | None = None) -> tuple[list[Group], int]:
    """Every useful line of the text, grouped by shape, with its values; and the line count.
    Lines holding binary bytes (NUL) are skipped; `binary` gets their line numbers, `banners`
    those of launch banners (one test per shape of line, not per line)."""
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
    groups: list[Group] = []
    eval_begins: list[np.ndarray] = []
    eval_ends: list[np.ndarray] = []
    predict_begins: list[np.ndarray] = []
    eval_said: list[np.ndarray] = []
    bare: list[tuple[bytes, str, np.ndarray]] = []
    headers = table.header_lines(
        (data[starts[line_no]:ends[line_no]], order[bounds[g]:bounds[g + 1]]) for g, line_no in enumerate(first))
    for g, line_no in enumerate(first):
        rep = data[starts[line_no]:ends[line_no]]
        if not rep.strip():
            continue
        if b"\x00" in rep:         # binary bytes pasted into the log: a line's shape keeps its NULs
            if binary is not None:
                binary.extend(order[bounds[g]:bounds[g + 1]].tolist())
            continue
        text = rep.decode("utf-8", "surrogateescape")     # byte offsets survive bad bytes
        if banners is not None and LAUNCH_BANNER.search(text):
            banners.extend(order[bounds[g]:bounds[g + 1]].tolist())
        parsed = _parse(text)
        if not parsed.values and not parsed.overflow and not parsed.code:
            above = [data[starts[i]:ends[i]].decode("utf-8", "replace") for i in
                     table.lines_above(line_no, headers)]
            parsed = table.row(text, above) or parsed        # numbers under a header of names
        if not parsed.values and not parsed.overflow and _BARE_PAIR.fullmatch(text):
            bare.append((rep, text, order[bounds[g]:bounds[g + 1]]))
            continue
        if not parsed.useful:
            begin = _EVAL_BEGIN.search(clean(text))
            if begin:
                (predict_begins if begin[1] == "Predict" else eval_begins).append(order[bounds[g]:bounds[g + 1]])
            elif evalpass.EVAL_SAID.search(clean(text)):
                eval_said.append(order[bounds[g]:bounds[g + 1]])
            continue
        rows = order[bounds[g]:bounds[g + 1]]
        if _EVAL_END.search(clean(text)):       # a count of samples, no metric
            eval_ends.append(rows)
            continue
        # a message glued behind a metric frame: the frame's group, then the message's (one
        # line, two entries: its metrics and its event)
        for piece, entry in enumerate(split_event(parsed)):
            parts = _by_name_digits(cutter, rep, text, entry, rows)
            if parts is None:
                groups.append(_extract(cutter, rep, text, entry, rows))
                continue
            for part in parts:          # each with its own first line: its names, its columns
                prep = data[starts[part[0]]:ends[part[0]]]
                ptext = prep.decode("utf-8", "surrogateescape")
                groups.append(_extract(cutter, prep, ptext, split_event(_parse(ptext))[piece], part))
    if bare and not any(gr.parsed.values for gr in groups) and 2 * sum(len(r) for *_, r in bare) >= n >= 3:
        groups.extend(_extract(cutter, rep, text, _bare_pair(text), rows) for rep, text, rows in bare)
    groups = _evals_apart(without_code(groups), eval_begins, eval_ends, predict_begins)
    return _summaries_apart(_announced_evals(groups, eval_said)), n


def _announced_evals(groups: list[Group], said: list[np.ndarray]) -> list[Group]:
    """An eval announced in words whose rows count from 0 again (`evalpass`): `val_*` rows at
    the last train step, not a relaunch."""
    if not said:
        return groups
    out = []
    for g, mask in zip(groups, evalpass.eval_masks(groups, np.concatenate(said))):
        if mask is None:
            out.append(g)
            continue
        if not mask.all():
            out.append(_rows_of(g, ~mask))
        out.append(_eval_rows(_rows_of(g, mask), "val"))
    return out


# YANMTT (prajdabre/yanmtt pretrain_nmt.py, train_nmt.py): `print(ctr, lv)`, the batch counter and the
# loss as numpy prints it (`76930 2.6496577`, `76980 nan`): a step and a loss, named by nothing. Read
# so only where such lines are the log (at least half its lines, no named metric anywhere).
_BARE_PAIR = re.compile(r"\s*(\d+) +([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf|-inf))\s*")


def _bare_pair(text: str) -> Parsed:
    m = _BARE_PAIR.fullmatch(text)
    assert m is not None                  # only lines that matched are kept
    out = Parsed(counters={"lead": m.span(1)})
    value = m.group(2)
    out.values.append(Value("loss", *m.span(2), float(value) if value.lstrip("+-").isalpha() else None))
    return out


# Paddle hapi's ProgBarLogger (python/paddle/hapi/callbacks.py): `print('Eval begin...')`
# (on_eval_begin), the eval's bar lines, `print('Eval samples: %d' % self.evaled_samples)`
# (on_eval_end); Model.predict the same with `print('Predict begin...')` (on_test_begin) and
# `print('Predict samples: %d' % self.tested_samples)` (on_test_end)
# Coqui TTS's ConsoleLogger (coqui-ai/Trainer trainer/logging/console_logger.py, coqui-ai/TTS
# TTS/utils/logging/console_logger.py, mozilla/TTS TTS/utils/console_logger.py): `print_eval_start`
# prints f"\n{tcolors.BOLD} > EVALUATION {tcolors.ENDC}\n" (its ` > ` blanked by `clean`); the eval's
# step blocks (`--> STEP: {step}`, the eval batch) and its `--> EVAL PERFORMANCE` means follow,
# up to the next ` > EPOCH: e/E`
_EVAL_BEGIN = re.compile(r"^\s*(?:(Eval|Predict) begin\.\.\.|(?:> )?EVALUATION)\s*$")
_EVAL_END = re.compile(r"^\s*(?:Eval|Predict) samples: \d+\s*$")


def _evals_apart(groups: list[Group], begins: list[np.ndarray], ends: list[np.ndarray],
                 predicts: list[np.ndarray] | None = None) -> list[Group]:
    """The lines between `Eval begin...` and its end (`Eval samples: N`, else the next epoch's
    `Epoch e/E`) print the train bar's own shape (`step 10/10 - loss: ...`): they are the
    eval's (`val_*`), at the last train step before them; their batch count is no step.
    After `Predict begin...` the same lines are the prediction's: its metrics (if any) are
    `test_*`, and its bare bar lines (`step 428/428 [===] - 15ms/step`) count no step."""
    predicts = predicts or []
    if not begins and not predicts:
        return groups
    b = np.concatenate(begins + predicts)
    is_predict = np.concatenate([np.zeros(len(x), bool) for x in begins] + [np.ones(len(x), bool) for x in predicts])
    by_row = np.argsort(b, kind="stable")
    b, is_predict = b[by_row], is_predict[by_row]
    heads = [g.rows for g in groups if not g.values and "epoch" in g.counters]
    stops = np.sort(np.concatenate(ends + heads)) if ends or heads else np.empty(0, np.int64)
    at = np.searchsorted(stops, b, side="right")
    until = np.where(at < len(stops), stops[np.minimum(at, len(stops) - 1)] if len(stops) else 0,
                     np.iinfo(np.int64).max)
    out = []
    for g in groups:
        if g.parsed.stream in ("val", "test"):
            out.append(g)
            continue
        k = np.searchsorted(b, g.rows, side="right") - 1       # the last begin line before
        inside = (k >= 0) & (g.rows < until[np.maximum(k, 0)])
        if not g.values:
            # a bar line with no metric: no step inside a prediction; a counter alone inside an
            # eval (Coqui's `--> STEP: 3` over the eval batch's block) is the eval's batch, no step
            drop = inside & (is_predict[np.maximum(k, 0)] | ("epoch" not in g.counters))
            out.append(_rows_of(g, ~drop) if drop.any() else g)
            continue
        if not inside.any():
            out.append(g)
            continue
        if not inside.all():
            out.append(_rows_of(g, ~inside))
        for predict in (False, True):
            part = inside & (is_predict[np.maximum(k, 0)] == predict)
            if part.any():
                out.append(_eval_rows(_rows_of(g, part), "test" if predict else "val"))
    return out


def _eval_rows(ev: Group, stream: str) -> Group:
    """An eval's (or a prediction's) bar lines: `val_*` (`test_*`), at the last train step."""
    ev.parsed = dataclasses.replace(ev.parsed, stream=stream, period=None, counters={
        c: span for c, span in ev.parsed.counters.items() if c not in STEP_KINDS})
    ev.counters = {c: v for c, v in ev.counters.items() if c not in STEP_KINDS and c != "period"}
    # an eval's `avg_loss` (Coqui's EVAL PERFORMANCE: `avg_` + each key) is its loss: the mean
    # over its batches is what an eval reports
    _rename(ev, lambda c: c if c.lower() in ("lr", "learning rate") else f"{stream}_{c.removeprefix('avg_')}")
    return ev


def _rename(g: Group, name) -> None:
    """The group's columns under `name(column)`."""
    g.values = {name(k): v for k, v in g.values.items()}
    g.masks = {name(k): v for k, v in g.masks.items()}
    g.parsed = dataclasses.replace(g.parsed, values=[dataclasses.replace(v, column=name(v.column))
                                                     for v in g.parsed.values])


def _summaries_apart(groups: list[Group]) -> list[Group]:
    """An epoch's summary (`_as_eval`) beside the lines of its steps repeats the last step with
    the epoch's means: its columns become `epoch_*` (epoch metrics, never a step logged again).
    A log of summaries only keeps their names: they are its training values."""
    summary = [g for g in groups if g.parsed.stream == "summary"]
    if not summary:
        return groups
    steps = {c for g in groups if g.parsed.stream not in ("summary", "val", "test") for c in g.values}
    for g in summary:
        if steps & set(g.values):
            _rename(g, lambda c: f"epoch_{c}")
    return groups


def _parse(text: str) -> Parsed:
    """The line parsed, with the step its framework's catalogue entry names where the general
    reading took another counter (torchtune's `epoch|step|Loss:` inside a tqdm frame: the
    second counter, not the frame's `i/N`)."""
    parsed = parse(text)
    if not parsed.values:
        return parsed
    if not parsed.overflow:
        _as_eval(clean(text).strip(), parsed)
    if parsed.overflow:                 # the frame in front of a message is the progress line
        if parsed.overflow["step"]:
            return parsed               # the message's own step stays its own
        text = text[:parsed.overflow["start"]]
    d = progress.of_line(text.strip())
    if d is not None and d.id in progress.TRAIN_BESIDE_VAL:
        for v in parsed.values:
            v.column = v.column.removeprefix("eval_")
    lead = len(text) - len(text.lstrip())
    if d is not None and "batch" in d.pattern.groupindex and parsed.period is None:
        _batch_total(text, lead, d.pattern.search(text.strip()), parsed)
    if d is None or "step" not in d.pattern.groupindex:
        return parsed
    m = d.pattern.search(text.strip())
    if not m or m.group("step") is None:
        return parsed
    span = (m.start("step") + lead, m.end("step") + lead)
    kind = parsed.step_kind
    if kind is not None and parsed.counters[kind] == span:
        return parsed
    parsed.counters = {k: v for k, v in parsed.counters.items() if k not in STEP_KINDS}
    parsed.counters["step"] = span
    if "epoch" in d.pattern.groupindex and m.group("epoch") is not None:
        parsed.epoch = (m.start("epoch") + lead, m.end("epoch") + lead)
    return parsed


def _batch_total(text: str, lead: int, m: re.Match | None, parsed: Parsed) -> None:
    """The `/N` behind a count the catalogue names a batch (Paddle's `step  10/100`) but the
    general reading took for the step: an epoch's length, should the count restart."""
    if m is None or m.group("batch") is None:
        return
    s, e = m.start("batch") + lead, m.end("batch") + lead
    kind = parsed.step_kind
    total = re.match(r"/(\d+)", text[e:])
    if kind is not None and parsed.counters[kind] == (s, e) and total:
        parsed.period = (e + 1, e + 1 + len(total.group(1)))


_EVAL_NAMES = ("val", "eval", "test", "valid")


def _as_eval(text: str, parsed: Parsed) -> None:
    """A line the catalogue names an eval (torchtitan's `validate step: N  loss: X`) whose own
    words name no stream: its values are the eval's (`val_*`), never the step's train values
    again. One with an epoch and no step (fairseq's `epoch 001 | loss ... | num_updates N`, the
    epoch's means printed after its last update) is the epoch's summary (`summary_epochs`)."""
    if parsed.stream in ("val", "test") or any(v.column.lower().startswith(_EVAL_NAMES)
                                               for v in parsed.values):
        return              # its own names say it (nanoGPT's `train loss ..., val loss ...`)
    d = next((d for d in catalogue("eval") if d.search(text)), None)
    if d is None:
        return
    if "epoch" in d.pattern.groupindex and "step" not in d.pattern.groupindex:
        parsed.stream = "summary"
        return
    parsed.stream = "val"
    for v in parsed.values:
        if v.column.lower() not in ("lr", "learning rate"):
            v.column = f"val_{v.column}"


def _by_name_digits(cutter: _Cutter, rep: bytes, text: str, parsed: Parsed,
                    rows: np.ndarray) -> list[np.ndarray] | None:
    """The group's lines split by the digits of their metric names, or None when they are
    all the same: `l1_norm=` and `l2_norm=` are one shape, but two columns."""
    if len(rows) < 2:
        return None
    rep_runs = [m.span() for m in _RUN.finditer(rep)]
    at = _name_runs(rep_runs, text, parsed)
    if not at or cutter.first_run[rows].max() + at[-1] >= len(cutter.run_s):
        return None
    run = cutter.first_run[rows][:, None] + np.array(at)[None, :]
    pos = np.empty((len(rows), 2 * len(at)), dtype=cutter.run_s.dtype)
    pos[:, 0::2], pos[:, 1::2] = cutter.run_s[run], cutter.run_e[run]
    digits, _ = cutter.numbers_at(pos.ravel(), False)
    # the number and its length: `l01` and `l1` name two columns
    key = digits.reshape(len(rows), len(at)) * 64 + (pos[:, 1::2] - pos[:, 0::2])
    if (key == key[0]).all():       # the common case (`top1_acc`, `fp16`): one name on every line
        return None
    which = np.zeros(len(rows), dtype=np.int64)
    for column in key.T:            # a name's digits, then the next name's, as one id
        ids, n = _ids(column)
        which = _ids(which * n + ids)[0]
    parts = np.split(rows[np.argsort(which, kind="stable")], np.cumsum(np.bincount(which))[:-1])
    return sorted(parts, key=lambda part: part[0])        # in the order the file shows them


def _ids(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's rank among the distinct values, and their count: by a table where the
    values are small counts (no sort), by np.unique where not."""
    if values.dtype.kind == "i" or (np.isfinite(values).all() and (values == np.floor(values)).all()):
        small = values.astype(np.int64)
        if small.min() >= 0 and small.max() < 1 << 22:
            seen = np.zeros(int(small.max()) + 1, dtype=np.int64)
            seen[small] = 1
            rank = np.cumsum(seen) - 1
            return rank[small], int(rank[-1]) + 1
    uniq, inverse = np.unique(values, return_inverse=True)
    return inverse.ravel(), len(uniq)


def _name_runs(rep_runs: list[tuple[int, int]], text: str, parsed: Parsed) -> list[int]:
    """Which digit runs of the line are printed inside a metric's name (`l1` of `l1_norm`)."""
    names = [_byte_span(text, (v.name_start, v.start)) for v in parsed.values
             if v.name_start is not None and v.name_start < v.start]
    if not names:
        return []
    spans = [_byte_span(text, (v.start, v.end)) for v in parsed.values]
    spans += [_byte_span(text, span) for span in parsed.counters.values()]
    return [i for i, (s, e) in enumerate(rep_runs)
            if any(a <= s and e <= b for a, b in names) and not any(s < b and a < e for a, b in spans)]


def without_code(groups: list[Group]) -> list[Group]:
    """The groups less the lines of source code: the lines of code themselves, and the
    lines inside a dump of code (`val_loss = 0.0` among them looks like a log line)."""
    if not any(g.parsed.code for g in groups):
        return groups
    kept = [g for g in groups if not g.parsed.code]
    rows = np.concatenate([g.rows for g in groups if g.parsed.code])
    for first, last, lines in code.dumps(rows):
        inside = [code.inside(g.rows, first, last) for g in kept]
        # the stretch is a dump only where its code outnumbers the rest: a log that quotes
        # a few lines of code between its metric lines keeps them
        if sum(int(m.sum()) for m in inside) < lines:
            kept = [g if not m.any() else _rows_of(g, ~m) for g, m in zip(kept, inside)]
            kept = [g for g in kept if len(g.rows)]
    return kept


def _rows_of(group: Group, keep: np.ndarray) -> Group:
    """The group with only the rows where `keep` is true."""
    return Group(rows=group.rows[keep], parsed=group.parsed, text=group.text,
                 values={k: v[keep] for k, v in group.values.items()},
                 counters={k: v[keep] for k, v in group.counters.items()},
                 masks={k: v[keep] for k, v in group.masks.items()})


def _extract(cutter: _Cutter, rep: bytes, text: str, parsed: Parsed, rows: np.ndarray) -> Group:
    rep_runs = [m.span() for m in _RUN.finditer(rep)]
    group = Group(rows=rows, parsed=parsed, text=text)
    wanted: list[tuple[dict, str, tuple[int, int]]] = []     # (where, name, char span)
    for v in parsed.values:
        if v.const is not None:
            group.values[v.column] = np.full(len(rows), v.const)
        else:
            wanted.append((group.values, v.column, (v.start, v.end)))
    extra: dict[str, tuple[int, int] | None] = dict(parsed.counters)
    extra["epoch"] = parsed.epoch
    if parsed.batch:
        extra["batch_i"], extra["batch_n"] = parsed.batch
    if parsed.progress:
        extra["progress_i"], extra["progress_n"] = parsed.progress
    if parsed.period:
        extra["period"] = parsed.period
    if parsed.percent:
        extra["percent"] = parsed.percent
    if parsed.epoch_base is not None:
        group.counters["epoch_base"] = np.full(len(rows), float(parsed.epoch_base))
    if parsed.overflow:
        extra["overflow_scale"] = parsed.overflow["scale"]
        extra["overflow_rank"] = parsed.overflow["rank"]
        extra["overflow_prev_scale"] = parsed.overflow["prev_scale"]   # per line: a cascade's
    wanted += [(group.counters, kind, span) for kind, span in extra.items() if span is not None]
    cuts = []
    for where, name, span in wanted:
        bs, be = _byte_span(text, span)
        at = cutter.runs(rep_runs, (bs, be))
        if at is not None:
            cuts.append((bs, be, where, name, at, "," in text[span[0]:span[1]]))
    cuts.sort(key=lambda c: c[0])
    if not cuts:
        return group
    apart = all(a[1] <= b[0] for a, b in zip(cuts, cuts[1:]))
    if apart:
        # every token of every line in one array, in file order: one gather and one cast
        pos = cutter.spans([c[4] for c in cuts], rows)
        flat, valid = cutter.numbers_at(pos.ravel(), any(c[5] for c in cuts))
        values = flat.reshape(len(rows), len(cuts))
        valid = valid.reshape(len(rows), len(cuts)) if valid is not None else None
        for j, (_, _, where, name, _, _) in enumerate(cuts):
            _place(group, where, name, values[:, j], None if valid is None else valid[:, j])
    else:
        for _, _, where, name, at, commas in cuts:
            _place(group, where, name, *cutter.numbers_at(cutter.spans([at], rows).ravel(), commas))
    return group


def _place(group: Group, where: dict, name: str, values: np.ndarray, valid: np.ndarray | None) -> None:
    where[name] = values
    if valid is not None and where is group.values:
        group.masks[name] = valid
