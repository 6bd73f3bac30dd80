"""Hypotheses: each pattern is a rule set over the panels. A rule that has the data it
needs adds an observation for or against, citing a panel and numbers; one that lacks
it says nothing. The score is support over support plus contradiction plus one."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from postmortem.diagnose.context import Context
from postmortem.diagnose.detect import Event
from postmortem.diagnose.models import PATTERNS, Hypothesis, Observation
from postmortem.diagnose.series import between

DISCRIMINATE = {
    "long-tail-token": "replay the step with the batch swapped for a neighbour, and the batch "
                       "from an earlier checkpoint; look at the per-token losses",
    "fp16-overflow": "replay the steps in fp32; find the first non-finite module",
    "lr-discontinuity": "replay with the scheduled LR instead of the logged one",
    "optimizer-reset": "replay from the checkpoint with the optimizer moments restored",
    "numerics": "replay the step with the first-non-finite-module probe",
    "bad-data": "compare the batch hash with its neighbours; replay with the batch swapped",
    "lr-too-high": "re-run the window at half the LR",
    "schedule-misconfigured": "plot the logged LR against the configured schedule",
    "weight-decay": "check the decay / no-decay parameter groups; record weight norms per layer",
    "bad-init": "check the init std and the loss at step 0 against ln V",
}


@dataclass
class Evidence:
    support: list[tuple[float, Observation]] = field(default_factory=list)
    against: list[tuple[float, Observation]] = field(default_factory=list)

    def add(self, supports: bool, weight: float, panel: str, text: str) -> None:
        (self.support if supports else self.against).append((weight, Observation(panel=panel, observation=text)))


@dataclass
class Features:
    """What the rules look at, measured once around the incident."""

    gn_ratio: float | None = None          # grad norm at the spike / rolling mean before
    gn_at: float | None = None
    lr_jump: float | None = None           # largest step-to-step LR ratio near the spike
    lr_vs_schedule: float | None = None    # logged / configured LR at the spike
    after_resume: int | None = None        # steps since a restart, if one is near
    cascade: Event | None = None
    skipped: float | None = None
    repeated_batch: int | None = None      # how many neighbours share the batch hash
    hashes_logged: bool = False
    first_nonfinite: str | None = None     # "+inf", "nan" of the loss at the incident
    recovers: bool | None = None
    moments_drop: float | None = None
    same_step: list[str] = field(default_factory=list)   # other runs spiking at this step too
    not_there: list[str] = field(default_factory=list)   # other runs that do not


def _near(steps, lo, hi):
    return (steps >= lo) & (steps <= hi)


def measure(ctx: Context, ev: Event) -> Features:
    f = Features()
    h = between(ctx.history(ev.segment), ev.step - 2 * ctx.th.spike_window, max(ev.peak_step, ev.step) + 50)
    st = h.step.to_numpy()
    if "grad_norm" in h:
        gn = h.grad_norm.to_numpy()
        before = np.isfinite(gn) & (st < ev.step) & (st >= ev.step - ctx.th.spike_window)
        at = np.isfinite(gn) & _near(st, ev.step - 2, max(ev.peak_step, ev.step))
        if before.sum() >= 3 and at.any():
            f.gn_at = float(gn[at].max())
            f.gn_ratio = f.gn_at / float(np.mean(gn[before]))
    if "lr" in h:
        rows = h[h.lr.notna()]
        s, lr = rows.step.to_numpy(), rows.lr.to_numpy()
        near = _near(s, ev.step - 10, ev.step)
        idx = np.flatnonzero(near)
        idx = idx[idx > 0]
        if len(idx):
            ratios = lr[idx] / np.maximum(lr[idx - 1], 1e-30)
            f.lr_jump = float(np.max(np.maximum(ratios, 1 / np.maximum(ratios, 1e-30))))
        sched = ctx.scheduled_lr(ev.step)
        at = rows[rows.step == ev.step].lr
        if sched and len(at):
            f.lr_vs_schedule = float(at.iloc[-1] / sched)
    for r in ctx.resumes:
        if 0 <= ev.step - r["step"] <= ctx.th.after_resume_steps and r["segment"] == ev.segment:
            f.after_resume = ev.step - r["step"]
    for c in ctx.cascades:
        if c.segment == ev.segment and c.step <= max(ev.peak_step, ev.step) + 20 \
                and ev.step - 20 <= max(c.peak_step, c.step):
            f.cascade = c
    if "skipped" in h:
        f.skipped = float(h[_near(st, ev.step, ev.peak_step + 5)].skipped.fillna(0).sum())
    if "batch_hash" in h and h.batch_hash.notna().any():
        f.hashes_logged = True
        at = h[h.step == ev.step].batch_hash
        if len(at) and at.iloc[-1] is not None:
            window = h[_near(st, ev.step - 50, ev.step - 1)].batch_hash
            f.repeated_batch = int((window == at.iloc[-1]).sum())
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
            f.same_step.append(f"{run_id} spikes at step {o.step} too ({o.metric} {o.window_mean:.3g} -> {o.peak:.3g})")
        elif ev.kind == "spike" and first <= ev.step <= last:     # it got there and stayed calm
            f.not_there.append(run_id)
    return f


def _cross_run(f: Features, e: Evidence, weight: float, why: str) -> None:
    """Another run over the same data in the same order: a spike at the same step there too
    points at the batch, not at this run's state."""
    for text in f.same_step:
        e.add(True, weight, "loss", f"{text}: {why}")
    for run_id in f.not_there:
        e.add(False, weight / 2, "loss", f"{run_id}, over the same data, does not spike here")


