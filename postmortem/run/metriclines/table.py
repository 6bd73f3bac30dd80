"""Rows of numbers under a header of names: values by position.

Ultralytics prints `Epoch GPU_mem box_loss cls_loss dfl_loss Instances Size` once and then
a tqdm frame per batch whose description is the row (`3/100 2.51G 1.234 ... 640: 100%|...`);
HF's notebook table (what unsloth's notebooks show) is `Step<TAB>Training Loss`, then `1<TAB>2.3456`.
Such a row names nothing: the header above it names its cells.

Two tables leave a cell empty, so that a row has fewer cells than its header and each cell is
named by where it stands (`aligned`): Chainer's and pytorch-pfn-extras' PrintReport (left-
justified under the header; an empty cell is a value not reported on that row) and ParlAI's
report (pandas, right-justified; an empty cell is a NaN, which its `float_formatter` prints as
""). Their dialects (`dialects/progress/chainer.py`, `parlai.py`) say how each header is known.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from postmortem.run.dialects.progress import chainer, dialect, parlai, ultralytics
from postmortem.run.metriclines.pairs import Parsed, Value, to_const
from postmortem.run.nonfinite import NONFINITE

_CELLS = re.compile(r"\t|\s{2,}")
# a cell's number: a count `i/N`, a value (a size's unit after it), or a non-finite value in
# any runtime's spelling (postmortem.run.nonfinite.NONFINITE: `-nan`, `+Inf`, `1.#QNAN`)
_CELL_NUMBER = re.compile(r"^(?:(?P<i>\d+)/\d+|(?P<v>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)[KMGT]?i?B?"
                          r"|(?P<n>" + NONFINITE + r"))$", re.I)
_NAME = re.compile(r"^[A-Za-z][\w()./-]*(?: [A-Za-z][\w()./-]*)*$")
_FRAME = re.compile(r"\|\s*(\d+)/(\d+) \[")      # the tqdm frame's batch i/N after the bar
_STEP_NAMES = {"step", "steps", "iter", "iteration", "global_step", "global step"}
LOOK_BACK = 64          # lines above a row searched for its header


def header_lines(shapes: Iterable[tuple[bytes, np.ndarray]]) -> np.ndarray:
    """The line numbers of the text's PrintReport headers, from its shapes (a shape's first
    line and all its line numbers): a header is printed once, and its rows run on far below."""
    found = [rows for rep, rows in shapes
             if (b"epoch" in rep or b"iteration" in rep) and b"  " in rep
             and chainer.is_print_report_header(rep.decode("utf-8", "replace"))]
    return np.sort(np.concatenate(found)) if found else np.empty(0, np.int64)


def lines_above(line_no: int, headers: np.ndarray) -> list[int]:
    """The lines above a row searched for its header, nearest first: `LOOK_BACK` of them, then
    the nearest PrintReport header further up."""
    near = list(range(line_no - 1, max(-1, line_no - 1 - LOOK_BACK), -1))
    at = int(np.searchsorted(headers, line_no)) - 1
    if at >= 0 and headers[at] < line_no - LOOK_BACK:
        near.append(int(headers[at]))
    return near


def _cells(text: str) -> list[tuple[str, int]]:
    """The cells of a line and where each starts, cut at a progress bar's `: 100%|`."""
    body = re.split(r":\s+\d+%\||\|", text, maxsplit=1)[0].rstrip(": ")
    out, pos = [], 0
    for part in _CELLS.split(body):
        start = body.index(part, pos) if part else pos
        pos = start + len(part)
        if part.strip():
            out.append((part.strip(), start + len(part) - len(part.lstrip())))
    return out


def _header(lines: Iterable[str], width: int) -> list[str] | None:
    """The nearest line above (last first) whose cells are `width` names."""
    for line in lines:
        cells = [c for c, _ in _cells(line)]
        if len(cells) == width and all(_NAME.match(c) and not _CELL_NUMBER.match(c) for c in cells):
            return cells
    return None


