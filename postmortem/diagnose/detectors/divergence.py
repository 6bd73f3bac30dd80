"""Divergence: a sustained rise of the smoothed loss, over a window or slower, from its
lowest so far."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postmortem.diagnose.detectors.event import Event, Notes
from postmortem.diagnose.detectors.windows import _two_block_min, block, rolling_mean, segment_ids
from postmortem.diagnose.series import interval, segment_rows, spacing, step_noise, widen
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import RunLog


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
    for seg in segment_ids(seg_all):
        rows = segment_rows(seg_all, seg)
        steps, loss = steps_all[rows], loss_all[rows]
        finite = np.isfinite(loss)
        if not finite.all():
            steps, loss = steps[finite], loss[finite]
        if len(steps) < th.short_log_points:
            continue
        s = _smoothed(steps, loss, th)
        # (no slow rise can be there: the level shifts are still judged, as the reference does)
        rise = _first_confirmed(s, th) if s is not None else None
        slow = _event(s, rise, int(seg), th) if s is not None and rise is not None else None
        if slow is not None:
            events.append(slow)
        lr = f.lr.to_numpy(dtype=float, na_value=np.nan)[rows][finite] if "lr" in f else None
        events += _after_slow(steps, loss, lr, int(seg), th, slow)
    return events


def _after_slow(steps: np.ndarray, loss: np.ndarray, lr: np.ndarray | None, seg: int, th: Thresholds,
                slow: Event | None) -> list[Event]:
    """The segment's level shifts outside its slow divergence: before it, or judged from
    where it came back (its own levels from there: the loss it came back to)."""
    if slow is None:
        return level_shifts(steps, loss, lr, seg, th)
    back = int(np.searchsorted(steps, slow.last, side="right"))
    before = [e for e in level_shifts(steps, loss, lr, seg, th) if e.step < slow.step]
    if back >= len(steps) - 1:
        return before
    later = level_shifts(steps[back:], loss[back:], None if lr is None else lr[back:], seg, th, jumps_only=True)
    return before + later


def level_shifts(steps: np.ndarray, loss: np.ndarray, lr: np.ndarray | None, seg: int,
                 th: Thresholds, jumps_only: bool = False) -> list[Event]:
    """A jump to a higher level that stays: the loss leaves the band of the points before it
    (their median + the larger of `divergence_min_rise` of it and `divergence_sigma` robust
    step noises) and the points after it stay above, until the log ends or the LR is cut (an
    intervention: ReduceLROnPlateau, an annealing script). One that comes back down by itself
    is a spike that took long to recover, not this; nor is a jump back to the run's median so
    far from a dip below it (a repeated batch learnt by heart, then fresh data). Dated at the first point above the
    band's tighter core (the median + `spike_sigma` noises). Judged on any length of log:
    `spike_min_history` points before, `recovery_points` (or `recovery_window` steps) after.
    `jumps_only`: only a jump from the band's lower half (one of the 3 points before it), not a
    climb that crosses the band's top (after a slow divergence came back: a climb there is
    that one going on)."""
    n = len(loss)
    k, need_before = th.spike_min_points, th.spike_min_history
    if n < need_before + th.recovery_points + 1 or loss.min() <= 0:
        return []
    # the lowest level so far, as the median of 3 (one lucky batch is no level): a loss that
    # fell fast (warmup) and climbs back is judged from its lowest, not the points above it
    a, b, c = np.r_[loss[:2], loss[:-2]], np.r_[loss[:1], loss[:-1]], loss
    med3 = np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))
    lowest = np.minimum.accumulate(med3)
    # the step noise, robust (the MAD of the differences: a jump is a few of them): the
    # segment's, or the points' before a candidate where that is larger
    noise_all = _mad_noise(loss)
    gap = max(interval(steps), 1e-9)
    # (a log shorter than four recovery windows, an epoch log's 16 rows, stays for a quarter of it)
    stay = max(th.recovery_points, min(int(np.ceil(th.recovery_window / gap)), n // 4))
    # cheap superset: above the band over a lower bound of the level (the lowest median of 3
    # so far, or the lowest of the blocks that hold the k points before)
    floor = np.minimum(np.r_[np.inf, lowest[:-1]], _two_block_min(loss, k))
    bar = floor + np.maximum(th.divergence_min_rise * np.abs(floor), th.divergence_sigma * noise_all)
    maybe = np.flatnonzero(loss > bar)
    maybe = maybe[(maybe >= need_before) & (maybe + stay < n)]
    holes = np.flatnonzero(np.diff(steps) > 3 * gap) + 1       # the first point after each hole
    out: list[Event] = []
    done = -1
    for i in maybe.tolist():
        # its past: the points since the last hole in the log (more than 3 intervals), if enough
        since = int(holes[np.searchsorted(holes, i, side="right") - 1]) if len(holes) and holes[0] <= i else 0
        if i <= done or i - since < need_before:
            continue
        pre = loss[max(since, i - k):i]
        # (with fewer than k points before, a sparse log's, each is its stretch's level)
        low = float(lowest[i - 1]) if not since else float(med3[since + 2:i].min()) if i - since > 2 else np.inf
        level = min(float(np.median(pre)), low, float(pre.min()) if len(pre) < k else np.inf)
        before = loss[max(since, i - 3 * k):i]
        noise = max(noise_all, _mad_noise(before)) if len(before) > k else noise_all
        top = level + max(th.divergence_min_rise * abs(level), th.divergence_sigma * noise)
        after = loss[i:i + stay + 1]
        if not (loss[i] > top and np.median(after) > top and np.mean(after > top) >= th.divergence_rising_share):
            continue
        if jumps_only and loss[max(0, i - 3):i].min() > (level + top) / 2:
            continue
        if np.median(after) <= np.median(loss[since:i]):
            continue            # back to where the run has been, from a dip below it: a return
        back = _back_at(loss, i + stay, top)
        if back is not None and not _lr_cut(lr, max(0, i - k), i, back):
            done = back            # it came down by itself: a slow spike's recovery
            continue
        core = level + th.spike_sigma * noise
        first = int(i)
        while first - 1 >= max(since, 1) and loss[first - 1] > core and loss[first - 1] > level:
            first -= 1
        end = back - 1 if back is not None else n - 1      # (the last point still up: not the cut)
        peak = first + int(np.argmax(loss[first:end + 1]))
        out.append(Event("divergence", "loss", int(steps[first]), seg, int(steps[peak]), float(loss[peak]),
                         level, noise, notes=Notes(rise=float(loss[peak] / level - 1), from_spike=True,
                                                   points=len(pre), sparse=len(pre) < k),
                         severity=float((np.median(after) - level) / noise) if noise > 0 else th.spike_sigma,
                         end_step=int(steps[end])))
        done = end
    return out


def _mad_noise(values: np.ndarray) -> float:
    """The step noise of a stretch of loss, robust: 1.4826 MAD of its differences / sqrt 2
    (of at most 65,536 of them, evenly spread: a 1M-step log's MAD costs two partitions)."""
    d = np.diff(values)
    d = d[::max(1, len(d) // 65_536)]
    return 1.4826 * float(np.median(np.abs(d - np.median(d)))) / np.sqrt(2) if len(d) else 0.0


def _back_at(loss: np.ndarray, start: int, top: float) -> int | None:
    """The first index from `start` on where the loss, as the median of it and the 2 after it,
    is back under `top`: the first of those under it. Looked for in growing chunks (most come
    back soon; a 1M-step log is not scanned whole for each candidate)."""
    if len(loss) - start < 3:
        hit = np.flatnonzero(loss[start:] <= top)
        return start + int(hit[0]) if len(hit) else None
    size = 64
    while start + 2 < len(loss):
        part = loss[start:start + size + 2]
        a, b, c = part[:-2], part[1:-1], part[2:]
        med = np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))
        hit = np.flatnonzero(med <= top)
        if len(hit):
            j = int(hit[0])
            return start + j + int(np.argmax(part[j:j + 3] <= top))
        start += len(med)
        size *= 4
    return None


def _lr_cut(lr: np.ndarray | None, lo: int, i: int, back: int) -> bool:
    """The LR cut by a step (to under 0.7x the line before) between the jump and the loss's
    return, to at most half what it was before the jump (the points from `lo` to `i`): the
    return is the user's doing, not a recovery. (An LR jump that ends is no cut: it is back
    where it was; nor is a schedule's decay.)"""
    if lr is None:
        return False
    before = lr[lo:i]
    before = before[np.isfinite(before)]
    seen = lr[i:back + 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        dropped = bool((seen[1:] < 0.7 * seen[:-1]).any())
    return bool(dropped and len(before) and np.isfinite(lr[back]) and lr[back] <= 0.5 * np.median(before))


@dataclass(frozen=True)
class _Smoothed:
    """A segment's finite losses, smoothed over `smooth_w` steps, with the lowest smoothed
    loss so far (`floor`), the noise of a point and of the smoothed loss's (`need`:
    `divergence_sigma` of it), and how many of the smoothed steps went up so far."""

    steps: np.ndarray
    loss: np.ndarray
    window: int
    smooth_w: int
    smooth: np.ndarray
    floor: np.ndarray
    could: np.ndarray | None
    noise: np.ndarray
    need: np.ndarray
    above: np.ndarray
    rising: np.ndarray


@dataclass(frozen=True)
class _Rise:
    """The first confirmed rise: the index it is measured from (`start`: a window back, or
    the lowest smoothed loss so far, `low_at`), its confirmation's index (`end`) and how far
    the smoothed loss rose (`up`)."""

    start: int
    low_at: int
    end: int
    up: np.floating


def _smoothed(steps: np.ndarray, loss: np.ndarray, th: Thresholds) -> _Smoothed | None:
    """The smoothed loss and what the rules need of it; None where no point can meet them."""
    even, gap = spacing(steps)
    window, smooth_w = divergence_windows(steps, th, gap)
    smooth = rolling_mean(steps, loss, smooth_w, even)
    # Both rules below need the smoothed loss this far above its lowest so far (a rise
    # from a window back is never larger): most runs never are, and stop here. The
    # relative margin first: where it rules every point out, the noise is not needed.
    floor = np.minimum.accumulate(smooth)
    with np.errstate(invalid="ignore"):
        could = smooth - floor >= th.divergence_min_rise * floor if floor[-1] > 0 else None
    if could is not None and not could.any():
        return None
    noise = _noise(steps, loss, window, gap, th)
    per = np.maximum(1.0, smooth_w / max(gap, 1e-9))
    noise_s = noise / np.sqrt(per)                 # the noise left in a mean of `per` points
    need = th.divergence_sigma * noise_s
    with np.errstate(invalid="ignore"):
        above = smooth - floor >= need
    if not (above.any() if could is None else (above & could).any()):
        return None
    # smoothed steps that went up so far, each against the smoothed loss half a smoothing
    # span before it (a rolling mean moves by one point's noise per step: step by step, a
    # slow rise under per-step noise goes up only a little over half the time)
    lag = max(1, int(per // 2))
    rising = np.zeros(len(smooth), dtype=np.int64)
    if len(smooth) > lag:
        np.cumsum(smooth[lag:] > smooth[:-lag], out=rising[lag:])
    return _Smoothed(steps, loss, window, smooth_w, smooth, floor, could, noise, need, above, rising)


def _noise(steps: np.ndarray, loss: np.ndarray, window: int, gap: float, th: Thresholds) -> np.ndarray:
    """The loss's step-to-step noise at each point."""
    if window >= th.divergence_window:
        return step_noise(loss, block(steps, window, gap))
    # a short log: its slope is much of its step-to-step change and that slope changes
    # (an epoch log falls fast, then slowly): the noise from the second differences,
    # which a curve's slope does not reach (white noise: their std is sqrt 6 sigma)
    d2 = np.diff(loss, 2) if len(loss) > 2 else np.diff(loss)
    return np.full(len(loss), 1.4826 * np.median(np.abs(d2 - np.median(d2))) / np.sqrt(6))


def _first_confirmed(s: _Smoothed, th: Thresholds) -> _Rise | None:
    """The first point where either rule holds and still holds half a window later (or at
    the log's end): a spike lifts a rolling mean for one smoothing span only."""
    steps, smooth, rising, window = s.steps, s.smooth, s.rising, s.window
    # Only points this far above the lowest so far can meet either rule (with a NaN in
    # the smoothed loss, the lowest is NaN from there on: then every point is judged).
    i = np.flatnonzero(s.above) if s.floor[-1] == s.floor[-1] else np.arange(len(steps))
    lo = np.searchsorted(steps, steps[i] - window, side="left")
    marks = np.flatnonzero(smooth <= s.floor)           # where the smoothed loss is its lowest
    last = np.searchsorted(marks, i, side="right") - 1    # the last one so far (else row 0)
    low_at = np.where(last >= 0, marks[np.maximum(last, 0)], 0) if len(marks) else np.zeros_like(i)
    with np.errstate(invalid="ignore", divide="ignore"):
        up = smooth[i] - smooth[lo]
        hit = (steps[i] - steps[lo] >= window * 0.9) \
            & ((rising[i] - rising[lo]) / np.maximum(i - lo, 1) >= th.divergence_rising_share) \
            & (up / np.abs(smooth[lo]) >= th.divergence_min_rise) & (up >= s.need[i])
        # A climb slower than the window: from the lowest smoothed loss so far, at least
        # a window long, mostly rising, by the same margins.
        up_low = smooth[i] - smooth[low_at]
        slow = (steps[i] - steps[low_at] >= window) \
            & ((rising[i] - rising[low_at]) / np.maximum(i - low_at, 1) >= th.divergence_rising_share) \
            & (up_low / np.abs(smooth[low_at]) >= th.divergence_min_rise) & (up_low >= s.need[i])
    cond = np.zeros(len(steps), dtype=bool)
    cond[i] = hit | slow
    later = np.minimum(np.searchsorted(steps, steps[i] + window // 2, side="left"), len(steps) - 1)
    ok = cond[i] & cond[later]
    if not ok.any():
        return None
    k = int(np.argmax(ok))                      # the first point confirmed
    return _Rise(int(lo[k]) if hit[k] else int(low_at[k]), int(low_at[k]), int(i[k]),
                 up[k] if hit[k] else up_low[k])


def _event(s: _Smoothed, r: _Rise, seg: int, th: Thresholds) -> Event:
    """The confirmed rise as an event, dated where it began: at the lowest smoothed loss
    between the window's start and its confirmation (a window back may reach far before it)."""
    steps, smooth, loss, end = s.steps, s.smooth, s.loss, r.end
    first = max(r.low_at, int(np.searchsorted(steps, steps[r.start] - s.window)))
    start = min(r.start, first)
    start += int(np.argmin(smooth[start:end + 1]))
    with np.errstate(invalid="ignore", divide="ignore"):
        rise = r.up / np.abs(smooth[start])
    share = (s.rising[end] - s.rising[start]) / max(end - start, 1)
    onset = left_band(steps, loss, float(smooth[start]), float(s.noise[start]), start, end, s.window)
    # it spans until the smoothed loss is back at the level it rose from (within half the
    # margin it had to rise by), or to the log's end: what comes after is judged on its own
    with np.errstate(invalid="ignore"):
        home = np.flatnonzero(smooth[end:] <= smooth[start] + max(s.need[end], th.divergence_min_rise / 2
                                                                   * abs(smooth[start])))
    last = end + int(home[0]) if len(home) else len(steps) - 1
    peak = start + int(np.argmax(loss[start:last + 1]))     # where the highest loss is
    return Event("divergence", "loss", int(steps[onset]), seg, int(steps[peak]),
                 float(loss[peak]), float(smooth[start]), end_step=int(steps[last]),
                 notes=Notes(rise=float(rise), rising_share=float(share), confirmed_at=int(steps[end])),
                 severity=float(r.up / s.noise[end]) if s.noise[end] > 0 else th.spike_sigma)


def left_band(steps: np.ndarray, loss: np.ndarray, level: float, noise: float, start: int, end: int,
              window: int) -> int:
    """Where a jump that stays left its band: the first point from `start` (the lowest
    smoothed loss) to `end` above the pre-incident band, `level` + `BAND_NOISES` point noises,
    with the point after it above too (one noisy batch does not leave a band), where that
    point leaps past twice the band's half-width (a jump: a rolling mean's lowest point is
    the point before it, or the log's first row before a level that stays). A climb crosses
    the band's top by a little: it is dated where it began, at `start`, as before. The noise is
    the points' before `start` (a window of them; none before the log's first row), else the
    segment's `noise`: the chaos after a jump is no measure of the band before it."""
    pre = loss[int(np.searchsorted(steps, steps[start] - window, side="left")):start + 1]
    if len(pre) >= 4:
        noise = _mad_noise(pre)
    elif len(pre) == 1:
        noise = 0.0
    width = BAND_NOISES * max(noise, 0.0)
    with np.errstate(invalid="ignore"):
        up = loss[start:end + 2] > level + width
    both = up[:-1] & up[1:] if len(up) > 1 else up
    if end + 1 >= len(loss) and len(up) == end - start + 1:   # the log's last point: no point after
        both = np.r_[both, up[-1:]]
    hit = np.flatnonzero(both)
    if not len(hit):
        return start
    first = start + int(hit[0])
    return first if loss[first] > level + 2 * width else start


# the half-width of the band a loss stays in before an incident, in point noises (robust)
BAND_NOISES = 3.0


def divergence_reference(log: RunLog, th: Thresholds) -> list[Event]:
    """`divergence` as its checklist says it, one point at a time (slow: what the property
    test holds the vectorised one to). The loss, smoothed over `divergence_smooth` steps,
    rises by `divergence_min_rise` of its level and `divergence_sigma` noises, with most of
    its steps up, over a window (or from its lowest so far, over at least a window), and
    still does half a window later."""
    if "loss" not in log.frame:
        return []
    events = []
    f = log.frame
    for seg in sorted(set(f.segment.to_numpy().tolist())):
        rows = f[(f.segment == seg).to_numpy()]
        loss_all = rows.loss.to_numpy(dtype=float, na_value=np.nan)
        steps, loss = rows.step.to_numpy()[np.isfinite(loss_all)], loss_all[np.isfinite(loss_all)]
        if len(steps) >= th.short_log_points:
            slow = _segment_reference(steps, loss, int(seg), th)
            lr = rows.lr.to_numpy(dtype=float, na_value=np.nan)[np.isfinite(loss_all)] if "lr" in rows else None
            events += slow + _after_slow(steps, loss, lr, int(seg), th, slow[0] if slow else None)
    return events


def _segment_reference(steps: np.ndarray, loss: np.ndarray, seg: int, th: Thresholds) -> list[Event]:
    """One segment's first confirmed divergence, one point at a time."""
    gap = spacing(steps)[1]
    window, smooth_w = divergence_windows(steps, th)
    n = len(steps)
    # the mean of the loss over (step - smoothing, step]; its lowest so far
    smooth = np.array([loss[:i + 1][steps[:i + 1] > steps[i] - smooth_w].mean() for i in range(n)])
    floor = np.array([smooth[:i + 1].min() for i in range(n)])
    lowest = [max((j for j in range(i + 1) if smooth[j] <= floor[j]), default=0) for i in range(n)]
    per = max(1.0, smooth_w / max(gap, 1e-9))
    noise = _noise(steps, loss, window, gap, th)
    need = th.divergence_sigma * noise / np.sqrt(per)
    # how many smoothed steps went up so far, each against half a smoothing span before
    lag = max(1, int(per // 2))
    rising = np.array([sum(smooth[j] > smooth[j - lag] for j in range(lag, i + 1)) for i in range(n)])

    def rose(i: int, frm: int, span: float) -> bool:
        """From index `frm` to `i`: at least `span` steps, mostly up, by both margins."""
        up = smooth[i] - smooth[frm]
        with np.errstate(invalid="ignore", divide="ignore"):
            return bool(steps[i] - steps[frm] >= span
                        and (rising[i] - rising[frm]) / max(i - frm, 1) >= th.divergence_rising_share
                        and up / np.abs(smooth[frm]) >= th.divergence_min_rise and up >= need[i])

    def window_start(i: int) -> int:
        return int(np.searchsorted(steps, steps[i] - window, side="left"))

    def holds(i: int) -> bool:
        return rose(i, window_start(i), window * 0.9) or rose(i, lowest[i], window)

    for i in range(n):
        later = min(int(np.searchsorted(steps, steps[i] + window // 2, side="left")), n - 1)
        if not (holds(i) and holds(later)):
            continue
        start = window_start(i) if rose(i, window_start(i), window * 0.9) else lowest[i]
        up = smooth[i] - smooth[start]
        # where it began: the lowest smoothed loss from a window before its start on
        start = min(start, max(lowest[i], int(np.searchsorted(steps, steps[start] - window))))
        start += int(np.argmin(smooth[start:i + 1]))
        # its span: to the first point from its confirmation on back near where it rose from
        margin = max(need[i], th.divergence_min_rise / 2 * abs(smooth[start]))
        last = next((j for j in range(i, n) if smooth[j] <= smooth[start] + margin), n - 1)
        peak = start + int(np.argmax(loss[start:last + 1]))
        with np.errstate(invalid="ignore", divide="ignore"):
            rise = up / np.abs(smooth[start])
        share = (rising[i] - rising[start]) / max(i - start, 1)
        onset = left_band(steps, loss, float(smooth[start]), float(noise[start]), start, i, window)
        return [Event("divergence", "loss", int(steps[onset]), seg, int(steps[peak]), float(loss[peak]),
                      float(smooth[start]), end_step=int(steps[last]),
                      notes=Notes(rise=float(rise), rising_share=float(share), confirmed_at=int(steps[i])),
                      severity=float(up / noise[i]) if noise[i] > 0 else th.spike_sigma)]
    return []