def _ev_long_tail(ctx, ev, f: Features, e: Evidence) -> None:
    if f.gn_ratio is not None:
        smooth = f.lr_jump is None or f.lr_jump < ctx.th.lr_jump_ratio
        big = f.gn_ratio >= ctx.th.long_tail_grad_ratio
        some = f.gn_ratio >= ctx.th.long_tail_grad_ratio / 3
        e.add((big or some) and smooth, 2.0 if big else 1.0, "grad-norm",
              f"grad norm {f.gn_at:.3g} at step {ev.step} is {f.gn_ratio:.1f}x its rolling mean"
              + (" with a smooth LR" if smooth else ""))
    if ev.kind == "spike" and ev.metric == "loss":
        from postmortem.diagnose.symptoms import recovered
        rec = recovered(ctx, ev)
        short = ev.peak_step - ev.step <= 2
        e.add(rec and short, 1.5, "loss", f"loss {ev.window_mean:.3g} -> {ev.peak:.3g} at step {ev.peak_step}, "
              + ("back within 50 steps" if rec else "not back within 50 steps"))
    if ev.kind == "nan":
        e.add(False, 1.0, "loss", f"the loss went non-finite at step {ev.step}, not a finite spike")
    if f.repeated_batch == 0:
        e.add(True, 0.5, "batch", f"the batch of step {ev.step} is unique among the 50 before it")
    if f.cascade is not None:
        e.add(False, 1.5, "loss-scale", f"loss scale {f.cascade.notes['from']:g} -> {f.cascade.notes['to']:g} near the spike")
    _cross_run(f, e, 2.0, "the same batch, so the data")


def _ev_fp16(ctx, ev, f: Features, e: Evidence) -> None:
    dtype = ctx.log.dtype
    if dtype in ("bf16", "fp32"):
        e.add(False, 5.0, "loss-scale", f"the run is {dtype}: no fp16 overflow")
    elif dtype == "fp16":
        e.add(True, 1.0, "loss-scale", "the run is fp16 with dynamic loss scaling")
    if f.cascade is not None:
        c = f.cascade
        e.add(True, 2.5, "loss-scale", f"loss scale {c.notes['from']:g} -> {c.notes['to']:g} "
              f"({c.notes['halvings']:.0f} halvings) from step {c.step}")
    elif ctx.has("loss_scale"):
        e.add(False, 1.5, "loss-scale", "no loss-scale cascade around the incident")
    if f.skipped:
        e.add(True, 1.0, "loss-scale", f"{f.skipped:.0f} skipped step(s) from step {ev.step}")
    if ev.kind == "nan" and f.recovers:
        e.add(True, 1.0, "loss", "finite again after the non-finite steps (skipped, not corrupted)")


