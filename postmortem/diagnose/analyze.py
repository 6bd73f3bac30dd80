"""`analyze`: walk both trees, turn tree B's events into incidents, fill their Symptoms
and rank the causes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np
import pandas as pd

from postmortem.diagnose.context import Context
from postmortem.diagnose.detectors.event import Event, overlaps
from postmortem.diagnose.models import Analysis, Check, Incident, IncidentKind, RelatedEvent, RunSummary
from postmortem.diagnose.nocause import why_no_cause
from postmortem.diagnose.patterns import lr_off_trend, nearest_cascade, rank
from postmortem.diagnose.series import between
from postmortem.diagnose.symptoms import symptoms
from postmortem.diagnose.thresholds import Thresholds
from postmortem.diagnose.trees import walk
from postmortem.run import RunLog


def _nan_events(ctx: Context) -> list[Event]:
    """One event per run of consecutive non-finite rows within a segment."""
    bad = ctx.nonfinite
    if not bad.any():
        return []
    f = ctx.frame
    seg, step = f.segment.to_numpy(), f.step.to_numpy()
    starts = np.flatnonzero(bad & ~np.r_[False, bad[:-1] & (seg[1:] == seg[:-1])])
    loss = f.loss.to_numpy() if "loss" in f else np.full(len(f), np.nan)
    out = []
    for row in starts:
        end = row
        while end + 1 < len(f) and bad[end + 1] and seg[end + 1] == seg[row]:
            end += 1
        before = (seg == seg[row]) & (step < step[row]) & (step >= step[row] - 100) & np.isfinite(loss)
        out.append(Event("nan", _what(f, row), int(step[row]), int(seg[row]), int(step[end]), float("nan"),
                         float(loss[before].mean()) if before.any() else float("nan"),
                         float(loss[before].std()) if before.sum() > 1 else float("nan")))
    return out


def _what(f: pd.DataFrame, row: int | np.integer) -> str:
    """The metric that went non-finite at `row`: the loss first, then the grad norm (a loss
    printed as 0.0 beside a NaN grad norm: the grad norm is what is not a number)."""
    for name in ("loss", "grad_norm"):
        if name in f:
            v = f[name].iloc[row]
            if v != v or v in (np.inf, -np.inf):
                return name
    return "nan_iterations" if "nan_iterations" in f else "loss"


def _bad_start(ctx: Context, checks: list[Check]) -> list[Event]:
    """A run that never started right (tree A's A1/A2 failed) is an incident of its own."""
    status = {c.id: c.status for c in checks}
    # A large first grad norm alone is normal for some models (LLaMA's first steps); with
    # a loss that does not move, or a loss far from ln V, the start itself is the incident.
    bad = status.get("A1") == "fail" or (status.get("A2") == "fail" and status.get("A6") == "fail")
    if not bad or not ctx.has("loss"):
        return []
    steps, loss = ctx.series("loss", 0)
    return [Event("bad-start", "loss", int(steps[0]), 0, int(steps[0]), float(loss[0]))]


def _reach(ctx: Context, host: Event, e: Event) -> float:
    """How far after `host`'s span `e` still belongs to it: `merge_gap`; a NaN after a blow-up
    that never came back, up to the next logged line (its last finite point is where the
    loss left the log's range)."""
    if e.kind == "nan" and host.notes.from_spike and host.kind == "divergence":
        return max(ctx.th.merge_gap, ctx.th.near_lines * ctx.every(e.segment))
    return ctx.th.merge_gap


@dataclass
class Merged:
    """An incident as its events merge: the one that leads it and the others that joined it,
    in words (`related`, as the JSON says them) and typed (`related_events`)."""

    event: Event
    related: list[str] = field(default_factory=list)
    related_events: list[RelatedEvent] = field(default_factory=list)

    def join(self, kind: str, e: Event, said: str, first: bool = False) -> None:
        at = 0 if first else len(self.related)
        self.related.insert(at, said)
        self.related_events.insert(at, RelatedEvent(kind=kind, metric=e.metric, step=e.step))


def _joins(m: Merged, e: Event, first: bool = False) -> None:
    """A NaN, spike or divergence joining an incident: said as its kind and step (a blow-up
    that stayed up is said as the spike it was)."""
    kind = "spike" if e.notes.from_spike else e.kind
    m.join(kind, e, f"{kind} at step {e.step}", first)


def incident_events(ctx: Context, checks: list[Check]) -> list[Merged]:
    """Tree B's events merged into incidents: a NaN, loss spike or divergence leads;
    grad-norm spikes and loss-scale cascades attach to a near one or stand alone."""
    lead = _nan_events(ctx) + [_stays_up(ctx, e) for e in ctx.loss_spikes] + ctx.divergences
    # NaN runs inside a spike's span, or spikes inside a NaN run, are one incident.
    slow = lambda e: e.kind == "divergence" and not e.notes.from_spike  # noqa: E731
    lead.sort(key=lambda e: (e.segment, not slow(e), e.step, e.kind != "nan"))
    merged: list[Merged] = []
    for e in lead:
        # A spike inside a divergence (a slow one from its start on; a blow-up until the loss
        # is back), or a NaN run inside a spike, belongs to it.
        # (a slow one spans until its smoothed loss is back where it rose from: a blow-up
        # after that is an incident of its own)
        host = next((m for m in merged if m.event.segment == e.segment and not slow(e) and (
            slow(m.event) and m.event.step <= e.step <= m.event.last + _reach(ctx, m.event, e)
            or e.step <= m.event.last + _reach(ctx, m.event, e))), None)
        if host is None:
            merged.append(Merged(e))
        elif e.kind == "nan" and host.event.kind == "spike":
            # a NaN leads the spike it merges with (its lead-up); a blow-up that stayed
            # up and ended non-finite stays the divergence it was
            _joins(host, host.event, first=True)
            host.event = e
        else:
            _joins(host, e)
    for extra in ctx.grad_spikes + ctx.cascades:
        # (a line away on a sparse log: a grad norm that jumps the row before the loss leaves)
        margin = max(20, int(ctx.th.near_lines * ctx.every(extra.segment))) if extra.metric == "grad_norm" else 20
        near = [m for m in merged if m.event.segment == extra.segment and overlaps(extra, m.event, margin)]
        if near:
            near[0].join(extra.kind, extra, f"{extra.metric} {extra.kind} at step {extra.step}")
        else:
            merged.append(Merged(extra))
    if not merged:
        merged = [Merged(e) for e in _bad_start(ctx, checks)]
    merged.sort(key=lambda m: (m.event.segment, m.event.step))
    return merged


def _severity(ctx: Context, ev: Event) -> float | None:
    if ev.kind == "divergence":
        # a sustained rise: its size over the step-to-step noise, averaged over the points
        # that rose (so a long slow climb is not drowned by one batch's spike)
        return max(ctx.th.spike_sigma, float(ev.severity))
    if ev.kind in ("nan", "bad-start"):
        return None
    return round(float(ev.severity), 2)


def _headline(ctx: Context, ev: Event) -> bool:
    """A grad-norm blip during warmup, with the loss calm, is not what to look at first."""
    return not (ev.metric == "grad_norm" and ev.kind == "spike" and ev.step <= ctx.warmup_end)


def _rise(ev: Event) -> float | None:
    if ev.kind not in ("spike", "divergence") or not np.isfinite(ev.peak) or not ev.window_mean > 0:
        return None
    return round(ev.peak / ev.window_mean, 3)


def _stays_up(ctx: Context, ev: Event) -> Event:
    """A spike of the loss that does not come back within the recovery window (`recovery_window` steps, or
    a few logged points on a sparse log) is a divergence, spanning until the loss is back
    within the band before it (or to the end). A spike judged on too few points (a short
    log) needs a point after its peak within that reach, still up, to be called one."""
    if ev.kind != "spike" or ev.metric != "loss" or ctx.recovered(ev) or ctx.recovery_unknown(ev):
        return ev       # (the log ending at its peak says neither, unless it climbed to there)
    after = between(ctx.history(ev.segment), ev.peak_step + 1, np.inf)
    after = after[np.isfinite(after.loss.to_numpy(dtype=float, na_value=np.nan))]
    if ev.notes.sparse and not ctx.kept_rising(ev) and not (
            len(after) and after.step.iloc[0] <= ev.peak_step + ctx.recovery_reach(ev.segment)):
        return ev       # (only a point past a hole after it: nothing says it stayed up)
    back = after.step.to_numpy()[(after.loss <= ctx.band(ev)).to_numpy()]
    end = int(back[0]) if len(back) else int(after.step.iloc[-1]) if len(after) else ev.peak_step
    return replace(ev, kind="divergence", notes=replace(ev.notes, from_spike=True), end_step=max(end, ev.peak_step))


def onset(ctx: Context, ev: Event) -> Event:
    """The incident dated where it began: a loss-scale cascade or an LR jump just before the
    loss rose (within `ctx.around` steps) dates it at itself."""
    if ev.metric != "loss" or ev.kind not in ("spike", "divergence", "nan"):
        return ev
    reach = ctx.around(ev.segment)
    # a divergence's start is the lowest point of a smoothed loss, known to half its smoothing
    # span: a cause that far after it is where it began
    late = ev.step + ctx.th.divergence_smooth // 2 if ev.kind == "divergence" and ev.notes.confirmed_at is not None \
        else ev.step
    starts = []
    c = nearest_cascade(ctx, ev)
    if c is not None and ev.step - reach <= c.step < late and c.step != ev.step:
        starts.append(c.step)
    if ctx.has("lr"):
        steps, lr = ctx.finite("lr", ev.segment)
        jump, _ = lr_off_trend(steps, lr, ev.step - reach, late, ctx.th.lr_jump_ratio, ctx.warmup_end)
        if jump is not None and jump.ratio > 1 and jump.step != ev.step:
            starts.append(jump.step)
    if not starts:
        return ev
    return replace(ev, step=min(starts), notes=replace(ev.notes, detected_at=ev.step))


def analyze(log: RunLog, thresholds: Thresholds | None = None, against: Sequence[RunLog] = ()) -> Analysis:
    """Walk the trees, find the incidents, rank their causes. `against`: other runs over the
    same data in the same order, whose spikes at the same steps point at the data."""
    th = thresholds or Thresholds()
    ctx = Context(log, th, others=[Context(other, th).as_other() for other in against])
    checks = walk(ctx)
    ctx.checks = checks
    incidents = []
    for merged in incident_events(ctx, checks):
        ev = onset(ctx, merged.event)
        hyps, confidence = rank(ctx, ev)
        kind = cast(IncidentKind, "spike" if ev.kind == "cascade" else ev.kind)     # (the model checks it)
        incidents.append(Incident(kind=kind, step=ev.step, symptoms=symptoms(ctx, ev), hypotheses=hyps,
                                  metric=ev.metric, segment=ev.segment, confidence=confidence,
                                  related=merged.related, related_events=merged.related_events, rise=_rise(ev),
                                  severity=_severity(ctx, ev),
                                  headline=_headline(ctx, ev), no_cause=why_no_cause(ctx, ev, hyps)))
    return Analysis(run=RunSummary(id=log.run_id, format=log.source.format, steps=len(log.frame),
                                   metrics=log.metrics, dtype=ctx.facts.dtype, warnings=list(log.source.warnings),
                                   facts_from=dict(ctx.facts.read_from)),
                    checks=checks, incidents=incidents)

