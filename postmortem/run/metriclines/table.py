"""Rows of numbers under a header of names: values by position.

Ultralytics prints `Epoch GPU_mem box_loss cls_loss dfl_loss Instances Size` once and then
a tqdm frame per batch whose description is the row (`3/100 2.51G 1.234 ... 640: 100%|...`);
HF's notebook table (what unsloth's notebooks show) is `Step<TAB>Training Loss`, then `1<TAB>2.3456`.
Such a row names nothing: the header above it names its cells.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from postmortem.run.dialects.progress import dialect, ultralytics
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


def row(text: str, above: Iterable[str]) -> Parsed | None:
    """The row's values named by the header in `above` (the lines before it, nearest first,
    read only for a row of numbers), or None when the line is no such row."""
    lead = _RANK.match(text)
    if lead:
        text = " " * lead.end() + text[lead.end():]
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
