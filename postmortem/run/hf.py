"""Hugging Face Trainer: `trainer_state.json` and console dict lines."""

from __future__ import annotations

import json
import math
from pathlib import Path

from postmortem.run.assemble import Collector, Series, to_number
from postmortem.run.model import RunReadError, Source

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


def read_trainer_state(path: Path, source: Source) -> list[Series]:
    """Train, eval, predict and summary rows told apart; bare NaN/Infinity accepted."""
    state: dict = {}
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
        values = {k: v for k, v in row.items() if k not in ("step",)}
        if kind == "eval":
            values = {k: v for k, v in values.items() if k != "epoch"}
        out.add(step, values)
        loss, gn = to_number(row.get("loss")), to_number(row.get("grad_norm"))
        if loss == 0.0 and gn is not None and math.isnan(gn):
            source.warn(f"step {step}: loss 0.0 beside a NaN grad_norm (a NaN loss masked as 0?)")
    if extras.get("rows_without_step"):
        source.warn(f"{len(extras['rows_without_step'])} predict/test row(s) have no step; kept "
                    f"out of the table")
    for key in ("max_steps", "logging_steps", "eval_steps", "save_steps", "global_step",
                "train_batch_size", "num_train_epochs"):
        if key in state:
            extras[key] = state[key]
    source.warn(HIDDEN_NAN_NOTE)
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
