"""Loss spikes: a loss that stands out of the level of the window before it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
import pandas as pd

from postmortem.diagnose.detectors.event import Event, Notes
from postmortem.diagnose.detectors.windows import (
    History,
    block,
    could_stand_out,
    group,
    segment_views,
    window_median,
)
from postmortem.diagnose.series import interval, shifted, spacing, step_noise, widen, window_stats
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import RunLog


class Rise(NamedTuple):
    """A loss rise not called a spike, with why: too few points before it (`points`), or, on a
    log shorter than `spike_short_log`, a rise under `spike_sigma_big_rise` times the noise
    that log shows once widened for how few points it was estimated from (`rise`, `noise`,
    `widened`, from `diffs` differences; NaN where not that)."""

    step: int
    points: int
    segment: int
    rise: float = math.nan
    noise: float = math.nan
    widened: float = math.nan
    diffs: int = 0


Unjudged = list[Rise]


class ShortNoise(NamedTuple):
    """The batch noise of a log shorter than `spike_short_log` points, as a rise is judged on it."""

    noise: float           # 1.4826 MAD of its step-to-step differences over sqrt 2
    widened: float         # its `spike_short_quantile` upper bound from so few differences
    diffs: int


def short_noise(loss: np.ndarray, own: np.ndarray, i: int, level: float, excursion: bool,
                th: Thresholds) -> ShortNoise:
    """The batch noise a short log shows around a one-batch excursion at point `i` (a rise
    over `level`), and how large it could be given that so few differences estimate it:
    1.4826 MAD of the step-to-step differences between the segment's own points no higher
    than point `i` (less the two that touch it), over sqrt 2; its bound, sqrt(k / chi2_(1-q)(k)) times it for k
    differences (Wilson-Hilferty's chi2). NaN where the log holds `spike_short_log` points
    or more (its windows hold enough), where the loss does not come back (a rise that holds
    is no batch noise), or from fewer than 2 differences."""
    if len(loss) >= th.spike_short_log or not excursion:
        return ShortNoise(math.nan, math.nan, 0)
    mine = np.flatnonzero(own)
    j = int(np.searchsorted(mine, i))
    v = loss[mine]
    # between points no higher than it (a blow-up elsewhere is not this level's noise)
    low = (v[:-1] <= loss[i]) & (v[1:] <= loss[i])
    low[[k for k in (j - 1, j) if 0 <= k < len(low)]] = False
    d = np.abs(np.diff(v))[low]
    k = len(d)
    if k < 2:
        return ShortNoise(math.nan, math.nan, k)
    noise = float(np.median(d)) * 1.4826 / math.sqrt(2)
    c = 2 / (9 * k)
    chi = k * max(1 - c + NormalDist().inv_cdf(1 - th.spike_short_quantile) * math.sqrt(c), 0.05) ** 3
    return ShortNoise(noise, noise * math.sqrt(k / chi), k)


def held_back(loss: np.ndarray, steps: np.ndarray, own: np.ndarray, i: int, level: float, n: int, gap: float,
              seg: int, th: Thresholds) -> Rise | None:
    """The rise at point `i` over `level`, where a short log's noise holds it back (under
    `spike_sigma_big_rise` times that noise's bound); None where it stands out of it. Only
    a one-batch excursion is held: the loss is back under half the rise within
    `recovery_points` lines, each a logging interval after the one before."""
    rise = float(loss[i] - level)
    # back under half the rise within `recovery_points` lines, each a logging interval on
    nxt = np.arange(i + 1, min(i + 1 + th.recovery_points, len(loss)))
    nxt = nxt[: int(np.argmin(np.r_[np.diff(steps[np.r_[i, nxt]]) <= gap, False]))]
    back = bool((loss[nxt] <= level + rise / 2).any())
    sn = short_noise(loss, own, i, level, bool(back), th)
    if not math.isfinite(sn.widened) or not rise < th.spike_sigma_big_rise * sn.widened:
        return None
    return Rise(int(steps[i]), n, seg, rise, sn.noise, sn.widened, sn.diffs)


def one_batch(loss: np.ndarray, steps: np.ndarray, i: int, level: float, gap: float) -> bool:
    """The rise at point `i` over `level` is gone by the next line (a logging interval on):
    back under half the rise there, one batch's excursion."""
    return i + 1 < len(loss) and steps[i + 1] - steps[i] <= gap and \
        bool(loss[i + 1] <= level + (loss[i] - level) / 2)


class NoiseTail(NamedTuple):
    """What the big-rise rule's exceptions read, once per segment: the own points (`at`,
    their `steps`), each one's rise over the median of the 10 own points before it as a share
    of it (`up`; NaN where the loss is not all positive), and the points with a finite LR
    (`lr_at`, `lr`) with the place of the highest LR up to each (`top`)."""

    at: np.ndarray
    steps: np.ndarray
    up: np.ndarray
    lr_at: np.ndarray
    lr: np.ndarray
    top: np.ndarray


def noise_tail(loss: np.ndarray, steps: np.ndarray, own: np.ndarray, lr: np.ndarray) -> NoiseTail:
    """The segment's `NoiseTail`."""
    at = np.flatnonzero(own)
    v = loss[at]
    if len(v) and (v > 0).all():
        typical = pd.Series(v).rolling(10, min_periods=3).median().shift(1).to_numpy()
        up = v / typical - 1
    else:
        up = np.full(len(v), np.nan)
    lr_at = np.flatnonzero(np.isfinite(lr))
    x = lr[lr_at]
    # the first place of the running maximum (np.argmax of each prefix)
    new = np.r_[True, x[1:] > np.maximum.accumulate(x)[:-1]] if len(x) else np.zeros(0, dtype=bool)
    top = np.maximum.accumulate(np.where(new, np.arange(len(x)), 0))
    return NoiseTail(at, steps[at], up, lr_at, x, top)


def routine_rise(tail: NoiseTail, loss: np.ndarray, steps: np.ndarray, i: int, level: float, gap: float,
                 th: Thresholds) -> bool:
    """A one-batch excursion at point `i` that the log's own batch noise makes routinely: a
    long log (`spike_short_log` points or more) whose own points rise over the median of the
    10 before each, as a share of it (a loss that falls from 10 to 2 is noisier early in
    nats, not in share), by `spike_tail_share` of this one's rise at least
    `spike_tail_peers` times before it. A small batch's loss is heavy-tailed: the MAD that
    scales the noise sees its middle, not its tail, and over a thousand steps that tail
    passes 4 noises (a spike by the big-rise rule) by itself. Only for a rise judged by the
    big-rise rule: one past `spike_sigma` stands."""
    if len(loss) < th.spike_short_log or not one_batch(loss, steps, i, level, gap):
        return False
    j = int(np.searchsorted(tail.at, i))
    if j < 3 or not np.isfinite(tail.up[j]):
        return False
    bar = th.spike_tail_share * tail.up[j]
    # the noise shown before it: a blow-up after it (one that grows) is no batch noise
    end = int(np.searchsorted(tail.steps[:j], steps[i] - th.merge_gap * max(gap, 1.0)))
    found = 0
    while end > 0 and found < th.spike_tail_peers:       # back from it, a chunk at a time: fast on 1M points
        start = max(end - 4096, 0)
        found += int((tail.up[start:end] >= bar).sum())
        end = start
    return found >= th.spike_tail_peers


def warmup_bump(tail: NoiseTail, loss: np.ndarray, steps: np.ndarray, i: int, level: float, gap: float,
                th: Thresholds) -> bool:
    """A one-batch excursion at point `i` in the known bump of a warmup's end: the LR (up to
    point `i`) rose from under `warmup_bump_start` of its peak to that peak, and point `i` is
    within one warmup length after it, the LR smooth there (no `lr_jump_ratio` jump). The
    first steps at the peak LR are the roughest of a run (yolov5 #10209: "normal"); a rise
    past `spike_sigma` still stands."""
    if not one_batch(loss, steps, i, level, gap):
        return False
    k = int(np.searchsorted(tail.lr_at, i, side="right"))       # the LRs logged up to it
    if k < 3:
        return False
    x, top = tail.lr, int(tail.top[k - 1])
    s0, peak = steps[tail.lr_at[0]], steps[tail.lr_at[top]]
    if not (x[top] > 0 and x[0] <= th.warmup_bump_start * x[top] and top > 0):
        return False
    smooth = x[k - 1] <= x[k - 2] * th.lr_jump_ratio and x[k - 2] <= x[k - 1] * th.lr_jump_ratio
    return bool(peak < steps[i] <= peak + (peak - s0) and smooth)


def _noise_or_warmup(tail: NoiseTail, loss: np.ndarray, steps: np.ndarray, i: int, level: float, gap: float,
                     th: Thresholds) -> bool:
    """A rise judged by the big-rise rule only that is the log's batch-noise tail or the
    bump of its warmup's end."""
    return routine_rise(tail, loss, steps, i, level, gap, th) or warmup_bump(tail, loss, steps, i, level, gap, th)


def _hold(w: _Windows, at: np.ndarray, levels: np.ndarray, seg: int, th: Thresholds,
          unjudged: Unjudged) -> np.ndarray:
    """Which of the points `at` (over `levels`) a short log's noise holds back; each one held
    goes to `unjudged` with its numbers."""
    held = np.zeros(len(at), dtype=bool)
    if len(w.loss) >= th.spike_short_log:
        return held
    for k, (i, level) in enumerate(zip(at, levels)):
        r = held_back(w.loss, w.steps, w.own, int(i), float(level), int(w.n[i]), w.gap, seg, th)
        if r is not None:
            held[k] = True
            unjudged.append(r)
    return held


def loss_spikes(log: RunLog, th: Thresholds, histories: History | None = None,
                unjudged: Unjudged | None = None) -> list[Event]:
    """A loss that stands out of the level before it (the window's mean) by `spike_sigma`
    times the larger of the window's std and the series' own step-to-step noise (a single
    noisy batch is not a spike), and by `spike_min_rise` of the level (a practical margin).
    A log with too few points for either (a pasted snippet) is judged against the median
    of the points it has, and its spikes are marked sparse (low confidence). `unjudged` gets
    (step, points before it, segment) of each rise with too few points before it to judge."""
    unjudged = [] if unjudged is None else unjudged
    if "loss" not in log.frame:
        return []
    events: list[Event] = []
    for seg, hist in segment_views(log, histories):
        w = _windows(hist, seg, th)
        if w is None:
            continue
        start = len(unjudged)
        sparse, typical = _thin_rises(w, seg, th, unjudged)
        judged = _judge(w, sparse, th, unjudged, seg)
        unjudged[start:] = sorted(unjudged[start:], key=lambda r: r.step)     # in step order, as the reference
        events += _spikes(w, judged, sparse, typical, seg, th)
    return events


@dataclass(frozen=True)
class _Windows:
    """A segment's finite losses (its history before a resume too; `own`: its own rows),
    each with the window of the `n` points before it, from index `lo`, its noise, and the
    log's interval."""

    steps: np.ndarray
    loss: np.ndarray
    own: np.ndarray
    window: int
    lo: np.ndarray
    n: np.ndarray
    noise: np.ndarray
    gap: float                 # the logging interval (the median gap; NaN with one point)
    lr: np.ndarray             # the LR at each point (NaN where not logged)


@dataclass(frozen=True)
class _Judged:
    """The points judged against their window's mean and std (indices `at`), and which of
    them stand out (`dense`)."""

    at: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    scale: np.ndarray
    z: np.ndarray
    dense: np.ndarray


def _windows(hist: pd.DataFrame, seg: int, th: Thresholds) -> _Windows | None:
    """The segment's finite losses and their windows; None where it has none of its own."""
    loss = hist.loss.to_numpy(dtype=float, na_value=np.nan)
    keep = np.isfinite(loss)         # the columns it needs, not a copy of the frame
    steps, own = hist.step.to_numpy(), hist.segment.to_numpy() == seg
    lr = hist.lr.to_numpy(dtype=float, na_value=np.nan) if "lr" in hist else np.full(len(loss), np.nan)
    if not keep.all():
        steps, loss, own, lr = steps[keep], loss[keep], own[keep], lr[keep]
    if not own.any():
        return None
    even, gap = spacing(steps)
    window = widen(steps, th.spike_window, th.spike_min_points, gap)
    noise = step_noise(loss, block(steps, window, gap))
    lo = shifted(steps, -window, even=even)
    return _Windows(steps, loss, own, window, lo, np.arange(len(steps)) - lo, noise, gap, lr)


def _thin_rises(w: _Windows, seg: int, th: Thresholds, unjudged: Unjudged) -> tuple[np.ndarray, dict[int, float]]:
    """Pasted snippets and very sparse logs: too few points for a std; judged against the
    median of the window (of fewer than 10 points) instead. Returns (the indices of the
    sparse spikes, the window medians); a rise with too little history is put in `unjudged`."""
    thin = np.flatnonzero((w.n >= 1) & (w.n < min(th.spike_min_points, 10)))
    typical = window_median(w.loss, w.lo, thin)
    loss, n = w.loss, w.n
    # (also the first steps of a log: a short log has nothing else; a long one's window is
    # only filling up there, and a rise of `sparse_rise` over all before it still stands out)
    with np.errstate(invalid="ignore"):
        t = np.array([typical[int(i)] for i in thin])
        rises = w.own[thin] & (loss[thin] > t + np.abs(t) * th.sparse_rise) if len(thin) else thin > 0
    # too little history to judge: said so (B2), never taken for calm
    # a point past a hole has nothing better than the line or two before it; at the
    # start of a log, fewer than `spike_min_history` is too little; a pasted snippet
    # has nothing better either, and there only a rise twice `sparse_rise` is told
    pasted = (len(loss) < 3 * th.spike_min_points) & (loss[thin] > t + np.abs(t) * 2 * th.sparse_rise)
    # ... unless the next line, a logging interval on, is already back under the bar: a
    # one-line rise on a line or two of history is not told from the batch noise that the
    # snippet is too short to show (back only after a hole, it may have lasted)
    if len(thin):
        nxt = np.minimum(thin + 1, len(loss) - 1)
        back = (loss[nxt] <= t + np.abs(t) * th.sparse_rise) & (w.steps[nxt] - w.steps[thin] <= w.gap)
        pasted &= (thin + 1 == len(loss)) | ~back
    enough = pasted | (w.steps[thin] - w.steps[0] > w.window) | (n[thin] >= th.spike_min_history)
    # a short log's batch noise, from all of it: a rise under it is not told from that noise,
    # however few points are before it
    cand = thin[rises]
    held = _hold(w, cand, np.array([typical[int(i)] for i in cand]), seg, th, unjudged)
    unjudged.extend(Rise(int(w.steps[i]), int(n[i]), seg) for i in cand[~held & ~enough[rises]])
    return cand[~held & enough[rises]], typical


def _judge(w: _Windows, sparse: np.ndarray, th: Thresholds, unjudged: Unjudged, seg: int) -> _Judged:
    """Only the points that may stand out are judged against their window's mean and std
    (and, on a short log, against the noise the whole log shows; `unjudged` gets those it
    holds back)."""
    loss, n = w.loss, w.n
    at = could_stand_out(loss, n, w.noise, min(th.spike_sigma, th.spike_sigma_big_rise))
    if len(sparse):
        at = np.union1d(at, sparse)
    mean, std, _ = window_stats(w.steps, loss, w.window, at=at, lo=w.lo)
    x = loss[at]
    scale = np.fmax(std, w.noise[at])
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (x - mean) / scale
        full = w.own[at] & (n[at] >= th.spike_min_points)
        far = full & (z >= th.spike_sigma) & (x > mean + np.abs(mean) * th.spike_min_rise)
        dense = far.copy()
        # or a rise large in itself (a third of the level) a little less far out of the
        # noise; only for a positive loss, where a relative rise means something
        if len(loss) and loss.min() > 0:
            dense |= full & (z >= th.spike_sigma_big_rise) & (x > mean * (1 + th.spike_big_rise))
    held = np.zeros(len(at), dtype=bool)
    held[dense] = _hold(w, at[dense], mean[dense], seg, th, unjudged)
    maybe = np.flatnonzero(dense & ~far & ~held)
    if len(maybe):
        tail = noise_tail(w.loss, w.steps, w.own, w.lr)
        for k in maybe:
            held[k] = _noise_or_warmup(tail, w.loss, w.steps, int(at[k]), float(mean[k]), w.gap, th)
    return _Judged(at, mean, std, scale, z, dense & ~held)


def _spikes(w: _Windows, j: _Judged, sparse: np.ndarray, typical: dict[int, float], seg: int,
            th: Thresholds) -> list[Event]:
    """The flagged points, grouped (`merge_gap`), as events at their first point."""
    steps, loss = w.steps, w.loss
    flagged = np.zeros(len(loss), dtype=bool)
    flagged[j.at[j.dense]] = flagged[sparse] = True
    events = []
    for points in group(steps, flagged, th.merge_gap):
        first = points[0]
        k = int(np.searchsorted(j.at, first))      # its place among the judged points
        # The peak: the highest loss from the first flag until it comes back down.
        end = np.searchsorted(steps, steps[points[-1]] + th.merge_gap, side="right")
        span = np.arange(first, max(end, first + 1))
        peak = span[np.argmax(loss[span])]
        few = bool(np.isin(first, sparse))
        base = typical[int(first)] if few else j.mean[k]
        with np.errstate(invalid="ignore", divide="ignore"):
            sev = (loss[peak] - base) / (abs(base) * th.sparse_rise) * th.spike_sigma if few and base \
                else (loss[peak] - j.mean[k]) / j.scale[k] if j.scale[k] > 0 else th.spike_sigma
        events.append(Event("spike", "loss", int(steps[first]), seg, int(steps[peak]),
                            float(loss[peak]), float(base),
                            float(j.std[k]) if np.isfinite(j.std[k]) else float("nan"),
                            Notes(z=float(j.z[k]) if np.isfinite(j.z[k]) else None,
                                  noise=float(w.noise[first]) if np.isfinite(w.noise[first]) else None,
                                  sparse=few, points=int(w.n[first])),
                            severity=float(sev)))
    return events


def loss_spikes_reference(log: RunLog, th: Thresholds, unjudged: Unjudged | None = None) -> list[Event]:
    """`loss_spikes` as its checklist says it, one point at a time (slow: what the property
    test holds the vectorised one to). Each point is judged against the points of the
    `spike_window` steps before it: fewer than 10 (a snippet), against their median; at
    least `spike_min_points`, against their mean and std (or the series' noise, if larger)."""
    unjudged = [] if unjudged is None else unjudged
    if "loss" not in log.frame:
        return []
    events: list[Event] = []
    for seg, hist in segment_views(log):
        loss = hist.loss.to_numpy(dtype=float, na_value=np.nan)
        keep = np.isfinite(loss)
        steps, loss, own = hist.step.to_numpy()[keep], loss[keep], (hist.segment.to_numpy() == seg)[keep]
        lr = (hist.lr.to_numpy(dtype=float, na_value=np.nan) if "lr" in hist else np.full(len(keep), np.nan))[keep]
        if not own.any():
            continue
        window = widen(steps, th.spike_window, th.spike_min_points)
        noise = step_noise(loss, block(steps, window))
        tail = noise_tail(loss, steps, own, lr)
        flags = []                     # (index, sparse, level judged against, mean, std, scale, z)
        for i in range(len(loss)):
            before = loss[:i][steps[:i] >= steps[i] - window]      # the window: [step - window, step)
            n = len(before)
            if n == 0:
                continue
            mean = float(np.mean(before))
            std = float(np.std(before, ddof=1)) if n > 1 else 0.0
            scale = max(std, noise[i]) if math.isfinite(noise[i]) else std
            with np.errstate(invalid="ignore", divide="ignore"):
                z = float(np.divide(loss[i] - mean, scale))
            if n < min(th.spike_min_points, 10):
                typical = float(np.median(before))
                held = held_back(loss, steps, own, i, typical, n, interval(steps), seg, th) if own[i] and \
                    loss[i] > typical + abs(typical) * th.sparse_rise else None
                if held is not None:
                    unjudged.append(held)
                elif own[i] and loss[i] > typical + abs(typical) * th.sparse_rise:
                    back = i + 1 < len(loss) and loss[i + 1] <= typical + abs(typical) * th.sparse_rise \
                        and steps[i + 1] - steps[i] <= interval(steps)
                    pasted = len(loss) < 3 * th.spike_min_points and \
                        loss[i] > typical + abs(typical) * 2 * th.sparse_rise and not back
                    if pasted or steps[i] - steps[0] > window or n >= th.spike_min_history:
                        flags.append((i, True, typical, mean, std, scale, z))
                    else:
                        unjudged.append(Rise(int(steps[i]), n, seg))
            elif own[i] and n >= th.spike_min_points:
                far = z >= th.spike_sigma and loss[i] > mean + abs(mean) * th.spike_min_rise
                big = loss.min() > 0 and z >= th.spike_sigma_big_rise and loss[i] > mean * (1 + th.spike_big_rise)
                held = held_back(loss, steps, own, i, mean, n, interval(steps), seg, th) if far or big else None
                if held is not None:
                    unjudged.append(held)
                elif big and not far and _noise_or_warmup(tail, loss, steps, i, mean, interval(steps), th):
                    pass
                elif far or big:
                    flags.append((i, False, mean, mean, std, scale, z))
        events += _reference_spikes(flags, steps, loss, noise, window, seg, th)
    return events


def _reference_spikes(flags: list[tuple[int, bool, float, float, float, float, float]], steps: np.ndarray,
                      loss: np.ndarray, noise: np.ndarray, window: int, seg: int, th: Thresholds) -> list[Event]:
    """The reference's flagged points (index, sparse, level, mean, std, scale, z), grouped
    into spikes, each with its peak and severity."""
    events = []
    while flags:
        # a spike: its first flag and every flag within `merge_gap` steps of the one before
        first, few, base, mean, std, scale, z = flags[0]
        last = first
        while flags and steps[flags[0][0]] - steps[last] <= th.merge_gap:
            last = flags.pop(0)[0]
        # its peak: the highest loss until `merge_gap` steps after its last flag
        span = [k for k in range(first, len(loss)) if steps[k] <= steps[last] + th.merge_gap] or [first]
        peak = max(span, key=lambda k: (loss[k], -k))
        if few and base:
            sev = (loss[peak] - base) / (abs(base) * th.sparse_rise) * th.spike_sigma
        else:
            sev = (loss[peak] - mean) / scale if scale > 0 else th.spike_sigma
        events.append(Event("spike", "loss", int(steps[first]), seg, int(steps[peak]), float(loss[peak]),
                            float(base), float(std),
                            Notes(z=z if math.isfinite(z) else None,
                                  noise=float(noise[first]) if math.isfinite(noise[first]) else None,
                                  sparse=few, points=int((steps[:first] >= steps[first] - window).sum())),
                            severity=float(sev)))
    return events
