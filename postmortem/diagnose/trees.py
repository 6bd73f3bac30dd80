"""Tree A (configuration) and tree B (dynamics) as data: ids, questions, thresholds, leaves.

Each node's test is a small function over the Context; `walk` runs them all and
returns every node as pass, fail (with the leaf it leads to) or skipped with why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from postmortem.diagnose.context import DECAYS, Context
from postmortem.diagnose.detectors.cascades import ScaleDrop
from postmortem.diagnose.detectors.divergence import divergence_too_short, divergence_windows
from postmortem.diagnose.detectors.short_rise import lone_rise
from postmortem.diagnose.models import Check, Status
from postmortem.diagnose.scaler import cascade_words, persistent_words
from postmortem.diagnose.series import interval
from postmortem.numbers import number

# (status, detail), or (status, detail, leaf) where a failure leads elsewhere than the
# node's own leaf
Outcome = tuple[Status, str] | tuple[Status, str, str]


@dataclass(frozen=True)
class Node:
    id: str
    question: str
    thresholds: tuple[str, ...]
    leaf: str | None
    test: Callable[[Context], Outcome]


def skip(why: str) -> tuple[Status, str]:
    return "skipped", why


def _fmt(x: float) -> str:
    return f"{x:.4g}"


# --- tree A: did the run start right ----------------------------------------------

def from_trained(ctx: Context) -> str | None:
    """Why the run starts from a trained model (a fine-tune), or None: the config says so,
    or the first loss is far below ln V (a random model scores about ln V)."""
    if ctx.facts.from_trained:
        return "the run starts from a trained model (its config)"
    if ctx.ln_v is not None and ctx.has("loss"):
        steps, loss = ctx.finite("loss", 0)
        if len(loss) and loss[0] < ctx.ln_v * (1 - ctx.th.trained_start_below):
            return (f"the run starts from a trained model (loss {_fmt(loss[0])} at step "
                    f"{steps[0]}, far below ln V = {_fmt(ctx.ln_v)})")
    return None


def a_start_loss(ctx: Context) -> Outcome:
    if not ctx.has("loss"):
        return skip("no training loss")
    if ctx.ln_v is None:
        return skip("vocab_size unknown (not in manifest.json nor the log's config)")
    if why := from_trained(ctx):
        return skip(why)
    steps, loss = ctx.series("loss", 0)
    if not len(steps):
        return skip("no training loss in the log's first segment")
    if steps[0] > ctx.th.log_start_max:
        return skip(f"the log starts at step {steps[0]}")
    d = loss[0] - ctx.ln_v
    ok = abs(d) <= ctx.th.start_loss_vs_ln_v
    return ("pass" if ok else "fail"), f"loss {_fmt(loss[0])} at step {steps[0]}, ln V = {_fmt(ctx.ln_v)}"


def a_first_grad_norm(ctx: Context) -> Outcome:
    if not ctx.has("grad_norm"):
        return skip("no grad norm logged")
    if why := from_trained(ctx):
        return skip(why)
    steps, gn = ctx.series("grad_norm", 0)
    if not len(steps):
        return skip("no grad norm in the log's first segment")
    if steps[0] > ctx.th.log_start_max:
        return skip(f"the log starts at step {steps[0]}")
    # a gradient's norm grows as the square root of the parameters it spans: the bound holds
    # for a model of `first_grad_norm_params`, and widens with a larger one where its size is known
    size = ctx.facts.n_params
    bound = lambda n: ctx.th.first_grad_norm_max * max(1.0, n / ctx.th.first_grad_norm_params) ** 0.5  # noqa: E731
    said = f"grad norm {_fmt(gn[0])} at step {steps[0]}"
    if size:
        top = bound(size)
        ok = ctx.th.first_grad_norm_min <= gn[0] <= top
        return ("pass" if ok else "fail"), (f"{said}; bound {_fmt(top)} for a model of {size / 1e6:.4g}M "
                                            f"parameters ({ctx.facts.read_from.get('n_params')})")
    # the size unknown: too small fails at any size; too large only beyond the largest model's
    # bound; in between, the size decides and the log does not say it
    largest = bound(ctx.th.first_grad_norm_params_max)
    if gn[0] < ctx.th.first_grad_norm_min or gn[0] > largest:
        return "fail", f"{said}; out of range for any model size (up to {_fmt(largest)})"
    if gn[0] <= ctx.th.first_grad_norm_max:
        return "pass", f"{said}; model size unknown: within the bound of the smallest models"
    return skip(f"cannot tell: {said} is above {_fmt(ctx.th.first_grad_norm_max)}, the bound assumed for a model of "
                f"at most {ctx.th.first_grad_norm_params / 1e6:g}M parameters, and the log states no model "
                "size (no parameter count, d_model or layers)")


def a_schedule_applies(ctx: Context) -> Outcome:
    if not ctx.has("lr"):
        return skip("no LR logged")
    _, lr = ctx.finite("lr")
    if len(lr) < 3:
        return skip("fewer than 3 LR values")
    c = ctx.facts
    planned = c.schedule not in (None, "constant") or (c.warmup_steps or 0) > 0
    if lr.max() > lr.min():
        return "pass", f"LR from {_fmt(lr.min())} to {_fmt(lr.max())}" + _still_climbing(ctx)
    if not planned:
        return "pass", f"LR constant at {_fmt(lr[0])}; no schedule configured (manifest.json or the log's config)"
    return "fail", f"LR constant at {_fmt(lr[0])} although the config plans a {c.schedule or 'warmup'} schedule"


def _still_climbing(ctx: Context, rows: int = 3) -> str:
    """Said where the LR is higher on each of the log's last `rows` rows or more: a warmup
    (or a schedule) still rising where the log ends, which the ranking weighs at an incident."""
    steps, lr = ctx.finite("lr")
    up = np.diff(lr) > 0
    n = len(up) - int(np.flatnonzero(~up)[-1]) if (~up).any() else len(up)    # rises at the end, in a row
    if n + 1 < rows:
        return ""
    return (f"; still climbing where the log ends: higher on each of its last {n + 1} rows "
            f"({_fmt(lr[-n - 1])} at step {steps[-n - 1]} -> {_fmt(lr[-1])} at step {steps[-1]})")


def a_warmup(ctx: Context) -> Outcome:
    c = ctx.facts
    if not ctx.has("lr"):
        return skip("no LR logged")
    if not c.lr_max or not c.warmup_steps:
        return skip("lr_max / warmup_steps unknown (not in manifest.json nor the log's config)")
    steps, lr = ctx.series("lr", 0)
    at = np.searchsorted(steps, c.warmup_steps - 1)
    if at >= len(steps):
        return skip("the log ends before warmup does")
    got = lr[at]
    off = abs(got / c.lr_max - 1)
    detail = f"LR {_fmt(got)} at step {steps[at]} (end of warmup), lr_max {_fmt(c.lr_max)}"
    return ("pass" if off <= ctx.th.warmup_reach else "fail"), detail


def a_decays(ctx: Context) -> Outcome:
    """After warmup, a decaying schedule never takes the LR back up (restarts aside)."""
    c = ctx.facts
    if not ctx.has("lr"):
        return skip("no LR logged")
    if c.schedule is None:
        return skip("no schedule configured (manifest or the log's config)")
    if c.schedule not in DECAYS:
        return skip(f"the configured schedule ({c.schedule}) does not decay")
    steps, lr = ctx.series("lr", 0)
    keep = (steps >= ctx.warmup_end) & np.isfinite(lr)
    steps, lr = steps[keep], lr[keep]
    if len(lr) < 3:
        return skip(f"{len(lr)} LR values logged after warmup, needs 3")
    # the climb made of small steps (a jump in one step is a discontinuity, B2's business)
    with np.errstate(divide="ignore", invalid="ignore"):
        step_up = np.diff(np.log(np.maximum(lr, 1e-30)))
    gradual = np.where(step_up < np.log(ctx.th.lr_jump_ratio), step_up, 0.0)
    climb = np.concatenate([[0.0], np.cumsum(gradual)])
    over = climb - np.minimum.accumulate(climb)
    worst = int(np.argmax(over))
    if np.exp(over[worst]) > 1 + ctx.th.warmup_reach:
        at = int(np.argmax(climb[:worst + 1] == climb[:worst + 1].min()))
        return "fail", (f"LR rises after warmup although the config says {c.schedule}: "
                        f"{_fmt(lr[at])} at step {steps[at]} -> {_fmt(lr[worst])} at step {steps[worst]} "
                        f"(x{np.exp(over[worst]):.2f})")
    return "pass", f"LR decays after warmup ({_fmt(lr[0])} at step {steps[0]} -> {_fmt(lr[-1])} at step {steps[-1]})"


def a_grad_regime(ctx: Context) -> Outcome:
    if not ctx.has("grad_norm"):
        return skip("no grad norm logged")
    _, gn = ctx.finite("grad_norm")
    dead = (gn < ctx.th.dead_grad_norm).mean()
    if dead > 0.5:
        # No gradient is no learning (a detached graph, frozen parameters, a zero init), the
        # opposite of an LR too high; the catalog has no "bug" leaf, bad-init is the nearest
        return ("fail", f"grad norm below {ctx.th.dead_grad_norm:g} on {dead:.0%} of steps (dead: "
                "nothing learns; a detached graph, frozen parameters or a zero init)", DEAD_GRADIENT_LEAF)
    clip = ctx.facts.clip
    if not clip:
        return "pass", "not dead; clipping unknown (no clip in manifest.json nor the log's config)"
    share = (gn > clip).mean()
    ok = share <= ctx.th.clipping_share_max
    return ("pass" if ok else "fail"), f"grad norm above clip {clip:g} on {share:.0%} of steps"


def _starts_late(ctx: Context, steps: np.ndarray) -> int | None:
    """The first logged step of a log that does not cover the start of training (an
    excerpt, a run resumed into a fresh log), else None: later than `log_start_max` and
    than one logging interval."""
    if not len(steps):
        return None
    first = int(steps[0])
    every = interval(steps) if len(steps) > 1 else 0.0
    return first if first > max(ctx.th.log_start_max, every) else None


DEAD_GRADIENT_LEAF = "bad-init"


def a_loss_moves(ctx: Context) -> Outcome:
    if not ctx.has("loss"):
        return skip("no training loss")
    steps, loss = ctx.series("loss", 0)
    if not len(steps):
        return skip("no training loss in the log's first segment")
    # "early" is early in training: a log that starts later cannot say the loss moved then
    if (first := _starts_late(ctx, steps)) is not None:
        return skip(f"the log starts at step {first}, not at the start of training: it cannot "
                    "say whether the loss moved early")
    early = np.isfinite(loss) & (steps <= steps[0] + ctx.th.early_window)
    if early.sum() < 5:
        return skip(f"{int(early.sum())} losses logged in the first {ctx.th.early_window} steps, needs 5")
    v = loss[early]
    head, tail = np.median(v[: max(1, len(v) // 5)]), np.median(v[-max(1, len(v) // 5):])
    drop = (head - tail) / abs(head) if head else 0.0
    ok = drop >= ctx.th.early_min_drop
    return ("pass" if ok else "fail"), f"loss {_fmt(head)} -> {_fmt(tail)} over the first {ctx.th.early_window} steps"


def train_level_at(ctx: Context, step: int, segment: int) -> tuple[float, str] | None:
    """The train loss near `step` of `segment`, and where it was read: the median of the
    last `val_train_points` finite train losses in the `val_train_window` steps up to it,
    else the last one logged before it (the first after it when none is before)."""
    ts, tl = ctx.finite("loss", segment)       # one segment: its steps are in order
    if not len(tl):
        return None
    end = int(np.searchsorted(ts, step, side="right"))
    lo = max(int(np.searchsorted(ts, step - ctx.th.val_train_window, side="left")),
             end - ctx.th.val_train_points)
    if lo >= end:                         # nothing that near: the nearest line before (or after)
        lo, end = (end - 1, end) if end else (0, 1)
    near, at = tl[lo:end], ts[lo:end]
    where = f"the train loss at step {at[0]}" if len(near) == 1 else \
        f"the median train loss of steps {at[0]}-{at[-1]}"
    return float(np.median(near)), where


def a_val_gap(ctx: Context) -> Outcome:
    if not ctx.has("val_loss") or not ctx.has("loss"):
        return skip("no validation loss")
    vs, vl = ctx.series("val_loss")
    v, step = vl[-1], vs[-1]
    logged = ctx.frame.val_loss.notna().to_numpy()
    level = train_level_at(ctx, int(step), int(ctx.frame.segment.to_numpy()[logged][-1]))
    if level is None:
        return skip("no finite training loss")
    t, where = level
    gap = (v - t) / abs(t)
    if gap < -ctx.th.val_gap_max:
        return "fail", f"val {_fmt(v)} far below train {_fmt(t)} at step {step}: a leak? ({where})"
    ok = gap <= ctx.th.val_gap_max
    return ("pass" if ok else "fail"), f"val {_fmt(v)} vs train {_fmt(t)} at step {step} ({where})"


def a_weight_growth(ctx: Context) -> Outcome:
    # Embeddings grow several-fold from their init early on; runaway growth is later.
    cols = [c for c in ctx.frame.columns if c.startswith("weight_norm/")]
    if not cols:
        return skip("no per-layer weight norms recorded")
    worst, name = 1.0, cols[0]
    for c in cols:
        s, w = ctx.series(c, 0)
        w = w[np.isfinite(w) & (s >= s[0] + ctx.th.early_window)] if len(s) else w
        if len(w) >= 2 and w[0] > 0:
            r = max(w.max() / w[0], w[0] / max(w.min(), 1e-12))
            if r > worst:
                worst, name = r, c
    ok = worst <= ctx.th.weight_norm_change
    return ("pass" if ok else "fail"), f"largest weight-norm change {worst:.2f}x ({name})"


def a_moments(ctx: Context) -> Outcome:
    cols = [c for c in ctx.frame.columns if c.startswith("adam_v_norm/")]
    if not cols:
        return skip("no Adam moment norms recorded")
    _, v = ctx.series(cols[0], 0)
    ok = len(v) > 0 and np.all(v[np.isfinite(v)] > 0)
    return ("pass" if ok else "fail"), f"{cols[0]} {'accumulates' if ok else 'is zero'} ({len(v)} records)"


# --- tree B: what happened -----------------------------------------------------------

def b_resume(ctx: Context) -> Outcome:
    if not ctx.resumes:
        return "pass", "one segment, no wall-clock gap"
    shown = ", ".join(f"step {r.step} ({r.how})" for r in ctx.resumes[:4])
    more = f" and {len(ctx.resumes) - 4} more" if len(ctx.resumes) > 4 else ""
    return "fail", f"{len(ctx.resumes)} restart(s): {shown}{more}"


def b_nonfinite(ctx: Context) -> Outcome:
    if not (ctx.has("loss") or ctx.has("grad_norm") or ctx.has("nan_iterations")):
        return skip("neither loss nor grad norm logged")
    bad = ctx.nonfinite
    skipped = int(ctx.overflows.sum())
    also = f" ({skipped} step(s) with an inf grad norm the loss scaler skipped)" if skipped else ""
    if not bad.any():
        return "pass", "every logged loss and grad norm is finite" + (
            f" but {skipped} grad norm(s) the loss scaler skipped" if skipped else "")
    first = int(ctx.frame.step.to_numpy()[bad][0])
    return "fail", f"{int(bad.sum())} non-finite step(s), first at {first}{also}"


def b_nonfinite_dtype(ctx: Context) -> Outcome:
    if not ctx.nonfinite.any():
        return skip("no non-finite value")
    dtype = ctx.facts.dtype
    if dtype is None:
        return skip("dtype unknown")
    # in fp16 the node's own leaf (an overflow); in any other dtype the numbers themselves
    return ("fail", f"non-finite values in a {dtype} run") if dtype == "fp16" else \
        ("fail", f"non-finite values in a {dtype} run", "numerics")


def b_loss_spike(ctx: Context) -> Outcome:
    if not ctx.has("loss"):
        return skip("no training loss")
    ev = ctx.loss_spikes
    rises = [u for u in ctx.unjudged_rises if not any(e.step == u.step for e in ev)]
    early = [u for u in rises if not math.isfinite(u.rise)]
    # (a point held back inside a spike found is that spike's, not a rise of its own)
    rises = [u for u in rises if not math.isfinite(u.rise) or not any(
        e.segment == u.segment and e.step <= u.step <= e.peak_step + ctx.th.merge_gap for e in ev)]
    big = ctx.th.spike_sigma_big_rise
    # held back by a short log's noise: over it as estimated, under its bound (cannot tell),
    # or under the noise itself (batch noise)
    doubt = [u for u in rises if math.isfinite(u.rise) and u.rise >= big * u.noise]
    calm = [u for u in rises if math.isfinite(u.rise) and u.rise < big * u.noise]
    cannot = "; cannot tell at " + ", ".join(
        f"step {s} ({n} step(s) before it, needs {ctx.th.spike_min_history})" for s, n, *_ in early[:3]) if early else ""
    cannot += ("; cannot tell: " + _short_noise(doubt, ctx)) if doubt else ""
    noise = "; within the batch noise: " + _short_noise(calm, ctx) if calm else ""
    yet = "; ".join(_unfinished(e) for e in ctx.unfinished_rises[:3])
    if not ev:
        if yet:
            return skip("cannot tell yet: " + yet + cannot)
        if early:
            return skip(f"cannot tell: a rise of {ctx.th.sparse_rise:.0%} over the median before it at step "
                        f"{early[0].step} with {early[0].points} step(s) before it, needs {ctx.th.spike_min_history}"
                        + ("; " + _short_noise(doubt, ctx) if doubt else "") + noise)
        if doubt:
            return skip("cannot tell: " + _short_noise(doubt, ctx) + noise)
        return "pass", (f"no loss {ctx.th.spike_sigma:g} x the noise and {ctx.th.spike_min_rise:.0%} above the mean "
                        f"of the previous {ctx.th.spike_window} steps") + noise
    shown, head = ev, f"{len(ev)} spike(s): "
    if len(ev) > 4:           # many: the ones that rose the most over their window's mean
        shown = sorted(ev, key=lambda e: -e.peak / e.window_mean if e.window_mean > 0 else 0)[:4]
        head = f"{len(ev)} spikes, the largest: "
    return "fail", head + ", ".join(f"step {e.step} ({_fmt(e.window_mean)} -> {_fmt(e.peak)})" for e in shown) + cannot \
        + ("; cannot tell yet: " + yet if yet else "")


def _short_noise(rises: list, ctx: Context) -> str:
    """Rises a short log's noise held back, with the numbers: each rise over the level
    before it, the noise the whole log shows, and the bound a spike must clear given how
    few differences estimate that noise."""
    u = rises[0]
    steps = ", ".join(f"step {r.step} (+{_fmt(r.rise)}, {r.rise / r.noise:.1f} x)" for r in rises[:3]) \
        + (f" and {len(rises) - 3} more" if len(rises) > 3 else "")
    return (f"{steps} over the level before, x the batch noise of this short log's other lines (at step {u.step}: "
            f"{_fmt(u.noise)} from {u.diffs} step-to-step differences, so few that it may be up to {_fmt(u.widened)}, "
            f"its {ctx.th.spike_short_quantile:.0%} bound); a spike needs {ctx.th.spike_sigma_big_rise:g} x that bound")


def _unfinished(e) -> str:
    """A rise at the log's last point, said with why it is not judged."""
    return (f"step {e.step} ({_fmt(e.window_mean)} -> {_fmt(e.peak)}) is the last point before the log ends or restarts: nothing after it "
            f"says whether it comes back (noise or a spike) or stays up (a divergence)")


