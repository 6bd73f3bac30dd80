"""Grad-norm spikes: a jump of decades in log10(grad norm), out of its robust spread."""

from __future__ import annotations

import numpy as np
import pandas as pd

from postmortem.diagnose.detectors.event import Event, Notes
from postmortem.diagnose.detectors.windows import (
    History,
    far_above_min,
    group,
    segment_views,
    spans,
    trailing_median,
)
from postmortem.diagnose.series import shifted, spacing, widen
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import RunLog


def grad_norm_spikes(log: RunLog, th: Thresholds, histories: History | None = None) -> list[Event]:
    """On log10(grad norm): heavy tails are normal, a jump of decades is not.

    Baseline: the median of the last 10 points (it follows a warm-up's decay).
    A point at least `grad_spike_min_ratio` above it is a candidate; it is a spike
    when its residual is `grad_spike_sigma` robust deviations (MAD) above the
    residuals of the window. Only candidates pay for the robust spread. A log with too
    few points for a spread (a pasted snippet) flags `sparse_grad_ratio` x its median.
    """
    if "grad_norm" not in log.frame:
        return []
    events: list[Event] = []
    for seg, hist in segment_views(log, histories):
        steps, gn, own = _positive(hist, seg)
        if not own.any():
            continue
        even, gap = spacing(steps)
        window = widen(steps, th.spike_window, th.spike_min_points, gap)
        lo = shifted(steps, -window, even=even)
        lg, base, candidates = _candidates(gn, own, lo, th)
        flagged, sparse, spread = _flag(lg, base, lo, candidates, th)
        events += _spikes(steps, gn, lg, base, lo, flagged, sparse, spread, seg, th)
    return events


def _positive(hist: pd.DataFrame, seg: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, grad norms, own rows) where the grad norm is finite and positive."""
    gn = hist.grad_norm.to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        keep = np.isfinite(gn) & (gn > 0)
    steps, own = hist.step.to_numpy(), hist.segment.to_numpy() == seg
    if not keep.all():
        steps, gn, own = steps[keep], gn[keep], own[keep]
    return steps, gn, own


def _candidates(gn: np.ndarray, own: np.ndarray, lo: np.ndarray, th: Thresholds
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log10 of the grad norm, its trailing median of 10, the candidates' indices), the
    first two only where they are needed (NaN elsewhere).

    The median is at least the minimum: only points that far above the trailing minimum can
    be candidates, and only their windows need the medians, and only those windows (and the
    10 points before each) the log of the grad norm."""
    maybe = np.flatnonzero(own & far_above_min(gn, 10, th.grad_spike_min_ratio))
    need, logged = spans(lo[maybe], maybe), spans(np.maximum(lo[maybe] - 10, 0), maybe)
    lg = np.full(len(gn), np.nan)
    lg[logged] = np.log10(gn[logged])
    base = trailing_median(lg, 10, need)
    with np.errstate(invalid="ignore"):
        candidates = need[own[need] & (lg[need] - base[need] > np.log10(th.grad_spike_min_ratio))]
    return lg, base, candidates


def _flag(lg: np.ndarray, base: np.ndarray, lo: np.ndarray, candidates: np.ndarray, th: Thresholds
          ) -> tuple[np.ndarray, np.ndarray, dict[int, float]]:
    """(flagged, judged on a handful of rows, the residuals' robust spread at the candidates)."""
    flagged = np.zeros(len(lg), dtype=bool)
    sparse = np.zeros(len(lg), dtype=bool)
    spread = {}
    for i in candidates:
        r = lg[lo[i]:i] - base[lo[i]:i]             # the residuals over the log's median
        r = r[np.isfinite(r)]
        if len(r) < th.spike_min_points:
            # a handful of rows: only a jump of decades over their median is sure
            sparse[i] = flagged[i] = len(r) >= 2 and lg[i] - base[i] >= np.log10(th.sparse_grad_ratio)
            continue
        spread[i] = max(1.4826 * np.median(np.abs(r - np.median(r))), 1e-3)
        flagged[i] = lg[i] - base[i] > th.grad_spike_sigma * spread[i]
    return flagged, sparse, spread


