"""A divergence on a log too short to smooth (under `short_log_points` losses: two or three
epoch rows, a pasted excerpt): a rise is told from an epoch's noise only where two series
agree. The loss at least doubles its lowest earlier value (`short_log_rise`), stands above every
earlier one and stays there to the log's end, and the validation loss logged at that row does
the same against its own earlier values. One series alone, on so few rows, cannot tell:
`lone_rise` says it, with the numbers, for B4 to say "cannot tell"."""

from __future__ import annotations

import numpy as np

from postmortem.diagnose.detectors.event import Event, Notes
from postmortem.diagnose.detectors.windows import segment_ids
from postmortem.diagnose.series import segment_rows
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import RunLog


def _rows(log: RunLog, name: str, rows: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of `name`'s finite values in `rows`."""
    v = log.frame[name].to_numpy(dtype=float, na_value=np.nan)[rows]
    s = log.frame.step.to_numpy()[rows]
    keep = np.isfinite(v)
    return s[keep], v[keep]


def _rises(values: np.ndarray, i: int, factor: float) -> bool:
    """values[i] above every earlier value and at least `factor` times the lowest of them."""
    before = values[:i]
    return bool(len(before) and before.min() > 0 and values[i] > before.max()
                and values[i] >= factor * before.min())


def _first_rise(steps: np.ndarray, loss: np.ndarray, th: Thresholds) -> int | None:
    """The first row whose loss rose (`_rises`) and stayed above every earlier value."""
    for i in range(1, len(loss)):
        if _rises(loss, i, th.short_log_rise) and (loss[i:] > loss[:i].max()).all():
            return i
    return None


def _val_at(vs: np.ndarray, vl: np.ndarray, after: float, at: float) -> int | None:
    """The validation value logged after the row before and up to this row (its last), if any."""
    here = np.flatnonzero((vs > after) & (vs <= at))
    return int(here[-1]) if len(here) else None


def short_rises(log: RunLog, th: Thresholds) -> list[Event]:
    """The short log's divergences: where the loss and the validation loss rose together."""
    out: list[Event] = []
    for seg, steps, loss, i, v in _candidates(log, th):
        if v is None:
            continue
        vl, j = v
        out.append(Event("divergence", "loss", int(steps[i]), seg, int(steps[i + int(np.argmax(loss[i:]))]),
                         float(loss[i:].max()), float(loss[:i].min()), end_step=int(steps[-1]),
                         notes=Notes(sparse=True, points=len(loss), rise=float(loss[i] / loss[:i].min() - 1),
                                     short_rise=(float(loss[:i].min()), float(loss[i]),
                                                 float(vl[:j].min()), float(vl[j]))),
                         severity=th.spike_sigma))
    return out


def lone_rise(log: RunLog, th: Thresholds) -> str | None:
    """A short log's loss that rose (as `short_rises` asks) with no validation loss rising with
    it, said with its numbers; None where there is none."""
    for _, steps, loss, i, v in _candidates(log, th):
        if v is None:
            low = float(loss[:i].min())
            return (f"the loss rose from {low:.4g} to {loss[i]:.4g} at step {steps[i]} (x{loss[i] / low:.2f}, "
                    f"above every earlier value) on {len(loss)} rows, with no validation loss rising with it: "
                    f"on so few rows one series cannot tell a divergence from an epoch's noise")
    return None


def _candidates(log: RunLog, th: Thresholds):
    """Per segment of a short log with a rise: (segment, steps, loss, its row, (val losses up to
    it, the index of the one at its row) where the validation loss rose with it, else None)."""
    if "loss" not in log.frame:
        return
    f = log.frame
    seg_all = f.segment.to_numpy()
    for seg in segment_ids(seg_all):
        rows = segment_rows(seg_all, seg)
        steps, loss = _rows(log, "loss", rows)
        if not 2 <= len(loss) < th.short_log_points:
            continue
        i = _first_rise(steps, loss, th)
        if i is None:
            continue
        agree = None
        if "val_loss" in f:
            vs, vl = _rows(log, "val_loss", rows)
            j = _val_at(vs, vl, float(steps[i - 1]), float(steps[i]))
            if j is not None and _rises(vl, j, th.short_log_rise):
                agree = (vl[:j + 1], j)
        yield int(seg), steps, loss, i, agree