def b_recovery(ctx: Context) -> Outcome:
    if not ctx.loss_spikes:
        return skip("no loss spike")
    # (a spike at the log's end has nothing after it: not recovered, and not known either)
    down = [e for e in ctx.loss_spikes if not ctx.recovered(e)]
    unknown = [e for e in down if ctx.recovery_unknown(e)]
    bad = [e for e in down if not any(e is u for u in unknown)]
    if unknown and len(unknown) == len(ctx.loss_spikes):
        return skip(f"cannot tell yet: the log ends at the peak of the spike at step {unknown[0].step}")
    yet = f"; cannot tell yet at step {unknown[0].step} (the log ends at its peak)" if unknown else ""
    if not bad:
        return "pass", (f"every spike came back within mean + {ctx.th.recovery_sigma:g} std inside "
                        f"{ctx.th.recovery_window} steps") + (f" but one{yet}" if yet else "")
    return "fail", f"{len(bad)} spike(s) did not recover, first at step {bad[0].step}" + yet


def b_grad_spike(ctx: Context) -> Outcome:
    if not ctx.has("grad_norm"):
        return skip("no grad norm logged")
    ev = ctx.grad_spikes
    if not ev:
        return "pass", (f"no grad norm {ctx.th.grad_spike_sigma:g} robust std (log scale) and "
                        f"{ctx.th.grad_spike_min_ratio:g}x above its recent median")
    return "fail", f"{len(ev)} grad-norm spike(s): " + ", ".join(
        f"step {e.step} ({e.notes.ratio:.0f}x)" for e in ev[:4])


