"""Tree B's first question: is any logged loss or grad norm NaN or Inf?"""

from __future__ import annotations

import numpy as np

from postmortem.diagnose.models import Check, Incident, Symptoms
from postmortem.run import RunLog

WATCHED = ("loss", "grad_norm")


def nan_rows(log: RunLog) -> np.ndarray:
    """Rows where the training loss or grad norm was logged non-finite, Megatron counted
    NaN iterations, or a loss of exactly 0.0 sits beside a NaN grad norm (a masked NaN)."""
    f = log.frame
    bad = np.zeros(len(f), dtype=bool)
    for name in WATCHED:
        if name in f:
            bad |= log.nan_mask(name) | np.isinf(f[name].to_numpy())
    if "nan_iterations" in f:
        bad |= f["nan_iterations"].fillna(0).to_numpy() > 0
    if "loss" in f and "grad_norm" in f:
        bad |= (f["loss"].to_numpy() == 0.0) & log.nan_mask("grad_norm")
    return bad


nonfinite_rows = nan_rows


def _ema(values: np.ndarray, span: int = 50) -> float | None:
    values = values[np.isfinite(values)]
    if not len(values):
        return None
    alpha = 2.0 / (span + 1)
    ema = values[0]
    for v in values[1:]:
        ema = alpha * v + (1 - alpha) * ema
    return float(ema)


def _at(log: RunLog, name: str, row: int) -> float | None:
    if name not in log.frame:
        return None
    v = log.frame[name].iloc[row]
    return float(v) if np.isfinite(v) else None


def nan_incidents(log: RunLog) -> tuple[Check, list[Incident]]:
    """One incident per run of consecutive non-finite rows within a segment."""
    bad = nonfinite_rows(log)
    frame = log.frame
    check = Check(id="B1", question="Is any logged loss or grad norm NaN or Inf?",
                  status="pass", detail="every logged loss and grad norm is finite")
    present = [n for n in WATCHED if n in frame]
    if not present:
        check.status, check.detail = "skipped", "the log has neither loss nor grad norm"
        return check, []
    if not bad.any():
        return check, []
    seg = frame["segment"].to_numpy()
    step = frame["step"].to_numpy()
    starts = np.flatnonzero(bad & ~np.r_[False, bad[:-1] & (seg[1:] == seg[:-1])])
    incidents = []
    loss = frame["loss"].to_numpy() if "loss" in frame else np.full(len(frame), np.nan)
    for row in starts:
        in_seg = seg == seg[row]
        before = in_seg & (step < step[row]) & (step >= step[row] - 50)
        after = in_seg & (step >= step[row] + 50) & np.isfinite(loss)
        recovery = float(loss[after][0]) if after.any() else "did not recover"
        batch = _at(log, "batch_index", row)
        incidents.append(Incident(kind="nan", step=int(step[row]), symptoms=Symptoms(
            spike_step=int(step[row]),
            pre_spike_loss_ema50=_ema(loss[before]),
            peak_loss=None, peak_step=int(step[row]),
            recovery_loss=recovery,
            grad_norm_pre_clip=_at(log, "grad_norm", row),
            lr=_at(log, "lr", row), dtype=log.dtype,
            batch_index=int(batch) if batch is not None else None)))
    first = incidents[0].step
    check.status = "fail"
    check.detail = (f"{int(bad.sum())} logged step(s) non-finite, first at step {first}"
                    f" ({len(incidents)} run(s) of consecutive steps)")
    return check, incidents
