"""Tree B's detectors, vectorised: loss and grad-norm spikes, loss-scale cascades,
slow divergence and resumes. NaN never enters a window; windows are in steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from pandas.api.indexers import BaseIndexer

from postmortem.diagnose.series import (
    effective_history,
    even_gap,
    interval,
    segment_rows,
    shifted,
    spacing,
    step_noise,
    widen,
    window_stats,
)
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
    # how far it stands out, in units of the series' own noise (comparable across metrics:
    # the detection threshold is `spike_sigma` for all of them)
    severity: float = 0.0
    # the last step of its span where that is not the peak (a divergence climbs on to the
    # end of the log, its peak may be anywhere before)
    end_step: int | None = None

    @property
    def last(self) -> int:
        """The last step of the event's span: what other events near it are matched to."""
        return max(self.step, self.peak_step if self.end_step is None else self.end_step)


def overlaps(a: Event, b: Event, margin: int = 20) -> bool:
    """Two events of one segment within `margin` steps of each other's span."""
    return a.segment == b.segment and a.step <= b.last + margin and b.step - margin <= a.last


def _group(steps: np.ndarray, flagged: np.ndarray, gap: int) -> list[np.ndarray]:
    """Indices of flagged points, split where consecutive flags are more than `gap` apart."""
    idx = np.flatnonzero(flagged)
    if not len(idx):
        return []
    breaks = np.flatnonzero(np.diff(steps[idx]) > gap) + 1
    return np.split(idx, breaks)


def _window_median(values: np.ndarray, lo: np.ndarray, at: np.ndarray) -> dict[int, float]:
    """Median of the finite values in [lo, i) for each index i of `at` (sparse points only)."""
    out = {}
    for i in at:
        v = values[lo[i]:i]
        v = v[np.isfinite(v)]
        out[int(i)] = np.median(v) if len(v) else np.nan
    return out


def _history(log: RunLog, seg: int):
    segments = log.frame.segment.to_numpy()
    return effective_history(log, seg) if seg else log.frame.iloc[:np.searchsorted(segments, 1)]


def _segment_views(log: RunLog, history=None):
    """(segment id, effective history frame); a detector's own rows are those of the
    history whose segment is the id.

    `history(seg)` is the Context's cached one when given, so detectors share it."""
    history = history or (lambda seg: _history(log, seg))
    segments = log.frame.segment.to_numpy()
    for seg in range(int(segments[-1]) + 1 if len(segments) else 0):
        hist = history(seg)
        yield seg, hist