def b_loss_scale(ctx: Context) -> Outcome:
    if not ctx.has("loss_scale") and not ctx.skips.any():
        return skip("no loss scale logged (bf16 or fp32, or not printed)")
    ev, probes = ctx.cascades, ctx.probes
    routine = (f"{len(probes)} routine probe(s) (one overflow, then normal training)" if probes
               else "no routine probe") + _scale_drops(ctx.scale_drops)
    how = ctx.scale_regime.said
    if not ev:
        return "pass", f"no cascade; {routine}; {how}"
    return "fail", f"{len(ev)} cascade(s): " + ", ".join(
        persistent_words(e) if e.notes.persistent and e.notes.persistent_step is None else
        cascade_words(e, listed=True) + (f"; {persistent_words(e)}" if e.notes.persistent_step is not None else "")
        for e in ev[:4]) + f"; {routine}; {how}"


def _scale_drops(drops: list[ScaleDrop]) -> str:
    """The falls of the scale across a hole in the log, said as seen: not cascades."""
    if not drops:
        return ""
    shown = ", ".join(f"{d.scale_from:g} -> {d.scale_to:g} ({d.halvings:.0f} halvings) somewhere between "
                      f"step {d.after} and step {d.step}" for d in drops[:4])
    more = f" and {len(drops) - 4} more" if len(drops) > 4 else ""
    return f"; the scale fell {shown}{more}, with no line between: how fast is not known, so no cascade"


