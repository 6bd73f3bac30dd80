"""What the detectors share: a segment's effective history, groups of flagged points,
noise blocks, candidates cheap to find, trailing medians and a rolling mean in steps."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from pandas.api.indexers import BaseIndexer

from postmortem.diagnose.series import effective_history, even_gap, interval
from postmortem.run import RunLog

History = Callable[[int], pd.DataFrame]


def group(steps: np.ndarray, flagged: np.ndarray, gap: int) -> list[np.ndarray]:
    """Indices of flagged points, split where consecutive flags are more than `gap` apart."""
    idx = np.flatnonzero(flagged)
    if not len(idx):
        return []
    breaks = np.flatnonzero(np.diff(steps[idx]) > gap) + 1
    return np.split(idx, breaks)


def window_median(values: np.ndarray, lo: np.ndarray, at: np.ndarray) -> dict[int, float]:
    """Median of the finite values in [lo, i) for each index i of `at` (sparse points only)."""
    out = {}
    for i in at:
        v = values[lo[i]:i]
        v = v[np.isfinite(v)]
        out[int(i)] = np.median(v) if len(v) else np.nan
    return out


def history(log: RunLog, seg: int) -> pd.DataFrame:
    """The rows as the model lived them up to the end of segment `seg` (the first segment:
    its own rows)."""
    segments = log.frame.segment.to_numpy()
    return effective_history(log, seg) if seg else log.frame.iloc[:np.searchsorted(segments, 1)]


def segment_views(log: RunLog, histories: History | None = None) -> Iterator[tuple[int, pd.DataFrame]]:
    """(segment id, effective history frame); a detector's own rows are those of the
    history whose segment is the id.

    `histories(seg)` is the Context's cached one when given, so detectors share it."""
    histories = histories or (lambda seg: history(log, seg))
    segments = log.frame.segment.to_numpy()
    for seg in range(int(segments[-1]) + 1 if len(segments) else 0):
        yield seg, histories(seg)


def segment_ids(segments: np.ndarray) -> np.ndarray:
    """np.unique of the frame's segment column, which is sorted: its change points."""
    if len(segments) and bool((segments[1:] >= segments[:-1]).all()):
        return segments[np.r_[True, segments[1:] != segments[:-1]]]
    return np.unique(segments)


def block(steps: np.ndarray, window: int, gap: float | None = None) -> int:
    """Points per noise block: about one spike window's worth, at least 16. `gap`: the
    steps' interval when the caller has it."""
    if len(steps) < 2:
        return 16
    gap = max(interval(steps) if gap is None else gap, 1e-9)
    return int(min(max(16, window / gap), 1024))


def could_stand_out(values: np.ndarray, n: np.ndarray, noise: np.ndarray, sigma: float) -> np.ndarray:
    """The points that may stand `sigma` noises out of their window of the `n` points
    before them: a window's mean is at least its lowest value, and its points lie in the
    point's block of the longest window's length or the block before. Only these points
    need the window's mean and std; on a long calm run they are a few percent. Where the
    noise is unknown, every point may."""
    size = len(values)
    if size < 3 or not np.isfinite(noise).all():
        return np.arange(size)
    width = max(int(n.max()), 1)
    floor = _two_block_min(values, width)
    above = np.subtract(values, floor, out=floor)       # (in place: one large array less)
    maybe = np.flatnonzero(above >= np.multiply(noise, sigma))
    return maybe[n[maybe] > 0]


def _two_block_min(values: np.ndarray, width: int) -> np.ndarray:
    """At each point, the lowest value of its block of `width` points and the block before:
    at most the lowest of the `width` points before it."""
    size = len(values)
    full = size // width
    lowest = values[:full * width].reshape(full, width).min(axis=1)
    if size % width:
        lowest = np.r_[lowest, values[full * width:].min()]
    return np.repeat(np.minimum(lowest, np.r_[lowest[0], lowest[:-1]]), width)[:size]


def far_above_min(values: np.ndarray, k: int, ratio: float) -> np.ndarray:
    """A superset of the positive values more than `ratio` x the minimum of the `k` before
    them, cheap: against the lowest of the (at most two) blocks of `k` points that hold
    those k, 2% short of `ratio` (whatever log10's last bit), and beside a minimum too
    small to divide by. Not the first point (nothing before it)."""
    low = _two_block_min(values, k)
    with np.errstate(invalid="ignore", over="ignore"):
        out = (values > low * (0.98 * ratio)) | (low < np.finfo(float).tiny)
    out[:1] = False
    return out


def trailing_median(values: np.ndarray, k: int, where: np.ndarray | None = None) -> np.ndarray:
    """Median of the k points before each point (fewer at the start); only at the indices
    `where` when given (NaN elsewhere)."""
    out = np.full(len(values), np.nan)
    idx = np.arange(len(values)) if where is None else where
    full = idx[idx >= k]
    if len(full):
        out[full] = np.median(sliding_window_view(values, k)[full - k], axis=1)
    for i in idx[(idx >= 1) & (idx < k)]:
        out[i] = np.median(values[:i])
    return out


def spans(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The sorted indices in the union of [starts[j], ends[j]] (inclusive)."""
    size = int(ends.max()) + 2 if len(ends) else 1
    edge = np.zeros(size, dtype=np.int64)
    np.add.at(edge, starts, 1)
    np.add.at(edge, ends + 1, -1)
    return np.flatnonzero(np.cumsum(edge[:-1]) > 0)


def rolling_mean(steps: np.ndarray, values: np.ndarray, window: int, even: int | None = None) -> np.ndarray:
    """pandas' rolling mean over the points in (step - window, step]. On a log that steps
    evenly by d, those are the last ceil(window / d) points: pandas' count window gives the
    same sums in the same order, without the time index (half the time on a million).
    `even`: the steps' even_gap when the caller has it."""
    d = even_gap(steps) if even is None else even
    if d and window > 0:
        return pd.Series(values, copy=False).rolling(_Last(window_size=-(-window // d)), min_periods=1
                                                     ).mean().to_numpy()
    return pd.Series(values, index=pd.to_timedelta(steps, unit="s")).rolling(
        f"{window}s", min_periods=1).mean().to_numpy()


class _Last(BaseIndexer):
    """pandas' count window (the last `window_size` points up to each one): the same
    bounds as its FixedWindowIndexer, made by slices instead of two clips."""

    def get_window_bounds(self, num_values=0, min_periods=None, center=None, closed=None, step=None):
        end = np.arange(1, num_values + 1, dtype=np.int64)
        start = np.arange(1 - self.window_size, num_values + 1 - self.window_size, dtype=np.int64)
        start[:max(min(self.window_size - 1, num_values), 0)] = 0
        return start, end
