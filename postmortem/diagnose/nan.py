"""Tree B's first question: which logged steps are NaN or Inf (or a masked NaN)? And which
of them are a loss scaler's overflow, a step it skipped on purpose, not a broken model."""

from __future__ import annotations

import numpy as np

from postmortem.run import RunLog

WATCHED = ("loss", "grad_norm")


def _nonfinite(f, name: str, log: RunLog) -> np.ndarray:
    if name not in f:
        return np.zeros(len(f), dtype=bool)
    col = f[name]
    # a float column as it is (a missing value is NaN, not inf): no converted copy
    values = col.to_numpy() if col.dtype == np.float64 else col.to_numpy(dtype=float, na_value=0.0)
    return log.nan_mask(name) | np.isinf(values)


def nan_rows(log: RunLog) -> np.ndarray:
    """Rows where the training loss or grad norm was logged non-finite, Megatron counted
    NaN iterations, or a loss of exactly 0.0 sits beside a NaN grad norm (a masked NaN)."""
    f = log.frame
    bad = np.zeros(len(f), dtype=bool)
    for name in WATCHED:
        bad |= _nonfinite(f, name, log)
    if "nan_iterations" in f:
        bad |= f["nan_iterations"].fillna(0).to_numpy() > 0
    if "loss" in f and "grad_norm" in f:
        bad |= (f["loss"].to_numpy() == 0.0) & log.nan_mask("grad_norm")
    return bad


def has_scaler(log: RunLog) -> bool:
    """A dynamic loss scaler is at work: its scale or skips are logged, or the run is fp16."""
    f = log.frame
    return log.dtype == "fp16" or any(c in f and f[c].notna().any() for c in ("loss_scale", "skipped", "overflows"))


def skip_counts(log: RunLog) -> np.ndarray:
    """Steps the scaler skipped, per row: `skipped` per interval (a cumulative counter,
    DeepSpeed's, is differenced) plus overflow lines counted between rows."""
    f = log.frame
    out = np.zeros(len(f))
    if "skipped" in f:
        s = f["skipped"].to_numpy(dtype=float, na_value=np.nan)
        fin = np.isfinite(s)
        v = s[fin]
        # a text log's counter is per interval as the reader gives it (it differences DeepSpeed's
        # own cumulative one; Megatron's resets every line): a cascade that grows until the run
        # stops (1, 2, 4, 8 skips per line) is no cumulative count
        read = bool((log.source.extras.get("series_dialects") or {}).get("skipped")) if log.source else False
        if (not read and len(v) > 2 and v[-1] > v[0] and np.all(np.diff(v) >= 0)
                and (v[v > 0].size == v[np.argmax(v > 0):].size)):
            d = np.diff(v, prepend=v[0])        # a counter that only grows: cumulative
            s = np.zeros(len(f))
            s[fin] = d
        out += np.nan_to_num(s)
    if "overflows" in f and not ("skipped" in f and f["skipped"].notna().any()):
        out += np.nan_to_num(f["overflows"].to_numpy(dtype=float, na_value=np.nan))
    return out


def not_engaged(log: RunLog) -> np.ndarray:
    """Rows where the log says no step was skipped (its own skipped counter reads 0) under a
    scale that never moved: no dynamic scaler at work there (Megatron's bf16 print of
    `loss scale: 1.0 | number of skipped iterations: 0`), so a non-finite grad norm on such
    a row is a NaN of the grad norm, not a skipped step."""
    f = log.frame
    if "skipped" not in f or "loss_scale" not in f:
        return np.zeros(len(f), dtype=bool)
    scale = f.loss_scale.to_numpy(dtype=float, na_value=np.nan)
    scale = scale[np.isfinite(scale)]
    if not len(scale) or bool((scale != scale[0]).any()):
        return np.zeros(len(f), dtype=bool)
    return f.skipped.to_numpy(dtype=float, na_value=np.nan) == 0


def scaler_idle(log: RunLog) -> bool:
    """The log says no scaler is at work: a scale that never moved, and its own skipped
    counter at 0 on every line that prints it."""
    f = log.frame
    said = f.skipped.notna().to_numpy() if "skipped" in f else np.zeros(len(f), dtype=bool)
    return bool(said.any() and not_engaged(log)[said].all())


def overflow_rows(log: RunLog) -> np.ndarray:
    """Rows where only the grad norm is non-finite (the loss is finite or not logged) in a
    run with a loss scaler: the scaler found inf in the gradients and skipped the step."""
    f = log.frame
    # An unknown dtype: a skipped step if the loss stays finite (an inf grad norm applied by
    # an optimizer without a scaler turns the weights, and so the next losses, non-finite).
    unknown = log.dtype is None and "loss" in f
    if "grad_norm" not in f or not (has_scaler(log) or unknown):
        return np.zeros(len(f), dtype=bool)
    gn_bad = _nonfinite(f, "grad_norm", log) & ~not_engaged(log)
    if not gn_bad.any():                # (the usual case: nothing below can add a row)
        return gn_bad
    if unknown and not has_scaler(log):
        loss = f["loss"].to_numpy(dtype=float, na_value=np.nan)
        logged = np.flatnonzero(~np.isnan(loss) | log.nan_mask("loss"))
        for i in np.flatnonzero(gn_bad):
            after = loss[logged[logged > i][:3]]
            gn_bad[i] = len(after) > 0 and bool(np.isfinite(after).all())
    if "loss" in f:
        loss = f["loss"].to_numpy(dtype=float, na_value=np.nan)
        # a loss of exactly 0.0 beside a NaN grad norm is a masked NaN, not a skip
        unlogged = f["loss"].isna().to_numpy() & ~log.nan_mask("loss")
        gn_bad &= (np.isfinite(loss) & (loss != 0.0)) | unlogged
    return gn_bad
