"""Windowed statistics in steps (not rows), with NaN kept out of every window."""

from __future__ import annotations

from typing import Literal

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


def segment_rows(segments: np.ndarray, segment: int) -> slice | np.ndarray:
    """The rows of one segment: a slice of the frame's sorted segment column (no mask over
    a million rows), else a mask."""
    n = len(segments)
    if n and segments[0] <= segments[-1] and bool((segments[1:] >= segments[:-1]).all()):
        return slice(int(np.searchsorted(segments, segment, "left")), int(np.searchsorted(segments, segment, "right")))
    return segments == segment


def shifted(steps: np.ndarray, offset: int, side: Literal["left", "right"] = "left",
            even: int | None = None) -> np.ndarray:
    """`np.searchsorted(steps, steps + offset, side)`: for each point, the first index at or
    after (`left`) or past (`right`) its step + `offset`. Most logs step evenly; then it is
    arithmetic, several times faster than the search on a million points. `even`: the
    steps' even_gap when the caller has it."""
    n = len(steps)
    d = even_gap(steps) if even is None else even
    if d:
        q = offset // d if side == "right" else -(-offset // d)   # floor for right, ceil for left
        k = q + (side == "right")
        out = np.arange(k, n + k, dtype=np.int64)       # i + k, clipped to [0, n] by slices
        out[:min(max(-k, 0), n)] = 0
        out[max(n - k, 0):] = n
        return out
    return np.searchsorted(steps, steps + offset, side=side)


def even_gap(steps: np.ndarray) -> int:
    """The gap between consecutive steps of a log that steps evenly (integer steps, more
    than two), else 0."""
    return spacing(steps)[0]


def spacing(steps: np.ndarray) -> tuple[int, float]:
    """(even_gap, interval) of the steps from one pass over them: a detector asks both
    several times of the same million steps."""
    n = len(steps)
    if n < 2:
        return 0, float("nan")
    gaps = np.diff(steps)
    if not bool((gaps == gaps[0]).all()):
        return 0, float(np.median(gaps))
    d = int(gaps[0]) if n > 2 and steps.dtype.kind in "iu" and gaps[0] > 0 else 0
    return d, float(gaps[0])


def window_stats(steps: np.ndarray, values: np.ndarray, window: int, at: np.ndarray | None = None,
                 lo: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, std and count of the finite values in [step - window, step) for every point;
    with `at` (sorted indices), for those points only, one entry per index of `at`.
    `lo`: `shifted(steps, -window)` when the caller has it (used where every value is finite)."""
    finite = np.isfinite(values)
    every = bool(finite.all())
    s, v = (steps, values) if every else (steps[finite], values[finite])
    # an offset near the values keeps the running sums well conditioned: the median of at
    # most ~4096 evenly spaced values is as good as the median of all of them for that
    offset = np.median(v[::max(1, len(v) // 4096)]) if len(v) else 0.0
    # The running sums of v - offset and of its square in one pass: as the real and
    # imaginary parts of one complex cumsum (each part is added on its own, in order, so
    # the sums are the same to the last bit; the two chains of additions overlap)
    sums = np.zeros(len(v) + 1, dtype=np.complex128)
    np.subtract(v, offset, out=sums.real[1:])
    np.square(sums.real[1:], out=sums.imag[1:])
    np.cumsum(sums[1:], out=sums[1:])
    c1, c2 = sums.real, sums.imag
    if every:                   # the usual case: every point has a value
        hi = np.arange(len(steps)) if at is None else at
        lo = shifted(steps, -window) if lo is None else lo
        lo = lo if at is None else lo[at]
    else:
        where = steps if at is None else steps[at]
        hi = np.searchsorted(s, where, side="left")
        lo = np.searchsorted(s, where - window, side="left")
    count = (hi - lo).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (c1[hi] - c1[lo]) / count
        var = (c2[hi] - c2[lo]) / count - mean ** 2
        std = np.sqrt(np.maximum(var * count / np.maximum(count - 1, 1), 0))
    return mean + offset, std, count


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


def widen(steps: np.ndarray, window: int, points: int, gap: float | None = None) -> int:
    """A window in steps, widened so that a sparse log still has `points` points in it.
    `gap`: the steps' interval when the caller has it."""
    if len(steps) < 2:
        return window
    return int(max(window, points * (interval(steps) if gap is None else gap)))


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
    d = np.empty(n)
    np.abs(np.diff(values), out=d[1:])
    d[0] = d[1]
    full = n // block
    per = row_medians(d[:full * block].reshape(full, block))
    if n % block:
        per = np.r_[per, row_medians(d[full * block:].reshape(1, -1))]
    per = per * (1.4826 / np.sqrt(2))
    if n % block and n > block:                 # a short last block borrows the one before
        per[-1] = max(per[-1], per[-2])
    both = np.maximum(per, np.r_[per[0], per[:-1]])
    return np.repeat(both, block)[:n]


def row_medians(rows: np.ndarray) -> np.ndarray:
    """`np.median(rows, axis=1)` of rows without NaN, to the last bit: a sort of many short
    rows is several times faster than numpy's partition (which also looks for NaN)."""
    s = np.sort(rows, axis=1)
    h = rows.shape[1] // 2
    return s[:, h] if rows.shape[1] % 2 else (s[:, h - 1] + s[:, h]) / 2
