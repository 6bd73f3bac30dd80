"""Section 1 of the post-mortem: the incident's numbers, computed from the run only."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd

from postmortem.diagnose.context import Context
from postmortem.diagnose.detectors.event import Event
from postmortem.diagnose.models import Symptoms
from postmortem.diagnose.series import between, ema


def _value_at(rows: pd.DataFrame, name: str, step: int) -> Any:
    """The last value of `name` at `step`: a float (None where not finite), or the text of a
    text column; Symptoms' fields (validated) say which each is."""
    if name not in rows:
        return None
    at = between(rows, step, step)[name]
    if not len(at):
        return None
    v = at.iloc[-1]
    if isinstance(v, str):
        return v
    return float(v) if np.isfinite(v) else None


def symptoms(ctx: Context, event: Event) -> Symptoms:
    h = ctx.history(event.segment)
    step = event.step
    before = between(h, step - 500, step - 1)
    pre = ema(before.loss.to_numpy()) if "loss" in h else None
    peak_loss = event.peak if event.metric == "loss" and np.isfinite(event.peak) else None
    if event.kind == "nan":
        peak_loss = None
    elif peak_loss is None and "loss" in h:      # a grad-norm or loss-scale peak: the loss logged there
        peak_loss = _value_at(h, "loss", event.peak_step)
    recovery: float | Literal["did not recover"] | None = None
    if "loss" in h:
        # the loss at peak + recovery_window; a sparse log gives the nearest point that is not far past it
        w = ctx.th.recovery_window
        later = between(h, event.peak_step + w, event.peak_step + 2 * w)
        if not np.isfinite(later.loss).any():
            later = between(h, event.peak_step + 1, event.peak_step + w).iloc[::-1]
        later = later[np.isfinite(later.loss)]
        ok = ctx.recovered(event) if event.kind == "spike" and event.metric == "loss" else bool(len(later))
        if event.kind == "divergence":
            ok = False
        recovery = float(later.loss.iloc[0]) if ok and len(later) else "did not recover"
        if ctx.recovery_unknown(event):
            recovery = None             # the log ends at its peak: nothing says either way
    batch = _value_at(h, "batch_index", step)
    tokens = _value_at(h, "unusual_tokens", step)
    return Symptoms(
        spike_step=step, pre_spike_loss_ema50=pre, peak_loss=peak_loss, peak_step=event.peak_step,
        recovery_loss=recovery, grad_norm_pre_clip=_value_at(h, "grad_norm", step),
        lr=_value_at(h, "lr", step), dtype=ctx.facts.dtype,
        batch_index=int(batch) if isinstance(batch, float) else None,
        unusual_tokens=tokens if isinstance(tokens, str) else None)