# YOLOv5's header (ultralytics/yolov5 train.py, v3.0-v6.2: `('%10s' * 8) % ('Epoch', 'gpu_mem', 'box',
# 'obj', 'cls', 'total', 'labels', 'img_size')`, v6.0 on without 'total'; v7.0 `('Epoch', 'GPU_mem',
# 'box_loss', 'obj_loss', 'cls_loss', 'Instances', 'Size')`): the short names are the loss's parts
_YOLOV5_LOSSES = {"box": "box_loss", "obj": "obj_loss", "cls": "cls_loss", "total": "total_loss"}


def _yolov5_names(names: list[str]) -> list[str]:
    """YOLOv5's header with its loss parts named as losses (v7.0's names), else `names`."""
    if len(names) < 5 or [n.lower() for n in names[:2]] != ["epoch", "gpu_mem"] or names[2:5] != ["box", "obj", "cls"]:
        return names
    return [_YOLOV5_LOSSES.get(n, n) if i >= 2 else n for i, n in enumerate(names)]


# torchrun's and accelerate's rank prefixes (`[rank0]:`, `[default0]:`): blanked, so that the
# positions stay the raw line's
_RANK = re.compile(r"\s*(?:\[default\d+\]|\[rank\s*\d+\]|\[\d+\])\s*:")
# PrintReport's `\033[J` before each row (erase to the end of the screen), not before its header
_ANSI_LEAD = re.compile(r"(?:\x1b\[[0-9;?]*[A-Za-z])+")
# pandas' `\` at the end of a wrapped table's lines (ParlAI's report wider than the terminal)
_WRAP = re.compile(r"\s\\\s*$")
_TOKEN = re.compile(r"\S+")


