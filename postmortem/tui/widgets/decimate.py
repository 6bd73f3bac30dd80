"""Long series drawn in a few points per column, every spike point kept."""

from __future__ import annotations

import numpy as np


def decimate(steps: np.ndarray, values: np.ndarray, width: int, keep: np.ndarray | None = None,
             per_column: int = 2) -> np.ndarray:
    """Indices to draw: each column's min and max (non-finite kept too), plus `keep`."""
    n = len(steps)
    if n <= width * per_column:
        return np.arange(n)
    bins = np.minimum(((steps - steps[0]) * width) // max(1, steps[-1] - steps[0] + 1), width - 1)
    starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
    finite = np.where(np.isfinite(values), values, np.nan)
    lo = np.fmin.reduceat(np.nan_to_num(finite, nan=np.inf), starts)
    hi = np.fmax.reduceat(np.nan_to_num(finite, nan=-np.inf), starts)
    idx = np.arange(n)
    seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    pick = (finite == lo[seg]) | (finite == hi[seg]) | ~np.isfinite(values)
    chosen = idx[pick]
    # one point per tie is enough: keep the first of equal neighbours within a column
    chosen = chosen[np.r_[True, (seg[chosen][1:] != seg[chosen][:-1]) | (values[chosen][1:] != values[chosen][:-1])]]
    if keep is not None and len(keep):
        # sorted and unique as np.union1d makes them, without its import of numpy.ma
        # (~15 ms of the dashboard's first frame)
        both = np.sort(np.concatenate([chosen, keep]))
        chosen = both[np.r_[True, both[1:] != both[:-1]]]
    return chosen


def with_breaks(steps: np.ndarray, values: np.ndarray, typical: float,
                width: int) -> tuple[np.ndarray, np.ndarray]:
    """The points to draw as one line, with a NaN (where plotext lifts the pen) at each hole
    in the log: two points further apart than 20 times the run's usual spacing and two
    columns, say a pasted snippet's jump or a lost stretch of the log. Non-finite values
    stay NaN: the line is not drawn through a NaN step either."""
    values = np.where(np.isfinite(values), values, np.nan)
    if len(steps) < 2:
        return steps.astype(float), values
    hole = max(20 * typical, 2 * (steps[-1] - steps[0]) / max(1, width))
    at = np.flatnonzero(np.diff(steps) > hole) + 1
    return np.insert(steps.astype(float), at, np.nan), np.insert(values, at, np.nan)
