"""Tree B's first question: which logged steps are NaN or Inf (or a masked NaN)?"""

from __future__ import annotations

import numpy as np

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

