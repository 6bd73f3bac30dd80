"""Tree B's detectors, vectorised: loss and grad-norm spikes, loss-scale cascades,
slow divergence and resumes. NaN never enters a window; windows are in steps."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from postmortem.diagnose.series import effective_history, widen, window_stats
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import RunLog


@dataclass
class Event:
    """Something tree B found: where, how big, and the window it was judged against."""

    kind: str                  # spike | divergence | nan | cascade
    metric: str                # loss | grad_norm | loss_scale
    step: int
    segment: int
    peak_step: int
    peak: float
    window_mean: float = float("nan")
    window_std: float = float("nan")
    notes: dict = field(default_factory=dict)


def _group(steps: np.ndarray, flagged: np.ndarray, gap: int) -> list[np.ndarray]:
    """Indices of flagged points, split where consecutive flags are more than `gap` apart."""
    idx = np.flatnonzero(flagged)
    if not len(idx):
        return []
    breaks = np.flatnonzero(np.diff(steps[idx]) > gap) + 1
    return np.split(idx, breaks)


def _window_median(steps: np.ndarray, values: np.ndarray, window: int) -> np.ndarray:
    """Median of the finite values in [step - window, step); only sparse points need it."""
    out = np.full(len(steps), np.nan)
    lo = np.searchsorted(steps, steps - window, side="left")
    sparse = np.flatnonzero(np.arange(len(steps)) - lo < 10)
    for i in sparse:
        v = values[lo[i]:i]
        v = v[np.isfinite(v)]
        if len(v):
            out[i] = np.median(v)
    return out


def _history(log: RunLog, seg: int):
    segments = log.frame.segment.to_numpy()
    return effective_history(log, seg) if seg else log.frame.iloc[:np.searchsorted(segments, 1)]


def _segment_views(log: RunLog, history=None):
    """(segment id, effective history frame, mask of that segment's own rows).

    `history(seg)` is the Context's cached one when given, so detectors share it."""
    history = history or (lambda seg: _history(log, seg))
    segments = log.frame.segment.to_numpy()
    for seg in range(int(segments[-1]) + 1 if len(segments) else 0):
        hist = history(seg)
        yield seg, hist, (hist.segment == seg).to_numpy()


def loss_spikes(log: RunLog, th: Thresholds, history=None) -> list[Event]:
    if "loss" not in log.frame:
        return []
    events = []
    for seg, hist, own in _segment_views(log, history):
        h = hist[hist.loss.notna()]
        steps, loss = h.step.to_numpy(), h.loss.to_numpy()
        own = (h.segment == seg).to_numpy()
        window = widen(steps, th.spike_window, th.spike_min_points)
        mean, std, n = window_stats(steps, loss, window)
        with np.errstate(invalid="ignore"):
            flagged = (own & np.isfinite(loss) & (n >= th.spike_min_points)
                       & (loss > mean + th.spike_sigma * std)
                       & (loss > mean * (1 + th.spike_min_rise)))
            # Pasted snippets and very sparse logs: too few points for a std.
            typical = _window_median(steps, loss, window)
            flagged |= (own & np.isfinite(loss) & (n >= 1) & (n < th.spike_min_points)
                        & (loss > typical * (1 + th.sparse_rise)))
        for group in _group(steps, flagged, th.merge_gap):
            first = group[0]
            # The peak: the highest loss from the first flag until it comes back down.
            end = np.searchsorted(steps, steps[group[-1]] + th.merge_gap, side="right")
            span = np.arange(first, max(end, first + 1))
            peak = span[np.nanargmax(loss[span])]
            events.append(Event("spike", "loss", int(steps[first]), seg, int(steps[peak]),
                                float(loss[peak]), float(mean[first]), float(std[first]),
                                {"z": float((loss[first] - mean[first]) / std[first]) if std[first] else None}))
    return events


def _trailing_median(values: np.ndarray, k: int) -> np.ndarray:
    """Median of the k points before each point (fewer at the start)."""
    out = np.full(len(values), np.nan)
    if len(values) > k:
        out[k:] = np.median(sliding_window_view(values, k)[:-1], axis=1)
    for i in range(1, min(k, len(values))):
        out[i] = np.median(values[:i])
    return out


def grad_norm_spikes(log: RunLog, th: Thresholds, history=None) -> list[Event]:
    """On log10(grad norm): heavy tails are normal, a jump of decades is not.

    Baseline: the median of the last 10 points (it follows a warm-up's decay).
    A point at least `grad_spike_min_ratio` above it is a candidate; it is a spike
    when its residual is `grad_spike_sigma` robust deviations (MAD) above the
    residuals of the window. Only candidates pay for the robust spread.
    """
    if "grad_norm" not in log.frame:
        return []
    events = []
    for seg, hist, _ in _segment_views(log, history):
        h = hist[hist.grad_norm.notna() & (hist.grad_norm > 0) & np.isfinite(hist.grad_norm)]
        steps, gn = h.step.to_numpy(), h.grad_norm.to_numpy()
        own = (h.segment == seg).to_numpy()
        lg = np.log10(gn)
        base = _trailing_median(lg, 10)
        resid = lg - base
        window = widen(steps, th.spike_window, th.spike_min_points)
        lo = np.searchsorted(steps, steps - window, side="left")
        with np.errstate(invalid="ignore"):
            candidates = np.flatnonzero(own & (resid > np.log10(th.grad_spike_min_ratio)))
        flagged = np.zeros(len(steps), dtype=bool)
        spread = np.full(len(steps), np.nan)
        for i in candidates:
            r = resid[lo[i]:i]
            r = r[np.isfinite(r)]
            if len(r) < th.spike_min_points:
                continue
            spread[i] = 1.4826 * np.median(np.abs(r - np.median(r)))
            flagged[i] = resid[i] > th.grad_spike_sigma * spread[i]
        med = 10 ** base
        for group in _group(steps, flagged, th.merge_gap):
            peak = group[np.argmax(gn[group])]
            events.append(Event("spike", "grad_norm", int(steps[group[0]]), seg, int(steps[peak]),
                                float(gn[peak]), float(med[group[0]]), float(spread[group[0]]),
                                {"ratio": float(gn[peak] / med[group[0]])}))
    return events


def loss_scale_cascades(log: RunLog, th: Thresholds) -> list[Event]:
    """Several halvings in a short span after a stable scale; the start-up calibration
    and a periodic single halving (the benign fp16 sawtooth) are not cascades."""
    if "loss_scale" not in log.frame:
        return []
    f = log.frame[log.frame.loss_scale.notna() & (log.frame.loss_scale > 0)]
    events = []
    # The scaler's start-up calibration happens at the start of training only.
    first_step = int(log.frame.step.iloc[0])
    for seg, rows in f.groupby("segment"):
        steps, scale = rows.step.to_numpy(), rows.loss_scale.to_numpy()
        if len(steps) < 2:
            continue
        covered = 0
        for i in np.flatnonzero(scale[1:] < scale[:-1]) + 1:     # only the drops
            if i < covered:
                continue
            start = i - 1
            j = i
            # Across a gap in the log the halvings were not seen one by one: time the
            # cascade from the first point after the gap.
            gap = steps[i] - steps[start] > th.cascade_window
            anchor = steps[i] if gap else steps[start]
            while j + 1 < len(steps) and scale[j + 1] <= scale[j] and steps[j + 1] - anchor <= th.cascade_window:
                j += 1
            drop = scale[start] / scale[j]
            # The scaler calibrates in the first steps of training (not of a pasted excerpt).
            startup = first_step <= th.cascade_stable_before and steps[start] < first_step + th.cascade_stable_before
            settled = not startup
            if drop >= 2 ** th.cascade_halvings and settled:
                skipped = rows.skipped.iloc[start + 1:j + 1].sum() if "skipped" in rows else None
                events.append(Event("cascade", "loss_scale", int(steps[start + 1]), int(seg), int(steps[j]),
                                    float(scale[j]), float(scale[start]), notes={
                                        "from": float(scale[start]), "to": float(scale[j]),
                                        "halvings": float(np.log2(drop)), "across_gap": bool(gap),
                                        "skipped": None if skipped is None else float(skipped)}))
            covered = j + 1
    return events


def divergence(log: RunLog, th: Thresholds) -> list[Event]:
    """Loss rising, after smoothing, over `divergence_window` steps: the slow kind of trouble."""
    if "loss" not in log.frame:
        return []
    events = []
    for seg, rows in log.frame[log.frame.loss.notna()].groupby("segment"):
        steps, loss = rows.step.to_numpy(), rows.loss.to_numpy()
        finite = np.isfinite(loss)
        steps, loss = steps[finite], loss[finite]
        window = widen(steps, th.divergence_window, th.divergence_min_points)
        smooth_w = widen(steps, th.divergence_smooth, th.divergence_min_points // 4)
        if len(steps) < th.divergence_min_points or steps[-1] - steps[0] < window:
            continue
        smooth = pd.Series(loss, index=pd.to_timedelta(steps, unit="s")).rolling(
            f"{smooth_w}s", min_periods=1).mean().to_numpy()
        rising = np.concatenate([[0], np.cumsum(np.diff(smooth) > 0)])
        lo = np.searchsorted(steps, steps - window, side="left")
        span_ok = steps - steps[lo] >= window * 0.9
        n = np.arange(len(steps)) - lo
        with np.errstate(invalid="ignore", divide="ignore"):
            share = (rising - rising[lo]) / np.maximum(n, 1)
            rise = (smooth - smooth[lo]) / np.abs(smooth[lo])
        hit = span_ok & (share >= th.divergence_rising_share) & (rise >= th.divergence_min_rise)
        if hit.any():
            end = int(np.argmax(hit))
            start = lo[end]
            events.append(Event("divergence", "loss", int(steps[start]), int(seg), int(steps[-1]),
                                float(loss[start:].max()), float(smooth[start]), notes={
                                    "rise": float(rise[end]), "rising_share": float(share[end]),
                                    "confirmed_at": int(steps[end])}))
    return events


def resumes(log: RunLog, th: Thresholds) -> list[dict]:
    """Where the run restarted: steps going backwards (a new segment) or a wall-clock gap."""
    out = [{"step": s["first_step"], "how": "steps went back", "segment": s["segment"]}
           for s in log.segments()[1:]]
    if "wall_time" in log.frame:
        for seg, rows in log.frame[log.frame.wall_time.notna()].groupby("segment"):
            wt, st = rows.wall_time.to_numpy(), rows.step.to_numpy()
            if len(wt) < 10:
                continue
            per_step = np.diff(wt) / np.maximum(np.diff(st), 1)
            typical = np.median(per_step)
            for i in np.flatnonzero(per_step > th.resume_gap_factor * max(typical, 1e-9)):
                out.append({"step": int(st[i + 1]), "how": f"wall-clock gap of {np.diff(wt)[i]:.0f}s",
                            "segment": int(seg)})
    return out
