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


def read_trainer_state(path: Path, source: Source) -> list[Series]:
    """Train, eval, predict and summary rows told apart; bare NaN/Infinity accepted."""
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
