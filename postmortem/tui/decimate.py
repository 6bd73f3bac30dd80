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
        chosen = np.union1d(chosen, keep)
    return chosen