def b_divergence(ctx: Context) -> Outcome:
    if not ctx.has("loss"):
        return skip("no training loss")
    ev = ctx.divergences
    if not ev:
        short = divergence_too_short(ctx.log, ctx.th)
        if short:
            lone = lone_rise(ctx.log, ctx.th)
            return skip(f"{short}; cannot tell: {lone}" if lone else short)
        steps, _ = ctx.finite("loss", 0)
        window = divergence_windows(steps, ctx.th)[0] if len(steps) else ctx.th.divergence_window
        return "pass", (f"no sustained rise of the smoothed loss over {window} steps "
                        f"(+{ctx.th.divergence_min_rise:.0%} and {ctx.th.divergence_sigma:g} noise units)"
                        f"{_val_rise(ctx)}")
    said = [_divergence_said(e) for e in ev]
    more = f"; and {len(said) - 2} more" if len(said) > 2 else ""
    return "fail", "; ".join(said[:2]) + more


def _val_rise(ctx: Context) -> str:
    """The validation loss's rise from its lowest, said beside a train loss that did not
    diverge: an evaluation-only rise is no instability of training (overfitting, or a
    problem of the evaluation itself), but a user reading B4 must see it. Empty where the
    validation loss (3 values at least) rose by under `divergence_min_rise` of its lowest."""
    if not ctx.has("val_loss"):
        return ""
    vs, vl = ctx.finite("val_loss")
    if len(vl) < 3:
        return ""
    low = int(np.argmin(vl))
    top = low + int(np.argmax(vl[low:]))
    if not vl[low] > 0 or vl[top] <= vl[low] * (1 + ctx.th.divergence_min_rise):
        return ""
    ts, tl = ctx.finite("loss")
    at = (ts >= vs[low]) & (ts <= vs[top])
    train = (f"; the train loss went from {number(float(tl[at][0]))} to {number(float(tl[at][-1]))} there"
             if at.sum() >= 2 else "")
    return (f"; but the validation loss rose from {number(float(vl[low]))} at step {vs[low]} to "
            f"{number(float(vl[top]))} at step {vs[top]} (x{vl[top] / vl[low]:.2f}){train}: an evaluation-only "
            "rise, not an instability of training (overfitting, or the evaluation itself)")


