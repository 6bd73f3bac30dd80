"""Hypotheses: each pattern of the catalog (catalog.py) is a rule set over the panels. A rule
that has the data it needs adds an observation for or against, citing a panel, numbers and
their step; one that lacks it says nothing. The score is support over support plus
contradiction plus one; weights are named fields of `Thresholds`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
import pandas as pd

from postmortem.diagnose.catalog import CATALOG, Pattern
from postmortem.diagnose.context import Context
from postmortem.diagnose.detectors.event import Event, overlaps
from postmortem.diagnose.models import Confidence, Hypothesis, Observation
from postmortem.diagnose.series import between
from postmortem.diagnose.thresholds import Thresholds
from postmortem.numbers import number


@dataclass
class Weighing:
    """The observations for and against one hypothesis, each with its weight, as its rules add
    them; `rank` scores the hypothesis from them."""

    th: Thresholds | None = None
    support: list[tuple[float, Observation]] = field(default_factory=list)
    against: list[tuple[float, Observation]] = field(default_factory=list)

    def add(self, supports: bool, weight: str | float, panel: str, text: str, half: bool = False) -> None:
        w = getattr(self.th, weight) if isinstance(weight, str) else float(weight)
        (self.support if supports else self.against).append((w / 2 if half else w, Observation(panel=panel, observation=text)))


class Rule(Protocol):
    """One pattern's rules (catalog.py): they look at the incident's event `ev` and its
    measured features `f` and add observations to the weighing `e`. Keyword-only, so no
    rule takes them in the wrong order."""

    def __call__(self, ctx: Context, /, *, ev: Event, f: Features, e: Weighing) -> None: ...


class Scored(NamedTuple):
    """One pattern as `rank` scored it: its score, its place in the catalog (negated: the
    earlier wins a tie), the weighing of its observations and the weight in support."""

    score: float
    order: int
    pattern: Pattern
    weighing: Weighing
    support: float


class LRJump(NamedTuple):
    """An LR off its own trend: where, its value, and its ratio to the trend."""

    step: int
    lr: float
    ratio: float


class StepSpan(NamedTuple):
    """The steps an LR was judged on its trend, first to last."""

    first: int
    last: int


class LRRise(NamedTuple):
    """The LR over the incident: its first and last logged steps, their ratio and values."""

    first: int
    last: int
    ratio: float
    lr_first: float
    lr_last: float


class LRClimb(NamedTuple):
    """An LR higher on every logged row from `first` up to the incident's `at` (and on
    after it, `on_after`, where rows are logged after it): a warmup or schedule still rising."""

    first: int
    at: int
    rows: int
    lr_first: float
    lr_at: float
    on_after: bool | None


class Restart(NamedTuple):
    """A restart shortly before the incident: how many steps before it, at which step, how."""

    steps_before: int
    step: int
    how: str


class RepeatedIndexes(NamedTuple):
    """Batch indexes trained again in the window before the incident: how many, the first
    step one was."""

    repeats: int
    first_step: int


@dataclass
class Features:
    """What the rules look at, measured once around the incident, each with its step."""

    gn_ratio: float | None = None          # grad norm at the spike / rolling mean before
    gn_at: float | None = None
    gn_at_step: int | None = None          # where that grad norm is
    lr_jump: LRJump | None = None          # an LR off its trend
    lr_smooth: StepSpan | None = None      # the steps of an LR judged on its trend
    lr_rise: LRRise | None = None          # the LR over the incident
    lr_climb: LRClimb | None = None        # the LR still climbing, row after row, at the incident
    zero_loss_nan_grad: int = 0            # rows from the incident on with a loss of 0.0 and a NaN grad norm
    lr_vs_schedule: float | None = None    # logged / configured LR at the spike
    after_resume: Restart | None = None    # a near restart
    cascade: Event | None = None
    skipped: float | None = None
    repeated_batch: int | None = None      # how many neighbours share the batch hash
    repeated_index: RepeatedIndexes | None = None
    hashes_logged: bool = False
    first_nonfinite: str | None = None     # "+inf", "nan" of the loss at the incident
    recovers: bool | None = None
    same_step: list[str] = field(default_factory=list)   # other runs spiking at this step too
    not_there: list[str] = field(default_factory=list)   # other runs that do not


def lr_off_trend(steps: np.ndarray, lr: np.ndarray, lo: float, hi: float, ratio: float,
                 warmup_end: int) -> tuple[LRJump | None, StepSpan | None]:
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
        return LRJump(int(steps[i]), float(l2[k]), float(r[k])), None
    return None, StepSpan(int(steps[idx[0]]), int(steps[idx[-1]]))


def _near(steps: np.ndarray, lo: float, hi: float) -> np.ndarray:
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
    """The features of an incident, measured once for every pattern's rules."""
    f = Features()
    # on a sparse log, the window before reaches 3 logged rows back and "at the incident"
    # includes the row before it (where the grad norm jumps a row before the loss leaves)
    every = ctx.every(ev.segment)
    reach = max(ctx.th.spike_window, ctx.th.recovery_points * every)
    lo = ev.step - max(2, every)
    h = between(ctx.history(ev.segment), lo - 2 * reach, ev.last + 50)
    if "grad_norm" in h:
        _grad_norm_jump(f, h, lo, reach, ev)
    if "lr" in h:
        _lr_around(f, ctx, ev, h)
    f.after_resume = restart_before(ctx, ev)
    f.cascade = nearest_cascade(ctx, ev) or ongoing_collapse(ctx, ev)
    if "skipped" in h:
        f.skipped = float(h[_near(h.step.to_numpy(), ev.step, ev.last + 5)].skipped.fillna(0).sum())
    _batches(f, ctx, ev, h)
    if ev.kind == "nan" and "loss" in h:
        _nonfinite(f, ctx, ev, h)
    if ev.kind == "nan" and "loss" in h and "grad_norm" in h:
        # a loss printed as exactly 0.0 beside a grad norm printed NaN (not merely unlogged)
        fr = ctx.frame
        on = (fr.segment.to_numpy() == ev.segment) & (fr.step.to_numpy() >= ev.step)
        f.zero_loss_nan_grad = int((on & (fr.loss.to_numpy() == 0.0) & ctx.log.nan_mask("grad_norm")).sum())
    _other_runs(f, ctx, ev)
    return f


