"""Tree B's detectors, vectorised: loss and grad-norm spikes, loss-scale cascades,
slow divergence and resumes. NaN never enters a window; windows are in steps."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from postmortem.diagnose.series import effective_history, interval, shifted, step_noise, widen, window_stats
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
    lo = shifted(steps, -window)
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
    """A loss that stands out of the level before it (the window's mean) by `spike_sigma`
    times the larger of the window's std and the series' own step-to-step noise (a single
    noisy batch is not a spike), and by `spike_min_rise` of the level (a practical margin).
    A log with too few points for either (a pasted snippet) is judged against the median
    of the points it has, and its spikes are marked sparse (low confidence)."""
    if "loss" not in log.frame:
        return []
    events = []
    for seg, hist, own in _segment_views(log, history):
        loss = hist.loss.to_numpy(dtype=float, na_value=np.nan)
        keep = np.isfinite(loss)         # the columns it needs, not a copy of the frame
        steps, loss, own = hist.step.to_numpy()[keep], loss[keep], (hist.segment.to_numpy() == seg)[keep]
        if not own.any():
            continue
        window = widen(steps, th.spike_window, th.spike_min_points)
        noise = step_noise(loss, _block(steps, window))
        lo = shifted(steps, -window)
        n = (np.arange(len(steps)) - lo).astype(np.float64)
        with np.errstate(invalid="ignore"):
            # Pasted snippets and very sparse logs: too few points for a std.
            typical = _window_median(steps, loss, window)
            # (not the first steps of a long run: there the window is only filling up)
            pasted = len(loss) < 3 * th.spike_min_points or steps - steps[0] > window
            sparse = own & pasted & (n >= 1) & (n < th.spike_min_points) \
                & (loss > typical + np.abs(typical) * th.sparse_rise)
        at = np.union1d(_could_stand_out(loss, lo, noise, min(th.spike_sigma, th.spike_sigma_big_rise)),
                        np.flatnonzero(sparse))
        mean, std, _ = window_stats(steps, loss, window, at=at)
        scale = np.fmax(std, noise)
        with np.errstate(invalid="ignore", divide="ignore"):
            z = (loss - mean) / scale
            dense = own & (n >= th.spike_min_points) & (z >= th.spike_sigma) \
                & (loss > mean + np.abs(mean) * th.spike_min_rise)
            # or a rise large in itself (a third of the level) a little less far out of the
            # noise; only for a positive loss, where a relative rise means something
            if len(loss) and loss.min() > 0:
                dense |= own & (n >= th.spike_min_points) & (z >= th.spike_sigma_big_rise) \
                    & (loss > mean * (1 + th.spike_big_rise))
        for group in _group(steps, dense | sparse, th.merge_gap):
            first = group[0]
            # The peak: the highest loss from the first flag until it comes back down.
            end = np.searchsorted(steps, steps[group[-1]] + th.merge_gap, side="right")
            span = np.arange(first, max(end, first + 1))
            peak = span[np.argmax(loss[span])]
            few = bool(sparse[first])
            base = typical[first] if few else mean[first]
            sev = (loss[peak] - base) / (abs(base) * th.sparse_rise) * th.spike_sigma if few and base \
                else (loss[peak] - mean[first]) / scale[first] if scale[first] > 0 else th.spike_sigma
            events.append(Event("spike", "loss", int(steps[first]), seg, int(steps[peak]),
                                float(loss[peak]), float(base),
                                float(std[first]) if np.isfinite(std[first]) else float("nan"),
                                {"z": float(z[first]) if np.isfinite(z[first]) else None,
                                 "noise": float(noise[first]) if np.isfinite(noise[first]) else None,
                                 "sparse": few, "points": int(n[first])},
                                severity=float(sev)))
    return events


def _could_stand_out(values: np.ndarray, lo: np.ndarray, noise: np.ndarray, sigma: float) -> np.ndarray:
    """The points that may stand `sigma` noises out of their window [lo, i): a window's mean
    is at least its lowest value, and at least the lowest of the (at most two) blocks of the
    longest window's length that hold it. Only these points need the window's mean and std;
    on a long calm run they are a handful. Where the noise is unknown, every point may."""
    size = len(values)
    idx = np.arange(size)
    if size < 3 or not np.isfinite(noise).all():
        return idx
    width = max(int((idx - lo).max()), 1)
    blocks = -(-size // width)
    padded = np.full(blocks * width, np.inf)
    padded[:size] = values
    lowest = padded.reshape(blocks, width).min(axis=1)
    floor = np.minimum(lowest[lo // width], lowest[np.maximum(idx - 1, 0) // width])
    return np.flatnonzero((values - floor >= sigma * noise) & (lo < idx))


def _segment_ids(segments: np.ndarray) -> np.ndarray:
    """np.unique of the frame's segment column, which is sorted: its change points."""
    if len(segments) and bool((segments[1:] >= segments[:-1]).all()):
        return segments[np.r_[True, segments[1:] != segments[:-1]]]
    return np.unique(segments)


def _block(steps: np.ndarray, window: int) -> int:
    """Points per noise block: about one spike window's worth, at least 16."""
    if len(steps) < 2:
        return 16
    gap = max(interval(steps), 1e-9)
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


def _trailing_min(values: np.ndarray, k: int) -> np.ndarray:
    """The minimum of the `k` values before each point (NaN where one of them is NaN)."""
    n = len(values)
    out = np.full(n, np.nan)
    if n > k:
        low = values[:n - k].copy()          # k shifted copies: much faster than a strided min
        for j in range(1, k):
            np.minimum(low, values[j:n - k + j], out=low)
        out[k:] = low
    for i in range(1, min(k, len(values))):
        out[i] = values[:i].min()
    return out


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
    for seg, hist, _ in _segment_views(log, history):
        gn_all = hist.grad_norm.to_numpy(dtype=float, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            keep = np.isfinite(gn_all) & (gn_all > 0)
        steps, gn, own = hist.step.to_numpy()[keep], gn_all[keep], (hist.segment.to_numpy() == seg)[keep]
        if not own.any():
            continue
        lg = np.log10(gn)
        window = widen(steps, th.spike_window, th.spike_min_points)
        lo = shifted(steps, -window)
        # The median is at least the minimum: only points that far above the trailing
        # minimum can be candidates, and only their windows need the medians.
        with np.errstate(invalid="ignore"):
            maybe = np.flatnonzero(own & (lg - _trailing_min(lg, 10) > np.log10(th.grad_spike_min_ratio)))
        need = np.zeros(len(lg) + 1, dtype=np.int64)
        np.add.at(need, lo[maybe], 1)
        np.add.at(need, maybe + 1, -1)
        base = _trailing_median(lg, 10, np.flatnonzero(np.cumsum(need[:-1]) > 0))
        resid = lg - base
        with np.errstate(invalid="ignore"):
            candidates = np.flatnonzero(own & (resid > np.log10(th.grad_spike_min_ratio)))
        flagged = np.zeros(len(steps), dtype=bool)
        spread = np.full(len(steps), np.nan)
        sparse = np.zeros(len(steps), dtype=bool)
        for i in candidates:
            r = resid[lo[i]:i]
            r = r[np.isfinite(r)]
            if len(r) < th.spike_min_points:
                # a handful of rows: only a jump of decades over their median is sure
                sparse[i] = flagged[i] = len(r) >= 2 and resid[i] >= np.log10(th.sparse_grad_ratio)
                continue
            spread[i] = max(1.4826 * np.median(np.abs(r - np.median(r))), 1e-3)
            flagged[i] = resid[i] > th.grad_spike_sigma * spread[i]
        med = 10 ** base
        for group in _group(steps, flagged, th.merge_gap):
            peak = group[np.argmax(gn[group])]
            first = group[0]
            few = bool(sparse[first])
            # severity on the loss's scale: the residual in spreads, rescaled so that the
            # detection threshold of both is `spike_sigma`
            sev = (resid[peak] / np.log10(th.sparse_grad_ratio) if few
                   else (lg[peak] - base[first]) / (th.grad_spike_sigma * spread[first])) * th.spike_sigma
            events.append(Event("spike", "grad_norm", int(steps[first]), seg, int(steps[peak]),
                                float(gn[peak]), float(med[first]), float(spread[first]),
                                {"ratio": float(gn[peak] / med[first]), "sparse": few,
                                 "points": int(i - lo[i]) if (i := first) is not None else 0},
                                severity=float(sev)))
    return events


def scaler_events(log: RunLog, th: Thresholds) -> tuple[list[Event], list[int]]:
    """The loss scaler's overflows, as (cascades, steps of routine probes).

    A dynamic scaler (GradScaler, Megatron, DeepSpeed, fairseq) doubles its scale after N
    clean steps and the next step often overflows once: one skip, one halving, then normal
    training. That probe is routine. A cascade is a dense run of overflows, at least
    `cascade_halvings` halvings (or skips) with at most `cascade_gap` steps between one and
    the next (also halvings between two logged rows), dated at its first skip. The
    scaler's calibration at the start of training is neither."""
    from postmortem.diagnose.nan import overflow_rows, skip_counts
    f = log.frame
    skips = skip_counts(log) + overflow_rows(log)
    has_scale = "loss_scale" in f and f.loss_scale.notna().any()
    if not has_scale and not skips.any():
        return [], []
    first_step = int(f.step.iloc[0])
    cascades, probes = [], []
    seg_all = f.segment.to_numpy()
    for seg in _segment_ids(seg_all):
        rows = f[seg_all == seg]
        st = rows.step.to_numpy()
        sk = skips[seg_all == seg]
        marks = []                                        # (step, halvings, skips, from, to)
        if has_scale:
            sc = rows.loss_scale.to_numpy(dtype=float, na_value=np.nan)
            keep = np.flatnonzero(np.isfinite(sc) & (sc > 0))
            for k in np.flatnonzero(sc[keep][1:] < sc[keep][:-1]) + 1:
                i, j = keep[k - 1], keep[k]
                marks.append((int(st[j]), float(np.log2(sc[i] / sc[j])), 0.0, sc[i], sc[j]))
        for i in np.flatnonzero(sk > 0):
            marks.append((int(st[i]), 0.0, float(sk[i]), np.nan, np.nan))
        if not marks:
            continue
        marks.sort(key=lambda m: m[0])
        gap = max(th.cascade_gap, 1.5 * interval(st) if len(st) > 1 else 0)
        cluster = [marks[0]]
        for m in marks[1:] + [None]:
            if m is not None and m[0] - cluster[-1][0] <= gap:
                cluster.append(m)
                continue
            halvings = sum(c[1] for c in cluster)
            skipped = sum(c[2] for c in cluster)
            start = cluster[0][0]
            startup = first_step <= th.cascade_stable_before and start < first_step + th.cascade_stable_before
            if max(halvings, skipped) >= th.cascade_halvings and not startup:
                scales = [c for c in cluster if np.isfinite(c[3])]
                frm = scales[0][3] if scales else np.nan
                to = scales[-1][4] if scales else np.nan
                # the first skip: the step before a halving when the scale is logged after it
                dated = next((c[0] for c in cluster if c[2] > 0), start)
                cascades.append(Event("cascade", "loss_scale", int(dated), int(seg), int(cluster[-1][0]),
                                      float(to), float(frm), notes={
                                          "from": float(frm), "to": float(to), "halvings": float(halvings),
                                          "skipped": float(skipped) if skipped else None,
                                          "across_gap": len(cluster) == 1 and halvings >= th.cascade_halvings},
                                      severity=float(th.spike_sigma * max(halvings, skipped) / th.cascade_halvings)))
            elif not startup:
                probes.append(int(start))
            if m is not None:
                cluster = [m]
    return cascades, probes


def divergence_too_short(log: RunLog, th: Thresholds) -> str | None:
    """Why the divergence check cannot judge this log (too few steps or points), or None."""
    if "loss" not in log.frame:
        return "no training loss"
    f = log.frame
    loss = f.loss.to_numpy(dtype=float, na_value=np.nan)
    steps = f.step.to_numpy()[np.isfinite(loss)]
    if len(steps) < th.divergence_min_points:
        return f"skipped: {len(steps)} losses logged, needs {th.divergence_min_points}"
    window = widen(steps, th.divergence_window, th.divergence_min_points)
    span = int(steps[-1] - steps[0])
    if span < window:
        return f"skipped: {span + 1} steps logged, needs {window}"
    return None


def divergence(log: RunLog, th: Thresholds) -> list[Event]:
    """A sustained rise of the smoothed loss over `divergence_window` steps: by
    `divergence_min_rise` of its level and `divergence_sigma` times its own noise, with
    most of its steps (`divergence_rising_share`, not all) going up."""
    if "loss" not in log.frame:
        return []
    events = []
    for seg, rows in log.frame[log.frame.loss.notna()].groupby("segment"):
        steps, loss = rows.step.to_numpy(), rows.loss.to_numpy(dtype=float)
        finite = np.isfinite(loss)
        steps, loss = steps[finite], loss[finite]
        window = widen(steps, th.divergence_window, th.divergence_min_points)
        smooth_w = widen(steps, th.divergence_smooth, th.divergence_min_points // 4)
        if len(steps) < th.divergence_min_points or steps[-1] - steps[0] < window:
            continue
        smooth = pd.Series(loss, index=pd.to_timedelta(steps, unit="s")).rolling(
            f"{smooth_w}s", min_periods=1).mean().to_numpy()
        noise = step_noise(loss, _block(steps, window))
        per = np.maximum(1.0, smooth_w / max(interval(steps), 1e-9))
        noise_s = noise / np.sqrt(per)                 # the noise left in a mean of `per` points
        # Both rules below need the smoothed loss this far above its lowest so far (a rise
        # from a window back is never larger): most runs never are, and stop here.
        floor = np.minimum.accumulate(smooth)
        with np.errstate(invalid="ignore"):
            could = smooth - floor >= th.divergence_sigma * noise_s
            if floor[-1] > 0:
                could &= smooth - floor >= th.divergence_min_rise * floor
        if not could.any():
            continue
        rising = np.concatenate([[0], np.cumsum(np.diff(smooth) > 0)])
        lo = shifted(steps, -window)
        span_ok = steps - steps[lo] >= window * 0.9
        n = np.arange(len(steps)) - lo
        with np.errstate(invalid="ignore", divide="ignore"):
            share = (rising - rising[lo]) / np.maximum(n, 1)
            up = smooth - smooth[lo]
            rise = up / np.abs(smooth[lo])
        hit = span_ok & (share >= th.divergence_rising_share) & (rise >= th.divergence_min_rise) \
            & (up >= th.divergence_sigma * noise_s)
        # A climb slower than the window: from the lowest smoothed loss so far, at least a
        # window long, mostly rising, by the same margins.
        pos = np.arange(len(steps))
        low_at = np.maximum.accumulate(np.where(smooth <= floor, pos, 0))
        n_low = np.maximum(pos - low_at, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            up_low = smooth - smooth[low_at]
            slow = (steps - steps[low_at] >= window) \
                & ((rising - rising[low_at]) / n_low >= th.divergence_rising_share) \
                & (up_low / np.abs(smooth[low_at]) >= th.divergence_min_rise) \
                & (up_low >= th.divergence_sigma * noise_s)
        # sustained: still true half a window later (or at the log's end); a spike lifts a
        # rolling mean for one smoothing span only
        cond = hit | slow
        later = np.minimum(shifted(steps, window // 2), len(steps) - 1)
        cond &= cond[later]
        if cond.any():
            end = int(np.argmax(cond))
            start = lo[end] if hit[end] else low_at[end]
            if not hit[end]:
                up[end], rise[end], share[end] = up_low[end], up_low[end] / abs(smooth[start]), \
                    (rising[end] - rising[start]) / n_low[end]
            events.append(Event("divergence", "loss", int(steps[start]), int(seg), int(steps[-1]),
                                float(loss[start:].max()), float(smooth[start]), notes={
                                    "rise": float(rise[end]), "rising_share": float(share[end]),
                                    "confirmed_at": int(steps[end])},
                                severity=float(up[end] / noise[end]) if noise[end] > 0 else th.spike_sigma))
    return events


EPOCHS = ("epoch", "epochs", "train/epoch")
EVAL_ONLY = ("loss", "grad_norm", "lr")


def resumes(log: RunLog, th: Thresholds) -> list[dict]:
    """Where the run restarted: steps going back (a new segment), an epoch counter going
    back, or a wall-clock gap `resume_gap_factor` x the median time a step takes. A last
    row with no training metric (a final eval written after a pause) is not a restart."""
    f = log.frame
    out = [{"step": s["first_step"], "how": "steps went back", "segment": s["segment"]}
           for s in log.segments()[1:]]
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
