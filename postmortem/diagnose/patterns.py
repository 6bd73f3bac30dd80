"""Hypotheses: each pattern of the catalog (catalog.py) is a rule set over the panels. A rule
that has the data it needs adds an observation for or against, citing a panel, numbers and
their step; one that lacks it says nothing. The score is support over support plus
contradiction plus one; weights are named fields of `Thresholds`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from postmortem.diagnose.catalog import CATALOG
from postmortem.diagnose.context import Context
from postmortem.diagnose.detectors.event import Event, overlaps
from postmortem.diagnose.models import Hypothesis, Observation
from postmortem.diagnose.series import between
from postmortem.numbers import number

DISCRIMINATE = {p.id: p.discriminate for p in CATALOG}


@dataclass
class Weighing:
    """The observations for and against one hypothesis, each with its weight, as its rules add
    them; `rank` scores the hypothesis from them."""

    th: object = None
    support: list[tuple[float, Observation]] = field(default_factory=list)
    against: list[tuple[float, Observation]] = field(default_factory=list)

    def add(self, supports: bool, weight: str | float, panel: str, text: str, half: bool = False) -> None:
        w = getattr(self.th, weight) if isinstance(weight, str) else float(weight)
        (self.support if supports else self.against).append((w / 2 if half else w, Observation(panel=panel, observation=text)))


@dataclass
class Features:
    """What the rules look at, measured once around the incident, each with its step."""

    gn_ratio: float | None = None          # grad norm at the spike / rolling mean before
    gn_at: float | None = None
    gn_at_step: int | None = None          # where that grad norm is
    lr_jump: tuple | None = None           # (step, LR, ratio to the trend) of an LR off its trend
    lr_smooth: tuple | None = None         # (first, last step) of an LR judged on its trend
    lr_rise: tuple | None = None           # (first, last step, ratio, LR first, LR last) over the incident
    lr_vs_schedule: float | None = None    # logged / configured LR at the spike
    after_resume: tuple | None = None      # (steps since, restart step, how) of a near restart
    cascade: Event | None = None
    skipped: float | None = None
    repeated_batch: int | None = None      # how many neighbours share the batch hash
    repeated_index: tuple | None = None    # (count, first step) of repeated batch indexes
    hashes_logged: bool = False
    first_nonfinite: str | None = None     # "+inf", "nan" of the loss at the incident
    recovers: bool | None = None
    same_step: list[str] = field(default_factory=list)   # other runs spiking at this step too
    not_there: list[str] = field(default_factory=list)   # other runs that do not


def lr_off_trend(steps: np.ndarray, lr: np.ndarray, lo: float, hi: float, ratio: float,
                 warmup_end: int) -> tuple[tuple | None, tuple | None]:
    """The LR judged against its own trend between steps lo and hi: each value against the
    line through the two logged before it (a linear warmup and a cosine follow it, so does
    a doubling from step 1 to 2). A value `ratio` off it is a jump, except a drop that holds
    (a step decay) and the ramp of warmup. Returns (jump, smooth span)."""
    idx = np.flatnonzero((steps >= lo) & (steps <= hi))
    idx = idx[idx >= 2]
    if not len(idx):
        return None, None
    s0, s1, s2 = steps[idx - 2].astype(float), steps[idx - 1].astype(float), steps[idx].astype(float)
    l0, l1, l2 = lr[idx - 2], lr[idx - 1], lr[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        pred = l1 + (l1 - l0) * (s2 - s1) / np.maximum(s1 - s0, 1e-9)
        pred = np.where(pred > 0, pred, l1)
        r = l2 / pred
    off = np.isfinite(r) & ((r >= ratio) | (r <= 1 / ratio))
    for k in np.flatnonzero(off):
        i = idx[k]
        if r[k] < 1:
            later = lr[i + 1:i + 4]
            if len(later) and np.all(np.abs(later / max(l2[k], 1e-30) - 1) < 0.25):
                continue                    # a drop that holds: a step decay
        if 1 < r[k] < ratio * 2 and steps[i] <= warmup_end and l1[k] > l0[k]:
            continue                        # the ramp of warmup, steeper than a line (not x3 off it)
        return (int(steps[i]), float(l2[k]), float(r[k])), None
    return None, (int(steps[idx[0]]), int(steps[idx[-1]]))


def _near(steps, lo, hi):
    return (steps >= lo) & (steps <= hi)


def nearest_cascade(ctx: Context, ev: Event) -> Event | None:
    """The loss-scale cascade around the incident (within `ctx.around` steps of its span),
    the nearest; of two as near, the one before it (a cause comes first)."""
    margin = ctx.around(ev.segment)
    near = [(max(0, c.step - ev.last, ev.step - c.last), c.step > ev.step, c) for c in ctx.cascades
            if overlaps(c, ev, margin)]
    return min(near, key=lambda t: t[:2])[2] if near else None


def ongoing_collapse(ctx: Context, ev: Event) -> Event | None:
    """A persistent overflow (a scale below 1) before the incident that still holds at it."""
    return next((c for c in ctx.cascades if c.segment == ev.segment and c.notes.persistent == "below-1"
                 and c.step <= ev.step and ctx.scale_before(ev) < 1.0), None)


def measure(ctx: Context, ev: Event) -> Features:
    f = Features()
    # on a sparse log, the window before reaches 3 logged rows back and "at the incident"
    # includes the row before it (where the grad norm jumps a row before the loss leaves)
    every = ctx.every(ev.segment)
    reach = max(ctx.th.spike_window, ctx.th.recovery_points * every)
    lo = ev.step - max(2, every)
    h = between(ctx.history(ev.segment), lo - 2 * reach, ev.last + 50)
    st = h.step.to_numpy()
    if "grad_norm" in h:
        gn = h.grad_norm.to_numpy()
        at = np.isfinite(gn) & _near(st, lo, ev.last)
        before = np.isfinite(gn) & (st < lo) & (st >= lo - reach)
        if before.sum() >= 3 and at.any() and np.mean(gn[before]) > 0:
            k = np.flatnonzero(at)[np.argmax(gn[at])]
            f.gn_at, f.gn_at_step = float(gn[k]), int(st[k])
            f.gn_ratio = f.gn_at / float(np.mean(gn[before]))
    if "lr" in h:
        rows = h[h.lr.notna()]
        s, lr = rows.step.to_numpy(), rows.lr.to_numpy()
        fin = np.isfinite(lr)
        s, lr = s[fin], lr[fin]
        f.lr_jump, f.lr_smooth = lr_off_trend(s, lr, ev.step - 10, ev.last,
                                              ctx.th.lr_jump_ratio, ctx.warmup_end)
        span = (s >= ev.step) & (s <= ev.last)
        if span.sum() >= 2:
            a, b = np.flatnonzero(span)[[0, -1]]
            f.lr_rise = (int(s[a]), int(s[b]), float(lr[b] / lr[a]) if lr[a] > 0 else 1.0, float(lr[a]), float(lr[b]))
        sched = ctx.scheduled_lr(ev.step)
        at = rows[rows.step == ev.step].lr
        if sched and len(at):
            f.lr_vs_schedule = float(at.iloc[-1] / sched)
    for r in ctx.resumes:
        if 0 <= ev.step - r["step"] <= ctx.th.after_resume_steps and r["segment"] == ev.segment:
            f.after_resume = (ev.step - r["step"], r["step"], r["how"])
    f.cascade = nearest_cascade(ctx, ev) or ongoing_collapse(ctx, ev)
    if "skipped" in h:
        f.skipped = float(h[_near(st, ev.step, ev.last + 5)].skipped.fillna(0).sum())
    if "batch_hash" in h and h.batch_hash.notna().any():
        f.hashes_logged = True
        at = h[h.step == ev.step].batch_hash
        if len(at) and at.iloc[-1] is not None:
            window = h[_near(st, ev.step - 50, ev.step - 1)].batch_hash
            f.repeated_batch = int((window == at.iloc[-1]).sum())
    if "batch_index" in h:
        rows = between(ctx.history(ev.segment), ev.step - 99, ev.step)
        idx = rows.batch_index
        dup = idx.duplicated() & idx.notna()
        if dup.any():
            f.repeated_index = (int(dup.sum()), int(rows.step[dup].iloc[0]))
    if ev.kind == "nan" and "loss" in h:
        first = h[h.step == ev.step].loss
        if len(first):
            v = first.iloc[-1]
            f.first_nonfinite = "+inf" if v == np.inf else "-inf" if v == -np.inf else "nan" if v != v else "finite"
        later = between(ctx.history(ev.segment), ev.step + 21, np.inf).loss
        f.recovers = bool(np.isfinite(later).any()) if len(later) else None
    for run_id, spikes, first, last in ctx.others:
        match = [o for o in spikes if abs(o.step - ev.step) <= ctx.th.cross_run_steps]
        if match:
            o = min(match, key=lambda o: abs(o.step - ev.step))
            f.same_step.append(f"{run_id} spikes at step {o.step} too ({o.metric} {number(o.window_mean)} -> {number(o.peak)})")
        elif ev.kind == "spike" and first <= ev.step <= last:     # it got there and stayed calm
            f.not_there.append(run_id)
    return f


def rank(ctx: Context, ev: Event) -> tuple[list[Hypothesis], str]:
    """Every pattern of the catalog scored for this incident, best first, and the confidence
    of the ranking: low when the best is weak, close to the next, or thinly supported."""
    feats = measure(ctx, ev)
    scored = []
    for order, pattern in enumerate(CATALOG):
        e = Weighing(ctx.th)
        pattern.rules(ctx, ev, feats, e)
        plus = sum(w for w, _ in e.support)
        minus = sum(w for w, _ in e.against)
        score = plus / (plus + minus + 1.0)
        scored.append((score, -order, pattern, e, plus))
    scored.sort(key=lambda t: t[:2], reverse=True)
    hyps = [Hypothesis(pattern=p.id, rank=i + 1, score=round(s, 3),
                       supported_by=[o for _, o in e.support], contradicted_by=[o for _, o in e.against],
                       discriminate=p.discriminate)
            for i, (s, _, p, e, _) in enumerate(scored)]
    top = hyps[0].score
    margin = top - (hyps[1].score if len(hyps) > 1 else 0)
    low = (top < ctx.th.low_confidence_score or margin < ctx.th.low_confidence_margin
           or scored[0][4] < ctx.th.low_confidence_support or ev.notes.sparse)
    return hyps, "low" if low else "high"