def loss_spikes(log: RunLog, th: Thresholds, history=None, unjudged: list | None = None) -> list[Event]:
    """A loss that stands out of the level before it (the window's mean) by `spike_sigma`
    times the larger of the window's std and the series' own step-to-step noise (a single
    noisy batch is not a spike), and by `spike_min_rise` of the level (a practical margin).
    A log with too few points for either (a pasted snippet) is judged against the median
    of the points it has, and its spikes are marked sparse (low confidence). `unjudged` gets
    (step, points before it, segment) of each rise with too few points before it to judge."""
    unjudged = [] if unjudged is None else unjudged
    if "loss" not in log.frame:
        return []
    events = []
    for seg, hist in _segment_views(log, history):
        loss = hist.loss.to_numpy(dtype=float, na_value=np.nan)
        keep = np.isfinite(loss)         # the columns it needs, not a copy of the frame
        steps, own = hist.step.to_numpy(), hist.segment.to_numpy() == seg
        if not keep.all():
            steps, loss, own = steps[keep], loss[keep], own[keep]
        if not own.any():
            continue
        even, gap = spacing(steps)
        window = widen(steps, th.spike_window, th.spike_min_points, gap)
        noise = step_noise(loss, _block(steps, window, gap))
        lo = shifted(steps, -window, even=even)
        n = np.arange(len(steps)) - lo                  # points in each window
        # Pasted snippets and very sparse logs: too few points for a std; judged against
        # the median of the window (of fewer than 10 points) instead
        thin = np.flatnonzero((n >= 1) & (n < min(th.spike_min_points, 10)))
        typical = _window_median(loss, lo, thin)
        # (also the first steps of a log: a short log has nothing else; a long one's window is
        # only filling up there, and a rise of `sparse_rise` over all before it still stands out)
        with np.errstate(invalid="ignore"):
            t = np.array([typical[int(i)] for i in thin])
            rises = own[thin] & (loss[thin] > t + np.abs(t) * th.sparse_rise) if len(thin) else thin > 0
        # too little history to judge: said so (B2), never taken for calm
        # a point past a hole has nothing better than the line or two before it; at the
        # start of a log, fewer than `spike_min_history` is too little; a pasted snippet
        # has nothing better either, and there only a rise twice `sparse_rise` is told
        pasted = (len(loss) < 3 * th.spike_min_points) & (loss[thin] > t + np.abs(t) * 2 * th.sparse_rise)
        enough = pasted | (steps[thin] - steps[0] > window) | (n[thin] >= th.spike_min_history)
        unjudged.extend((int(steps[i]), int(n[i]), seg) for i in thin[rises & ~enough])
        sparse = thin[rises & enough]
        # Only the points that may stand out are judged against their window's mean and std
        at = _could_stand_out(loss, n, noise, min(th.spike_sigma, th.spike_sigma_big_rise))
        if len(sparse):
            at = np.union1d(at, sparse)
        mean, std, _ = window_stats(steps, loss, window, at=at, lo=lo)
        x = loss[at]
        scale = np.fmax(std, noise[at])
        with np.errstate(invalid="ignore", divide="ignore"):
            z = (x - mean) / scale
            full = own[at] & (n[at] >= th.spike_min_points)
            dense = full & (z >= th.spike_sigma) & (x > mean + np.abs(mean) * th.spike_min_rise)
            # or a rise large in itself (a third of the level) a little less far out of the
            # noise; only for a positive loss, where a relative rise means something
            if len(loss) and loss.min() > 0:
                dense |= full & (z >= th.spike_sigma_big_rise) & (x > mean * (1 + th.spike_big_rise))
        flagged = np.zeros(len(loss), dtype=bool)
        flagged[at[dense]] = flagged[sparse] = True
        for group in _group(steps, flagged, th.merge_gap):
            first = group[0]
            k = int(np.searchsorted(at, first))      # its place among the judged points
            # The peak: the highest loss from the first flag until it comes back down.
            end = np.searchsorted(steps, steps[group[-1]] + th.merge_gap, side="right")
            span = np.arange(first, max(end, first + 1))
            peak = span[np.argmax(loss[span])]
            few = bool(np.isin(first, sparse))
            base = typical[int(first)] if few else mean[k]
            with np.errstate(invalid="ignore", divide="ignore"):
                sev = (loss[peak] - base) / (abs(base) * th.sparse_rise) * th.spike_sigma if few and base \
                    else (loss[peak] - mean[k]) / scale[k] if scale[k] > 0 else th.spike_sigma
            events.append(Event("spike", "loss", int(steps[first]), seg, int(steps[peak]),
                                float(loss[peak]), float(base),
                                float(std[k]) if np.isfinite(std[k]) else float("nan"),
                                {"z": float(z[k]) if np.isfinite(z[k]) else None,
                                 "noise": float(noise[first]) if np.isfinite(noise[first]) else None,
                                 "sparse": few, "points": int(n[first])},
                                severity=float(sev)))
    return events


def _could_stand_out(values: np.ndarray, n: np.ndarray, noise: np.ndarray, sigma: float) -> np.ndarray:
    """The points that may stand `sigma` noises out of their window of the `n` points
    before them: a window's mean is at least its lowest value, and its points lie in the
    point's block of the longest window's length or the block before. Only these points
    need the window's mean and std; on a long calm run they are a few percent. Where the
    noise is unknown, every point may."""
    size = len(values)
    if size < 3 or not np.isfinite(noise).all():
        return np.arange(size)
    width = max(int(n.max()), 1)
    full = size // width
    lowest = values[:full * width].reshape(full, width).min(axis=1)
    if size % width:
        lowest = np.r_[lowest, values[full * width:].min()]
    floor = np.repeat(np.minimum(lowest, np.r_[lowest[0], lowest[:-1]]), width)[:size]
    above = np.subtract(values, floor, out=floor)       # (in place: one large array less)
    maybe = np.flatnonzero(above >= np.multiply(noise, sigma))
    return maybe[n[maybe] > 0]