def _grad_norm_jump(f: Features, h: pd.DataFrame, lo: float, reach: float, ev: Event) -> None:
    """The largest grad norm at the incident over the mean of the `reach` steps before it."""
    st, gn = h.step.to_numpy(), h.grad_norm.to_numpy()
    at = np.isfinite(gn) & _near(st, lo, ev.last)
    before = np.isfinite(gn) & (st < lo) & (st >= lo - reach)
    if before.sum() >= 3 and at.any() and np.mean(gn[before]) > 0:
        k = np.flatnonzero(at)[np.argmax(gn[at])]
        f.gn_at, f.gn_at_step = float(gn[k]), int(st[k])
        f.gn_ratio = f.gn_at / float(np.mean(gn[before]))


def _lr_around(f: Features, ctx: Context, ev: Event, h: pd.DataFrame) -> None:
    """The LR judged on its trend, its rise over the incident, and against the schedule."""
    rows = h[h.lr.notna()]
    s, lr = rows.step.to_numpy(), rows.lr.to_numpy()
    fin = np.isfinite(lr)
    s, lr = s[fin], lr[fin]
    f.lr_jump, f.lr_smooth = lr_off_trend(s, lr, ev.step - 10, ev.last, ctx.th.lr_jump_ratio, ctx.warmup_end)
    span = (s >= ev.step) & (s <= ev.last)
    if span.sum() >= 2:
        a, b = np.flatnonzero(span)[[0, -1]]
        f.lr_rise = LRRise(int(s[a]), int(s[b]), float(lr[b] / lr[a]) if lr[a] > 0 else 1.0, float(lr[a]),
                           float(lr[b]))
    if f.lr_jump is None:
        f.lr_climb = lr_climbing(s, lr, ev.step, ev.last)
    sched = ctx.scheduled_lr(ev.step)
    at = rows[rows.step == ev.step].lr
    if sched and len(at):
        f.lr_vs_schedule = float(at.iloc[-1] / sched)


def lr_climbing(s: np.ndarray, lr: np.ndarray, step: int, last: int, rows: int = 3) -> LRClimb | None:
    """The LR higher on each of at least `rows` logged rows up to the incident at `step` (a
    warmup or schedule not yet at its peak when the incident came), and whether it rises on
    through the incident's span (None where nothing is logged after it)."""
    at = int(np.searchsorted(s, step, side="right")) - 1
    if at < rows - 1:
        return None
    k = at
    while k > 0 and lr[k - 1] < lr[k]:
        k -= 1
    if at - k + 1 < rows:
        return None
    after = lr[at:int(np.searchsorted(s, last, side="right"))]
    on = bool(np.all(np.diff(after) > 0)) if len(after) > 1 else None
    return LRClimb(int(s[k]), int(s[at]), at - k + 1, float(lr[k]), float(lr[at]), on)