def row(text: str, above: Iterable[str]) -> Parsed | None:
    """The row's values named by the header in `above` (the lines before it, nearest first,
    read only for a row of numbers), or None when the line is no such row."""
    lead = _RANK.match(text)
    if lead:
        text = " " * lead.end() + text[lead.end():]
    above = list(above)
    aligned_row = aligned(text, above)
    if aligned_row is not None:
        return aligned_row
    cells = _cells(text)
    if len(cells) < 2 or not all(_CELL_NUMBER.match(c) for c, _ in cells):
        return None
    names = _header(above, len(cells))
    if (names is None or names[0].lower() != "epoch") and dialect("ultralytics.epoch").search(text):
        # an Ultralytics row with no header above (pasted from mid-run), or the validation bar's
        # (`Class Images Instances Box(P ...`, as wide): the trainer's own header names it
        names = ultralytics.header_of(len(cells))
    if names is None:
        return None
    names = _yolov5_names(names)
    out = Parsed()
    for name, (cell, start) in zip(names, cells):
        m = _CELL_NUMBER.match(cell)
        assert m is not None                 # every cell is a number (tested above)
        key = "i" if m.group("i") else "v" if m.group("v") is not None else "n"
        s, e = start + m.start(key), start + m.end(key)
        low = name.lower()
        if low == "epoch":
            out.epoch = (s, e)
        elif low in _STEP_NAMES:
            out.counters["step"] = (s, e)
        elif m.group("v") is not None:
            out.values.append(Value(name, s, e))
        elif m.group("n") is not None:
            out.values.append(Value(name, s, e, to_const(m.group("n"))))
    if out.epoch is not None:
        # Ultralytics prints `{epoch + 1}/{epochs}`, YOLOv5 `{epoch}/{epochs - 1}`
        out.epoch_base = 0 if "obj_loss" in names else 1
        frame = _FRAME.search(text)
        if frame:                            # each batch's running mean: a step of its own
            out.batch = (frame.span(1), frame.span(2))
    return out if out.values else None


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def aligned(text: str, above: list[str]) -> Parsed | None:
    """A row of a table whose cells stand under their header's names, some of them empty:
    PrintReport's (cells start where their names start; an empty one is not reported) or
    ParlAI's (cells end where their names end; an empty one is a NaN). None: no such row."""
    ansi = _ANSI_LEAD.match(text, len(text) - len(text.lstrip()))
    shift = 0
    if ansi:
        shift = ansi.end() - ansi.start()
        text = text[:ansi.start()] + " " * shift + text[ansi.end():]
    body = _WRAP.sub("", text)
    cells = _tokens(body)
    if not cells or not all(_CELL_NUMBER.match(c) for c, _, _ in cells):
        return None
    for j, line in enumerate(above):
        head = _tokens(_WRAP.sub("", _ANSI_LEAD.sub("", line)))
        if not head or all(_CELL_NUMBER.match(c) for c, _, _ in head):
            continue                          # a row above this one, or a blank line
        if chainer.is_print_report_header(line):
            at = {s: name for name, s, _ in head}
            named = [(at.get(s - shift), s, e) for _, s, e in cells]
            blanks: list[tuple[str, int]] = []
        elif parlai.is_report_header(line) and not shift:
            ends = {e: name for name, _, e in head}
            named = [(ends.get(e), s, e) for _, s, e in cells]
            said = {name for name, _, _ in named}
            blanks = [(name, e) for name, _, e in head if name not in said]
            stream = _parlai_stream(above[j + 1:j + 1 + LOOK_BACK])
            if stream:                        # `_run_eval`'s report: every name the eval's
                named = [(n and f"{stream}_{n}", s, e) for n, s, e in named]
                blanks = [(f"{stream}_{n}", e) for n, e in blanks]
        elif _header([line], len(head)) is not None:
            return None                       # another table's header: not one of these rows
        else:
            continue                          # a message between the rows (a progress bar)
        if any(name is None for name, _, _ in named):
            return None
        out = _aligned_values(text, [(n, s, e) for n, s, e in named if n is not None], blanks)
        if out is not None and named and named[0][0] and named[0][0].startswith(("val_", "test_")):
            out.stream = named[0][0].split("_", 1)[0]
        return out
    return None


# ParlAI's `_run_eval`: `logging.report(f'{datatype}:\n{nice_report(report)}\n')`, datatype
# `valid` or `test` (parlai/scripts/train_model.py v0.8.0..v1.7.2)
_PARLAI_EVAL = re.compile(r"(?:^|\|\s)(valid|test):\s*$")


def _parlai_stream(lines: list[str]) -> str | None:
    """`val` or `test` where the lines above a ParlAI table (its other blocks first) begin
    with an eval's `valid:` / `test:`, else None (a training report)."""
    for line in lines:
        head = _tokens(_WRAP.sub("", line))
        if not head or all(_CELL_NUMBER.match(c) for c, _, _ in head) or parlai.is_report_header(line):
            continue
        m = _PARLAI_EVAL.search(line.rstrip())
        return None if m is None else "val" if m.group(1) == "valid" else "test"
    return None


def _aligned_values(text: str, named: list[tuple[str, int, int]], blanks: list[tuple[str, int]]) -> Parsed | None:
    out = Parsed()
    for name, s, e in named:
        m = _CELL_NUMBER.match(text[s:e])
        assert m is not None                 # every cell is a number (tested above)
        if name == "epoch":
            out.epoch = (s, e)
        elif name.lower() in _STEP_NAMES:       # PrintReport's `iteration`: the step, said so
            out.counters["iteration" if name.lower() in ("iteration", "iter") else "step"] = (s, e)
        elif m.group("n") is not None:
            out.values.append(Value(name, s, e, to_const(m.group("n"))))
        else:
            out.values.append(Value(name, s, e))
    for name, e in blanks:                   # ParlAI's NaN, printed as nothing
        out.values.append(Value(name, e, e, float("nan")))
    return out if out.values else None