def _ev_lr_disc(ctx, ev, f: Features, e: Evidence) -> None:
    if f.lr_jump is not None:
        jump = f.lr_jump >= ctx.th.lr_jump_ratio
        e.add(jump, 3.0 if jump else 1.5, "lr", f"largest LR change between logged steps near step {ev.step}: x{f.lr_jump:.2f}")
    if f.lr_vs_schedule is not None:
        off = abs(f.lr_vs_schedule - 1) > 0.2
        e.add(off, 2.0 if off else 1.0, "lr", f"logged LR is {f.lr_vs_schedule:.2f}x the configured schedule at step {ev.step}")


def _ev_opt_reset(ctx, ev, f: Features, e: Evidence) -> None:
    if f.after_resume is not None:
        e.add(True, 3.0, "loss", f"the incident comes {f.after_resume} step(s) after a restart")
    elif ctx.resumes:
        e.add(False, 2.0, "loss", f"no restart within {ctx.th.after_resume_steps} steps before it")
    else:
        e.add(False, 2.0, "loss", "the run never restarted")
    for text in f.same_step:
        e.add(False, 1.0, "loss", f"{text}: not this run's restart")
    cols = [c for c in ctx.frame.columns if c.startswith("adam_v_norm/")]
    if cols and f.after_resume is not None:
        e.add(True, 0.5, "optimizer-moments", f"Adam moments are recorded ({cols[0]}): compare them across the restart")


def _ev_numerics(ctx, ev, f: Features, e: Evidence) -> None:
    if ev.kind != "nan":
        e.add(False, 2.0, "loss", "every value around the incident is finite")
        return
    if f.first_nonfinite == "+inf":
        e.add(True, 2.0, "loss", f"the loss is +inf at step {ev.step} before any NaN: log(0) or exp overflow")
    if f.recovers is False:
        e.add(True, 1.0, "loss", "never finite again: the weights were corrupted")
    elif f.recovers:
        e.add(False, 1.0, "loss", "finite again later: the bad steps were skipped")
    if ctx.log.dtype in ("fp32", "bf16"):
        e.add(True, 1.0, "loss-scale", f"{ctx.log.dtype} run: no loss scaler to blame")


def _ev_bad_data(ctx, ev, f: Features, e: Evidence) -> None:
    if f.repeated_batch:
        e.add(True, 3.0, "batch", f"the batch of step {ev.step} was already trained {f.repeated_batch} time(s) in the 50 steps before")
    elif f.hashes_logged:
        e.add(False, 1.0, "batch", f"the batch hash of step {ev.step} is new")
    if "batch_index" in ctx.frame:
        h = between(ctx.history(ev.segment), ev.step - 99, ev.step).batch_index.dropna()
        dup = int(h.duplicated().sum())
        if dup:
            e.add(True, 2.0, "batch", f"{dup} repeated batch index(es) in the 100 steps up to {ev.step}")
    _cross_run(f, e, 1.0, "the same batch, so the data")


def _ev_lr_high(ctx, ev, f: Features, e: Evidence) -> None:
    if ev.kind == "divergence":
        e.add(True, 1.0, "loss", f"smoothed loss rising {ev.notes.get('rise', 0):.0%} from step {ev.step}")
    checks = {c.id: c for c in getattr(ctx, "checks", [])}
    if "A5" in checks and checks["A5"].status == "fail":
        e.add(True, 1.0, "grad-norm", checks["A5"].detail)
    if "B4.3" in checks and checks["B4.3"].status == "fail":
        e.add(True, 1.0, "grad-norm", checks["B4.3"].detail)
    if ev.kind == "spike" and f.lr_jump is not None and f.lr_jump < ctx.th.lr_jump_ratio:
        e.add(False, 0.5, "lr", "the LR is smooth through the spike")