def _spikes(steps: np.ndarray, gn: np.ndarray, lg: np.ndarray, base: np.ndarray, lo: np.ndarray,
            flagged: np.ndarray, sparse: np.ndarray, spread: dict[int, float], seg: int,
            th: Thresholds) -> list[Event]:
    """The flagged points, grouped (`merge_gap`), as events at their first point."""
    events = []
    for points in group(steps, flagged, th.merge_gap):
        peak = points[np.argmax(gn[points])]
        first = points[0]
        med = 10 ** base[first:first + 1]      # the baseline median itself, as an array power
        few = bool(sparse[first])
        # severity on the loss's scale: the residual in spreads, rescaled so that the
        # detection threshold of both is `spike_sigma`
        sev = ((lg[peak] - base[peak]) / np.log10(th.sparse_grad_ratio) if few
               else (lg[peak] - base[first]) / (th.grad_spike_sigma * spread[first])) * th.spike_sigma
        events.append(Event("spike", "grad_norm", int(steps[first]), seg, int(steps[peak]),
                            float(gn[peak]), float(med[0]), float(spread.get(first, np.nan)),
                            Notes(ratio=float(gn[peak] / med[0]), sparse=few, points=int(first - lo[first])),
                            severity=float(sev)))
    return events


def grad_norm_spikes_reference(log: RunLog, th: Thresholds) -> list[Event]:
    """`grad_norm_spikes` as its checklist says it, one point at a time (slow: what the
    property test holds the vectorised one to). On log10 of the positive grad norms: the
    baseline is the median of the 10 points before; a point `grad_spike_min_ratio` above it
    is a spike when its residual is `grad_spike_sigma` MADs of the residuals in the
    `spike_window` steps before it (a handful of them: `sparse_grad_ratio` above)."""
    if "grad_norm" not in log.frame:
        return []
    events: list[Event] = []
    for seg, hist in segment_views(log):
        steps, gn, own = _positive(hist, seg)
        if not own.any():
            continue
        window = widen(steps, th.spike_window, th.spike_min_points)
        lg = np.log10(gn)
        base = np.array([np.median(lg[max(i - 10, 0):i]) if i else np.nan for i in range(len(lg))])
        flags = []                          # (index, sparse, spread)
        for i in range(1, len(lg)):
            if not own[i] or not lg[i] - base[i] > np.log10(th.grad_spike_min_ratio):
                continue
            inside = (steps[:i] >= steps[i] - window)          # the window: [step - window, step)
            r = (lg[:i] - base[:i])[inside]
            r = r[np.isfinite(r)]
            if len(r) < th.spike_min_points:
                if len(r) >= 2 and lg[i] - base[i] >= np.log10(th.sparse_grad_ratio):
                    flags.append((i, True, np.nan))
                continue
            spread = max(1.4826 * np.median(np.abs(r - np.median(r))), 1e-3)
            if lg[i] - base[i] > th.grad_spike_sigma * spread:
                flags.append((i, False, spread))
        while flags:
            # a spike: its first flag and every flag within `merge_gap` steps of the one before
            first, few, spread = flags[0]
            points: list[int] = []
            while flags and (not points or steps[flags[0][0]] - steps[points[-1]] <= th.merge_gap):
                points.append(flags.pop(0)[0])
            peak = max(points, key=lambda k: (gn[k], -k))
            med = 10 ** base[first]
            sev = (lg[peak] - base[peak]) / np.log10(th.sparse_grad_ratio) if few \
                else (lg[peak] - base[first]) / (th.grad_spike_sigma * spread)
            events.append(Event("spike", "grad_norm", int(steps[first]), seg, int(steps[peak]), float(gn[peak]),
                                float(med), float(spread),
                                Notes(ratio=float(gn[peak] / med), sparse=few,
                                      points=int((steps[:first] >= steps[first] - window).sum())),
                                severity=float(sev * th.spike_sigma)))
    return events