def restart_before(ctx: Context, ev: Event) -> Restart | None:
    """The last restart of the incident's segment at most `after_resume_steps` before it."""
    found = None
    for r in ctx.resumes:
        if 0 <= ev.step - r.step <= ctx.th.after_resume_steps and r.segment == ev.segment:
            found = Restart(ev.step - r.step, r.step, r.how)
    return found


def _batches(f: Features, ctx: Context, ev: Event, h: pd.DataFrame) -> None:
    """The incident's batch among those before it: its hash seen again within
    `batch_repeat_window` steps, batch indexes repeated within `batch_index_window`."""
    if "batch_hash" in h and h.batch_hash.notna().any():
        f.hashes_logged = True
        at = h[h.step == ev.step].batch_hash
        if len(at) and at.iloc[-1] is not None:
            history = ctx.history(ev.segment)      # (the window may reach before h's rows)
            window = history[_near(history.step.to_numpy(), ev.step - ctx.th.batch_repeat_window,
                                   ev.step - 1)].batch_hash
            f.repeated_batch = int((window == at.iloc[-1]).sum())
    if "batch_index" in h:
        rows = between(ctx.history(ev.segment), ev.step - (ctx.th.batch_index_window - 1), ev.step)
        idx = rows.batch_index
        dup = idx.duplicated() & idx.notna()
        if dup.any():
            f.repeated_index = RepeatedIndexes(int(dup.sum()), int(rows.step[dup].iloc[0]))


def _nonfinite(f: Features, ctx: Context, ev: Event, h: pd.DataFrame) -> None:
    """What the loss was at a NaN incident (+inf first, or nan), and whether it came back."""
    first = h[h.step == ev.step].loss
    if len(first):
        v = first.iloc[-1]
        f.first_nonfinite = "+inf" if v == np.inf else "-inf" if v == -np.inf else "nan" if v != v else "finite"
    later = between(ctx.history(ev.segment), ev.step + 21, np.inf).loss
    f.recovers = bool(np.isfinite(later).any()) if len(later) else None


def _other_runs(f: Features, ctx: Context, ev: Event) -> None:
    """Other runs over the same data: those spiking at this step too, those calm here."""
    for other in ctx.others:
        match = [o for o in other.spikes if abs(o.step - ev.step) <= ctx.th.cross_run_steps]
        if match:
            o = min(match, key=lambda o: abs(o.step - ev.step))
            f.same_step.append(f"{other.run_id} spikes at step {o.step} too ({o.metric} {number(o.window_mean)} -> {number(o.peak)})")
        elif ev.kind == "spike" and other.first_step <= ev.step <= other.last_step:     # it got there and stayed calm
            f.not_there.append(other.run_id)


def rank(ctx: Context, ev: Event) -> tuple[list[Hypothesis], Confidence]:
    """Every pattern of the catalog scored for this incident, best first, and the confidence
    of the ranking: low when the best is weak, close to the next, or thinly supported."""
    feats = measure(ctx, ev)
    scored: list[Scored] = []
    for order, pattern in enumerate(CATALOG):
        e = Weighing(ctx.th)
        pattern.rules(ctx, ev=ev, f=feats, e=e)
        plus = sum(w for w, _ in e.support)
        minus = sum(w for w, _ in e.against)
        score = plus / (plus + minus + 1.0)
        scored.append(Scored(score, -order, pattern, e, plus))
    # at a score of 0, the catalog's order is no ranking: what the run contradicts goes last
    # (a cause ruled out is below one nothing speaks to), so none is listed first as if ranked;
    # below all, a cause of which the log shows nothing it needs (fp16 overflow in an fp32 log)
    def unranked(t: Scored) -> tuple[float, float]:
        if t.score:
            return 0.0, 0.0
        return -float(t.pattern.unseen is not None and t.pattern.unseen(ctx)), -sum(w for w, _ in t.weighing.against)

    scored.sort(key=lambda t: (t.score, *unranked(t), t.order), reverse=True)
    hyps = [Hypothesis(pattern=p.id, rank=i + 1, score=round(s, 3),
                       supported_by=[o for _, o in e.support], contradicted_by=[o for _, o in e.against],
                       discriminate=p.discriminate)
            for i, (s, _, p, e, _) in enumerate(scored)]
    top = hyps[0].score
    margin = top - (hyps[1].score if len(hyps) > 1 else 0)
    low = (top < ctx.th.low_confidence_score or margin < ctx.th.low_confidence_margin
           or scored[0].support < ctx.th.low_confidence_support or ev.notes.sparse)
    return hyps, "low" if low else "high"