def _divergence_said(e) -> str:
    """One divergence in B4's words: a slow rise, a jump to a level that stayed up, or a short
    log's rise that the validation loss made too."""
    if e.notes.short_rise is not None:
        low, high, vlow, vhigh = e.notes.short_rise
        return (f"on a log of {e.notes.points} rows, the loss rose from {number(low)} to {number(high)} at step "
                f"{e.step} (x{high / low:.2f}, above every earlier value, and stayed) and the validation loss "
                f"with it, from {number(vlow)} to {number(vhigh)} (x{vhigh / vlow:.2f}): two series agreeing")
    if e.notes.confirmed_at is None:
        return (f"loss jumped from {number(e.window_mean)} to {number(e.peak)} from step {e.step} and stayed "
                f"above the band before it (+{e.notes.rise or 0:.0%}) to step {e.last}")
    return (f"smoothed loss rising from step {e.step} (+{e.notes.rise:.0%} by step "
            f"{e.notes.confirmed_at}, {e.notes.rising_share:.0%} of its steps up)")


def _trend(ctx: Context, name: str, start: int) -> float | None:
    if not ctx.has(name):
        return None
    steps, v = ctx.series(name)
    keep = (steps >= start) & np.isfinite(v)
    if keep.sum() < 5:
        return None
    v = v[keep]
    return float(np.median(v[-max(1, len(v) // 5):]) / max(np.median(v[: max(1, len(v) // 5)]), 1e-12))


def b_lr_rising(ctx: Context) -> Outcome:
    if not ctx.divergences:
        return skip("no divergence")
    r = _trend(ctx, "lr", ctx.divergences[0].step)
    if r is None:
        return skip("no LR logged")
    return ("fail" if r > 1.05 else "pass"), f"LR x{r:.2f} over the divergence"


def b_weight_norm(ctx: Context) -> Outcome:
    if not ctx.divergences:
        return skip("no divergence")
    cols = [c for c in ctx.frame.columns if c.startswith("weight_norm/")]
    if not cols:
        return skip("no weight norms recorded")
    r = max((_trend(ctx, c, ctx.divergences[0].step) or 1.0) for c in cols)
    return ("fail" if r > ctx.th.weight_norm_change else "pass"), f"weight norm x{r:.2f} over the divergence"


def b_grad_trend(ctx: Context) -> Outcome:
    if not ctx.divergences:
        return skip("no divergence")
    r = _trend(ctx, "grad_norm", ctx.divergences[0].step)
    if r is None:
        return skip("no grad norm logged")
    return ("fail" if r > 2 else "pass"), f"grad norm x{r:.2f} over the divergence"


TREE_A = (
    Node("A1", "Did the run start? Loss at step 0 within {start_loss_vs_ln_v:g} of ln V", ("start_loss_vs_ln_v",), "bad-init", a_start_loss),
    Node("A2", "Is the first grad norm sane ({first_grad_norm_min:g} to {first_grad_norm_max:g} at {first_grad_norm_params:g} parameters, x sqrt of a larger size)?", ("first_grad_norm_min", "first_grad_norm_max", "first_grad_norm_params", "first_grad_norm_params_max"), "bad-init", a_first_grad_norm),
    Node("A3", "Is the LR schedule applying (the LR changes)?", (), "schedule-misconfigured", a_schedule_applies),
    Node("A4", "Does warmup reach lr_max (within {warmup_reach:.0%}), without an off-by-one?", ("warmup_reach",), "schedule-misconfigured", a_warmup),
    Node("A4.1", "After warmup, does the LR follow the configured decay (never rising)?", ("warmup_reach", "lr_jump_ratio"), "schedule-misconfigured", a_decays),
    Node("A5", "Is the grad norm alive (above {dead_grad_norm:g}) and not always clipped (at most {clipping_share_max:.0%} of steps)?", ("dead_grad_norm", "clipping_share_max"), "lr-too-high", a_grad_regime),
    Node("A6", "Does the loss move over the first {early_window} steps (by {early_min_drop:.0%})?", ("early_window", "early_min_drop"), "schedule-misconfigured", a_loss_moves),
    Node("A7", "Is the val-train gap sane (within {val_gap_max:.0%}: no overfit, no leak)?", ("val_gap_max",), "bad-data", a_val_gap),
    Node("A8", "Do weight norms hold after the first {early_window} steps (within {weight_norm_change:g}x)?", ("early_window", "weight_norm_change"), "weight-decay", a_weight_growth),
    Node("A9", "Do the Adam moments accumulate?", (), "optimizer-reset", a_moments),
)
TREE_B = (
    Node("B0", "Did the run restart (steps or epochs back, a wall-clock gap {resume_gap_factor:g}x a step)?", ("resume_gap_factor",), "optimizer-reset", b_resume),
    Node("B1", "Is any loss or grad norm NaN or Inf?", (), "numerics", b_nonfinite),
    Node("B1.1", "In which dtype regime did it go non-finite?", (), "fp16-overflow", b_nonfinite_dtype),
    Node("B2", "Is there a loss spike ({spike_sigma:g} x the noise and {spike_min_rise:.0%} over the mean of the previous {spike_window} steps)?", ("spike_window", "spike_sigma", "spike_min_rise", "spike_min_points", "sparse_rise", "spike_min_history", "spike_short_log", "spike_short_quantile"), "long-tail-token", b_loss_spike),
    Node("B2.1", "Did each spike recover (mean + {recovery_sigma:g} std within {recovery_window} steps)?", ("recovery_window", "recovery_sigma"), "lr-too-high", b_recovery),
    Node("B2.2", "Is there a grad-norm spike ({grad_spike_sigma:g} robust std and {grad_spike_min_ratio:g}x its recent median)?", ("grad_spike_sigma", "grad_spike_min_ratio"), "long-tail-token", b_grad_spike),
    Node("B3", "Does the loss scale cascade down ({cascade_halvings} halvings, each within {cascade_gap} steps)?", ("cascade_halvings", "cascade_gap"), "fp16-overflow", b_loss_scale),
    Node("B4", "Is the loss slowly diverging over {divergence_window} steps (half a shorter log)?", ("divergence_window", "divergence_min_rise", "divergence_sigma", "short_log_points"), "lr-too-high", b_divergence),
    Node("B4.1", "Is the LR rising while it diverges?", (), "schedule-misconfigured", b_lr_rising),
    Node("B4.2", "Do weight norms change by over {weight_norm_change:g}x?", ("weight_norm_change",), "weight-decay", b_weight_norm),
    Node("B4.3", "Is the grad norm trending up?", (), "lr-too-high", b_grad_trend),
)


def walk(ctx: Context) -> list[Check]:
    """Every node of both trees, in order, with its outcome."""
    out = []
    for node in (*TREE_A, *TREE_B):
        outcome = node.test(ctx)
        th = ", ".join(f"{t}={getattr(ctx.th, t)}" for t in node.thresholds) or None
        question = node.question.format(**{t: getattr(ctx.th, t) for t in type(ctx.th).model_fields})
        out.append(Check(id=node.id, question=question, status=outcome[0], detail=outcome[1],
                         threshold=th, leaf=_leaf(node, outcome)))
    return out


def _leaf(node: Node, outcome: Outcome) -> str | None:
    """The leaf a failure leads to: the one its test named, else the node's own."""
    if outcome[0] != "fail":
        return None
    return outcome[2] if len(outcome) == 3 else node.leaf