def _segment_ids(segments: np.ndarray) -> np.ndarray:
    """np.unique of the frame's segment column, which is sorted: its change points."""
    if len(segments) and bool((segments[1:] >= segments[:-1]).all()):
        return segments[np.r_[True, segments[1:] != segments[:-1]]]
    return np.unique(segments)


def _block(steps: np.ndarray, window: int, gap: float | None = None) -> int:
    """Points per noise block: about one spike window's worth, at least 16. `gap`: the
    steps' interval when the caller has it."""
    if len(steps) < 2:
        return 16
    gap = max(interval(steps) if gap is None else gap, 1e-9)
    return int(min(max(16, window / gap), 1024))


def _trailing_median(values: np.ndarray, k: int, where: np.ndarray | None = None) -> np.ndarray:
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


def _far_above_min(values: np.ndarray, k: int, ratio: float) -> np.ndarray:
    """A superset of the positive values more than `ratio` x the minimum of the `k` before
    them, cheap: against the lowest of the (at most two) blocks of `k` points that hold
    those k, 2% short of `ratio` (whatever log10's last bit), and beside a minimum too
    small to divide by. Not the first point (nothing before it)."""
    n = len(values)
    full = n // k
    lowest = values[:full * k].reshape(full, k).min(axis=1)
    if n % k:
        lowest = np.r_[lowest, values[full * k:].min()]
    low = np.repeat(np.minimum(lowest, np.r_[lowest[0], lowest[:-1]]), k)[:n]
    with np.errstate(invalid="ignore", over="ignore"):
        out = (values > low * (0.98 * ratio)) | (low < np.finfo(float).tiny)
    out[:1] = False
    return out