def _ev_schedule(ctx, ev, f: Features, e: Evidence) -> None:
    checks = {c.id: c for c in getattr(ctx, "checks", [])}
    for cid in ("B4.1", "A3", "A4"):
        c = checks.get(cid)
        if c and c.status == "fail":
            e.add(True, 3.0 if cid == "B4.1" else 2.0, "lr", c.detail)
        elif c and c.status == "pass" and cid == "B4.1":
            e.add(False, 1.5, "lr", c.detail)
    if f.lr_vs_schedule is not None and abs(f.lr_vs_schedule - 1) <= 0.2 and ev.kind != "divergence":
        e.add(False, 1.0, "lr", "the logged LR follows the configured schedule")


def _ev_weight_decay(ctx, ev, f: Features, e: Evidence) -> None:
    checks = {c.id: c for c in getattr(ctx, "checks", [])}
    c = checks.get("B4.2")
    if c and c.status != "skipped":
        e.add(c.status == "fail", 2.0 if c.status == "fail" else 1.0, "weight-norm", c.detail)


def _ev_bad_init(ctx, ev, f: Features, e: Evidence) -> None:
    first = int(ctx.frame.step.iloc[0])
    if ev.kind != "bad-start" and ev.step > first + ctx.th.early_window:
        e.add(False, 2.0, "loss", f"the incident is at step {ev.step}, long after the start")
        return
    checks = {c.id: c for c in getattr(ctx, "checks", [])}
    for cid, w in (("A1", 3.0), ("A2", 2.0), ("A8", 1.0)):
        c = checks.get(cid)
        if c and c.status == "fail":
            e.add(True, w, "loss" if cid == "A1" else "grad-norm" if cid == "A2" else "weight-norm", c.detail)
        elif c and c.status == "pass" and cid in ("A1", "A2"):
            e.add(False, w / 2, "loss" if cid == "A1" else "grad-norm", c.detail)


RULES = {
    "long-tail-token": _ev_long_tail, "fp16-overflow": _ev_fp16, "lr-discontinuity": _ev_lr_disc,
    "optimizer-reset": _ev_opt_reset, "numerics": _ev_numerics, "bad-data": _ev_bad_data,
    "lr-too-high": _ev_lr_high, "schedule-misconfigured": _ev_schedule,
    "weight-decay": _ev_weight_decay, "bad-init": _ev_bad_init,
}


def rank(ctx: Context, ev: Event) -> tuple[list[Hypothesis], str]:
    """Every pattern scored for this incident, best first, and the confidence of the ranking."""
    feats = measure(ctx, ev)
    scored = []
    for order, pattern in enumerate(PATTERNS):
        e = Evidence()
        RULES[pattern](ctx, ev, feats, e)
        plus = sum(w for w, _ in e.support)
        minus = sum(w for w, _ in e.against)
        score = plus / (plus + minus + 1.0)
        scored.append((score, -order, pattern, e, plus))
    scored.sort(key=lambda t: t[:2], reverse=True)
    hyps = [Hypothesis(pattern=p, rank=i + 1, score=round(s, 3),
                       supported_by=[o for _, o in e.support], contradicted_by=[o for _, o in e.against],
                       discriminate=DISCRIMINATE[p])
            for i, (s, _, p, e, _) in enumerate(scored)]
    top = hyps[0].score
    margin = top - (hyps[1].score if len(hyps) > 1 else 0)
    low = (top < ctx.th.low_confidence_score or margin < ctx.th.low_confidence_margin
           or scored[0][4] < ctx.th.low_confidence_support)
    return hyps, "low" if low else "high"
