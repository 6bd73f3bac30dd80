"""Which step each metric line belongs to, from the line's own counter.

Preference: `global_step`, `step`, `iteration N/M`, `iter`, `num_updates`, a tqdm
counter, a leading integer; then `Epoch [e][i/N]` as (e - first epoch)*N+i, so the
first epoch's batches are the first steps whether the family counts epochs from 0 or
from 1; then the epoch. A line without a counter of the file's finest kind (an
`[step=N]` header's indented lines, an eval line, an epoch summary) belongs to the
last step before it; one before any counter to the first step after it. A file with
no counter at all is read by the ordinal of its train lines, with a warning.
"""

from __future__ import annotations

import numpy as np

from postmortem.run.model import Source

# The counters a line may carry, in the order of preference for its step.
# `batch`: a batch counted in words beside an epoch, without its `/N` (`metriclines.epochwords`).
STEP_KINDS = ("global_step", "step", "iteration", "iter", "num_updates", "tqdm", "lead", "batch")


def ffill(values: np.ndarray) -> np.ndarray:
    """Each NaN takes the last finite value before it (NaN before the first)."""
    idx = np.where(np.isfinite(values), np.arange(len(values)), -1)
    np.maximum.accumulate(idx, out=idx)
    out = np.where(idx >= 0, values[np.maximum(idx, 0)], np.nan)
    return out


def bfill(values: np.ndarray) -> np.ndarray:
    """Each NaN takes the first finite value after it (NaN after the last)."""
    return ffill(values[::-1])[::-1]


def own_steps(counters: dict[str, np.ndarray], n: int, source: Source) -> tuple[np.ndarray, str]:
    """Each line's own step (NaN where it has none at the file's finest kind), and that kind."""
    nan = np.full(n, np.nan)
    step = nan.copy()
    kinds = []
    for kind in STEP_KINDS:
        col = counters.get(kind)
        if col is not None and np.isfinite(col).any():
            fill = np.isnan(step) & np.isfinite(col)
            step[fill] = col[fill]
            kinds.append(kind)
    epoch = counters.get("epoch", nan)
    if kinds and np.isfinite(epoch).any() and not (np.isfinite(epoch) & np.isfinite(step)).any():
        epoch = ffill(epoch)       # `Epoch e/E` on a line of its own before its batches (Paddle hapi)
    if kinds:
        restart = _restarts_with_epoch(step, epoch) or _same_step_each_epoch(step, epoch)
        if restart:
            period = counters.get("period", nan)
            k = np.nanmax(period) if np.isfinite(period).any() else np.nanmax(step) + 1
            base = epoch_base(epoch, counters.get("epoch_base"))
            has = np.isfinite(step) & np.isfinite(epoch)
            step[has] = (epoch[has] - base) * k + step[has]
            said = f"(epoch - {base}) x {int(k)} + {kinds[0]}" if base else f"epoch x {int(k)} + {kinds[0]}"
            source.warn(f"the {kinds[0]} counter starts again at every epoch: step = {said}")
            return step, said
        return step, kinds[0]
    bi, bn = counters.get("batch_i", nan), counters.get("batch_n", nan)
    pct = counters.get("percent", nan)
    if np.isfinite(pct).any() and not np.isfinite(bi).any():
        # `Epoch 1 complete [10%]`: a hundredth of an epoch is the unit
        base = epoch_base(epoch, counters.get("epoch_base"))
        return (epoch - base) * 100 + pct, f"(epoch - {base}) x 100 + the percent of the epoch done"
    if np.isfinite(bi).any():
        base = epoch_base(epoch, counters.get("epoch_base"))
        step = (epoch - base) * bn + bi
        return step, ("(e - 1) x N + i (epoch e from 1, batch i of N)" if base
                      else "e x N + i (epoch e from 0, batch i of N)")
    if np.isfinite(epoch).any():
        return epoch.copy(), "epoch (no step counter: epoch-indexed)"
    return step, ""


def epoch_base(epoch: np.ndarray, hint: np.ndarray | None) -> int:
    """The first epoch's number: 0 where the text shows an epoch 0, else what the family's
    line shape says (`Epoch [e][i/N]` counts from 1, `Epoch: [e]` from 0), else 1 when the
    text starts at epoch 1, else 0. The first epoch's batches then start at step ~0 or ~1."""
    seen = epoch[np.isfinite(epoch)]
    if not len(seen) or (seen == 0).any():
        return 0
    hinted = hint[np.isfinite(hint) & np.isfinite(epoch)] if hint is not None else np.empty(0)
    if len(hinted):
        return 0 if (hinted == 0).any() else 1
    return 1 if seen.min() == 1 else 0


def _restarts_with_epoch(step: np.ndarray, epoch: np.ndarray) -> bool:
    """The counter starts again with each epoch: it goes back only where the epoch moves on,
    or where the epoch goes back too (a relaunch from an earlier epoch's checkpoint, which
    the composed steps then show as a segment)."""
    both = np.flatnonzero(np.isfinite(step) & np.isfinite(epoch))
    if len(both) < 3:
        return False
    s, e = step[both], epoch[both]
    back = np.flatnonzero(np.diff(s) < 0)
    moved = np.diff(e)[back]
    return len(back) > 0 and bool((moved != 0).all() and (moved > 0).any())


def _same_step_each_epoch(step: np.ndarray, epoch: np.ndarray) -> bool:
    """The same step at every new epoch and never a step back (mindyolo's `Epoch 36/300, Step
    4/4`: each epoch's last step logged once): a counter within the epoch too."""
    both = np.flatnonzero(np.isfinite(step) & np.isfinite(epoch))
    if len(both) < 3:
        return False
    ds, rise = np.diff(step[both]), np.diff(epoch[both]) > 0
    return bool(rise.any() and not (ds < 0).any() and (ds[rise] == 0).all())


def assign(own: np.ndarray, overflow: np.ndarray, train: np.ndarray, source: Source
           ) -> tuple[np.ndarray, str | None]:
    """Steps for every line in order: its own, else the last before, else the first after.

    Overflow lines without a counter of their own belong to the next step line: the
    scaler reports the skip before the trainer prints the step it skipped in.
    """
    if not np.isfinite(own).any():
        ordinal = np.where(train, np.cumsum(train), np.nan).astype(np.float64)
        if not train.any():
            return np.full(len(own), np.nan), None
        source.warn("the lines carry no step counter: steps are the ordinal of each train line")
        own = ordinal
        note = "the ordinal of each train line (no step counter)"
    else:
        note = None
    lines = ~overflow | np.isfinite(own)
    counted = np.where(lines, own, np.nan)
    after = bfill(counted)
    step = ffill(counted)
    head = np.isnan(step)
    step[head] = after[head]
    ov = overflow & np.isnan(own)
    step[ov] = np.where(np.isfinite(after[ov]), after[ov], step[ov])
    return step, note