def _spans(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The sorted indices in the union of [starts[j], ends[j]] (inclusive)."""
    size = int(ends.max()) + 2 if len(ends) else 1
    edge = np.zeros(size, dtype=np.int64)
    np.add.at(edge, starts, 1)
    np.add.at(edge, ends + 1, -1)
    return np.flatnonzero(np.cumsum(edge[:-1]) > 0)


def grad_norm_spikes(log: RunLog, th: Thresholds, history=None) -> list[Event]:
    """On log10(grad norm): heavy tails are normal, a jump of decades is not.

    Baseline: the median of the last 10 points (it follows a warm-up's decay).
    A point at least `grad_spike_min_ratio` above it is a candidate; it is a spike
    when its residual is `grad_spike_sigma` robust deviations (MAD) above the
    residuals of the window. Only candidates pay for the robust spread. A log with too
    few points for a spread (a pasted snippet) flags `sparse_grad_ratio` x its median.
    """
    if "grad_norm" not in log.frame:
        return []
    events = []
    for seg, hist in _segment_views(log, history):
        gn_all = hist.grad_norm.to_numpy(dtype=float, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            keep = np.isfinite(gn_all) & (gn_all > 0)
        steps, gn, own = hist.step.to_numpy(), gn_all, hist.segment.to_numpy() == seg
        if not keep.all():
            steps, gn, own = steps[keep], gn[keep], own[keep]
        if not own.any():
            continue
        even, gap = spacing(steps)
        window = widen(steps, th.spike_window, th.spike_min_points, gap)
        lo = shifted(steps, -window, even=even)
        # The median is at least the minimum: only points that far above the trailing
        # minimum can be candidates, and only their windows need the medians, and only
        # those windows (and the 10 points before each) the log of the grad norm.
        maybe = np.flatnonzero(own & _far_above_min(gn, 10, th.grad_spike_min_ratio))
        need, logged = _spans(lo[maybe], maybe), _spans(np.maximum(lo[maybe] - 10, 0), maybe)
        lg = np.full(len(gn), np.nan)
        lg[logged] = np.log10(gn[logged])
        base = _trailing_median(lg, 10, need)
        with np.errstate(invalid="ignore"):
            candidates = need[own[need] & (lg[need] - base[need] > np.log10(th.grad_spike_min_ratio))]
        flagged = np.zeros(len(steps), dtype=bool)
        sparse = np.zeros(len(steps), dtype=bool)
        spread = {}                      # the residuals' robust spread, at the candidates
        for i in candidates:
            r = lg[lo[i]:i] - base[lo[i]:i]             # the residuals over the log's median
            r = r[np.isfinite(r)]
            if len(r) < th.spike_min_points:
                # a handful of rows: only a jump of decades over their median is sure
                sparse[i] = flagged[i] = len(r) >= 2 and lg[i] - base[i] >= np.log10(th.sparse_grad_ratio)
                continue
            spread[i] = max(1.4826 * np.median(np.abs(r - np.median(r))), 1e-3)
            flagged[i] = lg[i] - base[i] > th.grad_spike_sigma * spread[i]
        for group in _group(steps, flagged, th.merge_gap):
            peak = group[np.argmax(gn[group])]
            first = group[0]
            med = 10 ** base[first:first + 1]      # the baseline median itself, as an array power
            few = bool(sparse[first])
            # severity on the loss's scale: the residual in spreads, rescaled so that the
            # detection threshold of both is `spike_sigma`
            sev = ((lg[peak] - base[peak]) / np.log10(th.sparse_grad_ratio) if few
                   else (lg[peak] - base[first]) / (th.grad_spike_sigma * spread[first])) * th.spike_sigma
            events.append(Event("spike", "grad_norm", int(steps[first]), seg, int(steps[peak]),
                                float(gn[peak]), float(med[0]), float(spread.get(first, np.nan)),
                                {"ratio": float(gn[peak] / med[0]), "sparse": few,
                                 "points": int(i - lo[i]) if (i := first) is not None else 0},
                                severity=float(sev)))
    return events


def scaler_events(log: RunLog, th: Thresholds, skips: np.ndarray | None = None
                  ) -> tuple[list[Event], list[int], list[dict]]:
    """The loss scaler's overflows, as (cascades, steps of routine probes, drops across a
    hole in the log).

    A dynamic scaler (GradScaler, Megatron, DeepSpeed, fairseq) doubles its scale after N
    clean steps and the next step often overflows once: one skip, one halving, then normal
    training. That probe is routine. A cascade is a dense run of overflows, at least
    `cascade_halvings` halvings (or skips) with at most `cascade_gap` steps between one and
    the next (also halvings between two logged rows), dated at its first skip. The
    scaler's calibration at the start of training is neither. A fall of the scale between
    two rows farther apart than that (a hole in the log) may be spread over the whole hole:
    alone it is no cascade, only a drop {after, step, from, to, halvings}; where the scale
    goes on falling on the next lines, a cascade of low confidence (notes["sparse"]).
    `skips`: the skipped steps per row (Context.skips), when the caller has them."""
    f = log.frame
    if skips is None:
        from postmortem.diagnose.nan import overflow_rows, skip_counts
        # a skipped step the log counts and whose grad norm it logs as inf is one skip, not two
        skips = np.maximum(skip_counts(log), overflow_rows(log))
    sc_all = f.loss_scale.to_numpy(dtype=float, na_value=np.nan) if "loss_scale" in f else None
    has_scale = sc_all is not None and not np.isnan(sc_all).all()
    if not has_scale and not skips.any():
        return [], [], []
    first_step = int(f.step.iloc[0])

    def startup(step, frm=np.nan) -> bool:
        """The scaler's calibration at the start of training: early, and falling from near
        a scaler's initial scale (2^7 for fairseq up to 2^16 or 2^32; a search never begins
        far below, so 64 -> 2 on the first steps is a cascade)."""
        return (first_step <= th.cascade_stable_before and step < first_step + th.cascade_stable_before
                and not frm < th.scaler_initial_min)

    cascades, probes, drops = [], [], []
    seg_all, st_all = f.segment.to_numpy(), f.step.to_numpy()
    for seg in _segment_ids(seg_all):
        rows = segment_rows(seg_all, seg)
        st, sk = st_all[rows], skips[rows]
        marks = []          # (step, halvings, skips, from, to, step of the row before, across a hole)
        gap = max(th.cascade_gap, 1.5 * interval(st) if len(st) > 1 else 0)
        if has_scale:
            sc = sc_all[rows]
            ok = np.isfinite(sc) & (sc > 0)
            keep = None if ok.all() else np.flatnonzero(ok)     # (no index array when all are)
            scale = sc if keep is None else sc[keep]
            for k in np.flatnonzero(scale[1:] < scale[:-1]) + 1:
                i, j = (k - 1, k) if keep is None else (keep[k - 1], keep[k])
                marks.append((int(st[j]), float(np.log2(sc[i] / sc[j])), 0.0, sc[i], sc[j], int(st[i]),
                              bool(st[j] - st[i] > gap)))
        for i in np.flatnonzero(sk > 0):
            marks.append((int(st[i]), 0.0, float(sk[i]), np.nan, np.nan, None, False))
        if not marks:
            continue
        marks.sort(key=lambda m: m[0])
        cluster = [marks[0]]
        for m in marks[1:] + [None]:
            if m is not None and m[0] - cluster[-1][0] <= gap:
                cluster.append(m)
                continue
            cluster, early = _past_probes(cluster, th)
            probes += [int(c[0]) for c in early if not startup(c[0])][:1]
            halvings = sum(c[1] for c in cluster)
            skipped = sum(c[2] for c in cluster)
            start = cluster[0][0]
            holes = [c for c in cluster if c[6]]
            frm0 = next((c[3] for c in cluster if np.isfinite(c[3])), np.nan)
            if holes and len(holes) == len(cluster) and halvings >= th.cascade_halvings and not startup(start, frm0):
                # fallen across a hole, then steady: how fast it fell is not known
                drops += [{"after": c[5], "step": c[0], "from": float(c[3]), "to": float(c[4]),
                           "halvings": c[1], "segment": int(seg)} for c in holes]
            # (the start-up calibration never takes the scale below 1: that is overflow)
            elif (max(halvings, skipped) >= th.cascade_halvings or halvings >= 2 and _loss_jumps(
                    f, rows, start, cluster[-1][0] + gap, th)) and (
                    not startup(start, frm0) or min((c[4] for c in cluster if np.isfinite(c[4])), default=1.0) < 1.0):
                scales = [c for c in cluster if np.isfinite(c[3])]
                frm = scales[0][3] if scales else np.nan
                to = scales[-1][4] if scales else np.nan
                # the first skip: the step before a halving when the scale is logged after it
                dated = next((c[0] for c in cluster if c[2] > 0), start)
                cascades.append(Event("cascade", "loss_scale", int(dated), int(seg), int(cluster[-1][0]),
                                      float(to), float(frm), notes={
                                          "from": float(frm), "to": float(to), "halvings": float(halvings),
                                          "skipped": float(skipped) if skipped else None,
                                          "across_gap": len(cluster) == 1 and halvings >= th.cascade_halvings,
                                          # the line before the first fall, where the scale
                                          # was still `from` (None: dated by a skip)
                                          "after": scales[0][5] if scales else None,
                                          "sparse": bool(holes)},
                                      severity=float(th.spike_sigma * max(halvings, skipped) / th.cascade_halvings)))
            elif not startup(start):
                probes.append(int(start))
            if m is not None:
                cluster = [m]
    return cascades, probes, drops


def _loss_jumps(f, rows: np.ndarray, start: int, end: float, th: Thresholds) -> bool:
    """The loss at least `cascade_loss_jump` x its level before `start` on a line up to `end`:
    two halvings close together while the loss triples are no routine probes."""
    if "loss" not in f:
        return False
    st = f.step.to_numpy()[rows]
    loss = f.loss.to_numpy(dtype=float, na_value=np.nan)[rows]
    before = loss[(st < start) & np.isfinite(loss)][-th.spike_min_points:]
    during = loss[(st >= start) & (st <= end) & np.isfinite(loss)]
    return bool(len(before) and len(during) and np.median(before) > 0
                and during.max() >= th.cascade_loss_jump * np.median(before))


def _past_probes(cluster: list, th: Thresholds) -> tuple[list, list]:
    """A cascade's marks without the routine probe just before it: the leading burst (marks on
    consecutive steps: a skip and its halving) of one halving or one skip, where the rest is
    still a cascade.
    Returns (the cascade's marks, the probe's)."""
    bursts, cur = [], [cluster[0]]
    for m in cluster[1:]:
        if m[0] - cur[-1][0] > 1:
            bursts.append(cur)
            cur = []
        cur.append(m)
    bursts.append(cur)
    size = lambda b: max(sum(c[1] for c in b), sum(c[2] for c in b))  # noqa: E731
    if len(bursts) > 1 and size(bursts[0]) <= 1 and size([c for b in bursts[1:] for c in b]) >= th.cascade_halvings:
        return [c for b in bursts[1:] for c in b], bursts[0]
    return cluster, []


def divergence_too_short(log: RunLog, th: Thresholds) -> str | None:
    """Why the divergence check cannot judge this log (too few steps or points), or None."""
    if "loss" not in log.frame:
        return "no training loss"
    f = log.frame
    loss = f.loss.to_numpy(dtype=float, na_value=np.nan)
    steps = f.step.to_numpy()[np.isfinite(loss)]
    if len(steps) < th.short_log_points:
        return f"skipped: {len(steps)} losses logged, needs {th.short_log_points}"
    return None


def divergence_windows(steps: np.ndarray, th: Thresholds, gap: float | None = None) -> tuple[int, int]:
    """(window, smoothing) in steps: `divergence_window` and `divergence_smooth`, widened so a
    sparse log has its points in them; a log shorter than the window (60 steps, 12 epochs) is
    judged on windows of half its length and smoothed over a quarter of that, over the
    points it has."""
    window = widen(steps, th.divergence_window, th.divergence_min_points, gap)
    smooth = widen(steps, th.divergence_smooth, th.divergence_min_points // 4, gap)
    span = int(steps[-1] - steps[0]) if len(steps) else 0
    if span < window:
        window = max(span // 2, 1)
        every = interval(steps) if len(steps) > 1 else 1.0
        smooth = max(int(window // 4), int(every))
    return window, smooth


def divergence(log: RunLog, th: Thresholds) -> list[Event]:
    """A sustained rise of the smoothed loss over `divergence_window` steps: by
    `divergence_min_rise` of its level and `divergence_sigma` times its own noise, with
    most of its steps (`divergence_rising_share`, not all) going up."""
    if "loss" not in log.frame:
        return []
    events = []
    f = log.frame
    loss_all, steps_all = f.loss.to_numpy(dtype=float, na_value=np.nan), f.step.to_numpy()
    seg_all = f.segment.to_numpy()
    for seg in _segment_ids(seg_all):
        rows = segment_rows(seg_all, seg)
        steps, loss = steps_all[rows], loss_all[rows]
        finite = np.isfinite(loss)
        if not finite.all():
            steps, loss = steps[finite], loss[finite]
        even, gap = spacing(steps)
        if len(steps) < th.short_log_points:
            continue
        window, smooth_w = divergence_windows(steps, th, gap)
        smooth = _rolling_mean(steps, loss, smooth_w, even)
        # Both rules below need the smoothed loss this far above its lowest so far (a rise
        # from a window back is never larger): most runs never are, and stop here. The
        # relative margin first: where it rules every point out, the noise is not needed.
        floor = np.minimum.accumulate(smooth)
        with np.errstate(invalid="ignore"):
            could = smooth - floor >= th.divergence_min_rise * floor if floor[-1] > 0 else None
        if could is not None and not could.any():
            continue
        noise = step_noise(loss, _block(steps, window, gap))
        if window < th.divergence_window:
            # a short log: its slope is much of its step-to-step change and that slope changes
            # (an epoch log falls fast, then slowly): the noise from the second differences,
            # which a curve's slope does not reach (white noise: their std is sqrt 6 sigma)
            d2 = np.diff(loss, 2) if len(loss) > 2 else np.diff(loss)
            noise = np.full(len(loss), 1.4826 * np.median(np.abs(d2 - np.median(d2))) / np.sqrt(6))
        per = np.maximum(1.0, smooth_w / max(gap, 1e-9))
        noise_s = noise / np.sqrt(per)                 # the noise left in a mean of `per` points
        need = th.divergence_sigma * noise_s
        with np.errstate(invalid="ignore"):
            above = smooth - floor >= need
        if not (above.any() if could is None else (above & could).any()):
            continue
        # smoothed steps that went up so far, each against the smoothed loss half a smoothing
        # span before it (a rolling mean moves by one point's noise per step: step by step, a
        # slow rise under per-step noise goes up only a little over half the time)
        lag = max(1, int(per // 2))
        rising = np.zeros(len(smooth), dtype=np.int64)
        if len(smooth) > lag:
            np.cumsum(smooth[lag:] > smooth[:-lag], out=rising[lag:])
        # Only points this far above the lowest so far can meet either rule (with a NaN in
        # the smoothed loss, the lowest is NaN from there on: then every point is judged).
        i = np.flatnonzero(above) if floor[-1] == floor[-1] else np.arange(len(steps))
        lo = np.searchsorted(steps, steps[i] - window, side="left")
        marks = np.flatnonzero(smooth <= floor)           # where the smoothed loss is its lowest
        last = np.searchsorted(marks, i, side="right") - 1    # the last one so far (else row 0)
        low_at = np.where(last >= 0, marks[np.maximum(last, 0)], 0) if len(marks) else np.zeros_like(i)
        with np.errstate(invalid="ignore", divide="ignore"):
            up = smooth[i] - smooth[lo]
            hit = (steps[i] - steps[lo] >= window * 0.9) \
                & ((rising[i] - rising[lo]) / np.maximum(i - lo, 1) >= th.divergence_rising_share) \
                & (up / np.abs(smooth[lo]) >= th.divergence_min_rise) & (up >= need[i])
            # A climb slower than the window: from the lowest smoothed loss so far, at least
            # a window long, mostly rising, by the same margins.
            up_low = smooth[i] - smooth[low_at]
            slow = (steps[i] - steps[low_at] >= window) \
                & ((rising[i] - rising[low_at]) / np.maximum(i - low_at, 1) >= th.divergence_rising_share) \
                & (up_low / np.abs(smooth[low_at]) >= th.divergence_min_rise) & (up_low >= need[i])
        # sustained: still true half a window later (or at the log's end); a spike lifts a
        # rolling mean for one smoothing span only
        cond = np.zeros(len(steps), dtype=bool)
        cond[i] = hit | slow
        later = np.minimum(np.searchsorted(steps, steps[i] + window // 2, side="left"), len(steps) - 1)
        ok = cond[i] & cond[later]
        if ok.any():
            k = int(np.argmax(ok))                      # the first point confirmed
            end = int(i[k])
            start = int(lo[k]) if hit[k] else int(low_at[k])
            # the rise began at the lowest smoothed loss between the window's start and its
            # confirmation (a window back may reach far before it)
            first = max(int(low_at[k]), int(np.searchsorted(steps, steps[start] - window)))
            start = min(start, first)
            start += int(np.argmin(smooth[start:end + 1]))
            with np.errstate(invalid="ignore", divide="ignore"):
                rise = (up[k] if hit[k] else up_low[k]) / np.abs(smooth[start])
            share = (rising[end] - rising[start]) / max(end - start, 1)
            peak = start + int(np.argmax(loss[start:]))     # where the highest loss is
            events.append(Event("divergence", "loss", int(steps[start]), int(seg), int(steps[peak]),
                                float(loss[peak]), float(smooth[start]), end_step=int(steps[-1]), notes={
                                    "rise": float(rise), "rising_share": float(share),
                                    "confirmed_at": int(steps[end])},
                                severity=float((up[k] if hit[k] else up_low[k]) / noise[end])
                                if noise[end] > 0 else th.spike_sigma))
    return events


def _rolling_mean(steps: np.ndarray, values: np.ndarray, window: int, even: int | None = None) -> np.ndarray:
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


EPOCHS = ("epoch", "epochs", "train/epoch")
EVAL_ONLY = ("loss", "grad_norm", "lr")


def segment_starts(log: RunLog) -> list[dict]:
    """Each segment after the first as a restart, with how it shows: the steps going back
    (from the last step before to the first after), or a new log (a Lightning version_N
    directory of a resumed run, one file per segment) whose steps carry on."""
    segs = log.segments()
    files = log.source.files if len(log.source.files) == len(segs) else None
    said = log.source.extras.get("segment_starts", {})    # how the reader saw each start
    out = []
    for k in range(1, len(segs)):
        before, first = segs[k - 1]["last_step"], segs[k]["first_step"]
        if first <= before:
            how = f"steps went back from {before} to {first}"
        elif segs[k]["segment"] in said:
            how = f"{said[segs[k]['segment']]}: steps carry on from {before}"
        else:
            where = f", {Path(files[k]).name}" if files else ""
            how = f"resumed in a new log{where}: steps carry on from {before}"
        out.append({"step": first, "how": how, "segment": segs[k]["segment"]})
    return out


def resumes(log: RunLog, th: Thresholds) -> list[dict]:
    """Where the run restarted: steps going back (a new segment), an epoch counter going
    back, or a wall-clock gap `resume_gap_factor` x the median time a step takes. A last
    row with no training metric (a final eval written after a pause) is not a restart."""
    f = log.frame
    out = segment_starts(log)
    epoch = next((c for c in EPOCHS if c in f and f[c].notna().any()), None)
    seg_all = f.segment.to_numpy()
    if epoch:
        ep = f[epoch].to_numpy(dtype=float, na_value=np.nan)
        for seg in _segment_ids(seg_all):
            idx = np.flatnonzero((seg_all == seg) & np.isfinite(ep))
            # rounding (HF writes 2 decimals) never takes a counter back by half an epoch
            back = idx[1:][np.diff(ep[idx]) < -0.5]
            out += [{"step": int(f.step.iat[i]), "how": f"{epoch} went back to {ep[i]:g}", "segment": int(seg)}
                    for i in back]
    if "wall_time" in f:
        train = np.zeros(len(f), dtype=bool)
        for c in EVAL_ONLY:
            if c in f:
                train |= f[c].notna().to_numpy()
        wt_all = f.wall_time.to_numpy(dtype=float, na_value=np.nan)
        for seg in _segment_ids(seg_all):
            idx = np.flatnonzero((seg_all == seg) & np.isfinite(wt_all))
            if len(idx) < 10:
                continue
            wt, st = wt_all[idx], f.step.to_numpy()[idx]
            dt = np.diff(wt)
            per_step = dt / np.maximum(np.diff(st), 1)
            typical = np.median(per_step[per_step > 0]) if (per_step > 0).any() else 0.0
            for i in np.flatnonzero(dt < -max(60.0, 100 * typical)):
                out.append({"step": int(st[i + 1]), "how": f"wall clock went back {-dt[i]:.0f}s (appended runs)",
                            "segment": int(seg)})
            for i in np.flatnonzero(per_step > th.resume_gap_factor * max(typical, 1e-9)):
                last = i + 1 == len(idx) - 1 and not train[idx[i + 1]]
                if not last:
                    out.append({"step": int(st[i + 1]), "how": f"wall-clock gap of {dt[i]:.0f}s",
                                "segment": int(seg)})
    out.sort(key=lambda r: (r["segment"], r["step"]))
    return out
