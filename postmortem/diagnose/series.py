"""Windowed statistics in steps (not rows), with NaN kept out of every window."""

from __future__ import annotations

import numpy as np
import pandas as pd

from postmortem.run import RunLog


def effective_history(log: RunLog, segment: int) -> pd.DataFrame:
    """The rows as the model lived them up to the end of `segment`: after a resume from
    step s, the earlier segments contribute their steps before s only."""
    frame = log.frame
    parts = []
    start = None
    for seg in range(segment, -1, -1):
        rows = frame[frame.segment == seg]
        if start is not None:
            rows = rows[rows.step < start]
        if len(rows):
            parts.append(rows)
            start = rows.step.iloc[0] if start is None else min(start, rows.step.iloc[0])
    return pd.concat(parts[::-1]) if parts else frame.iloc[:0]


def shifted(steps: np.ndarray, offset: int, side: str = "left") -> np.ndarray:
    """`np.searchsorted(steps, steps + offset, side)`: for each point, the first index at or
    after (`left`) or past (`right`) its step + `offset`. Most logs step evenly; then it is
    arithmetic, several times faster than the search on a million points."""
    n = len(steps)
    if n > 2 and steps.dtype.kind in "iu":
        d = int(steps[1] - steps[0])
        if d > 0 and int(steps[-1] - steps[0]) == d * (n - 1) and bool((np.diff(steps) == d).all()):
            q = offset // d if side == "right" else -(-offset // d)   # floor for right, ceil for left
            return np.clip(np.arange(n, dtype=np.int64) + q + (side == "right"), 0, n)
    return np.searchsorted(steps, steps + offset, side=side)


def window_stats(steps: np.ndarray, values: np.ndarray, window: int, at: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, std and count of the finite values in [step - window, step) for every point;
    with `at` (indices), the mean and std of those points only (NaN elsewhere)."""
    finite = np.isfinite(values)
    s, v = steps[finite], values[finite]
    # an offset near the values keeps the running sums well conditioned: the median of at
    # most ~4096 evenly spaced values is as good as the median of all of them for that
    offset = np.median(v[::max(1, len(v) // 4096)]) if len(v) else 0.0
    c1 = np.concatenate([[0.0], np.cumsum(v - offset)])
    c2 = np.concatenate([[0.0], np.cumsum((v - offset) ** 2)])
    if finite.all():            # the usual case: every point has a value
        hi, lo = np.arange(len(steps)), shifted(steps, -window)
    else:
        hi = np.searchsorted(s, steps, side="left")
        lo = np.searchsorted(s, steps - window, side="left")
    n = (hi - lo).astype(np.float64)
    if at is not None:
        hi, lo, count = hi[at], lo[at], n[at]
    else:
        count = n
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (c1[hi] - c1[lo]) / count
        var = (c2[hi] - c2[lo]) / count - mean ** 2
        std = np.sqrt(np.maximum(var * count / np.maximum(count - 1, 1), 0))
    if at is None:
        return mean + offset, std, n
    full_mean, full_std = np.full(len(steps), np.nan), np.full(len(steps), np.nan)
    full_mean[at], full_std[at] = mean + offset, std
    return full_mean, full_std, n


def ema(values: np.ndarray, span: int = 50) -> float | None:
    """The exponential moving average (span 50: alpha 2/51) at the last finite value."""
    v = values[np.isfinite(values)]
    if not len(v):
        return None
    return float(pd.Series(v).ewm(span=span, adjust=False).mean().iloc[-1])


def interval(steps: np.ndarray) -> float:
    """The typical number of steps between two logged points (the median gap); a log that
    steps evenly says so without a median of a million gaps."""
    gaps = np.diff(steps)
    if len(gaps) and bool((gaps == gaps[0]).all()):
        return float(gaps[0])
    return float(np.median(gaps))


def widen(steps: np.ndarray, window: int, points: int) -> int:
    """A window in steps, widened so that a sparse log still has `points` points in it."""
    if len(steps) < 2:
        return window
    return int(max(window, points * interval(steps)))


def between(frame: pd.DataFrame, lo: float, hi: float) -> pd.DataFrame:
    """Rows with lo <= step <= hi of a frame sorted by step, by position (no mask)."""
    steps = frame.step.to_numpy()
    return frame.iloc[np.searchsorted(steps, lo, "left"):np.searchsorted(steps, hi, "right")]


def step_noise(values: np.ndarray, block: int = 64) -> np.ndarray:
    """The series' own step-to-step noise at every point: 1.4826 MAD of the differences
    between consecutive values over sqrt 2 (the std of white noise on a trend), per block
    of `block` points, the larger of a point's block and the one before (a spike moves a
    median little; a block of a calm stretch does not hide the noisier one beside it).
    `values` must be finite."""
    n = len(values)
    if n < 3:
        return np.full(n, np.nan)
    d = np.abs(np.diff(values, prepend=values[0]))
    d[0] = d[1]
    full = n // block
    per = np.median(d[:full * block].reshape(full, block), axis=1)   # no NaN in d: plain median
    if n % block:
        per = np.r_[per, np.median(d[full * block:])]
    per = per * (1.4826 / np.sqrt(2))
    if n % block and n > block:                 # a short last block borrows the one before
        per[-1] = max(per[-1], per[-2])
    both = np.maximum(per, np.r_[per[0], per[:-1]])
    return np.repeat(both, block)[:n]
