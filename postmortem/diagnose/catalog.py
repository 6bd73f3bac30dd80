"""The failure patterns as data: one entry per pattern, the single home of its id, title,
panels, rules (whose weights are named fields of `Thresholds`), the experiment that tells
it apart, the replay arms that test it and the usual remedies. Adding a pattern is adding
an entry here (and its rule function beside it).

A rule looks at the incident and its measured features and adds observations for or
against the pattern, each citing a panel and the step its number is at; a rule that lacks
the data says nothing. Kept free of pandas and of the rest of the diagnosis at import:
the document linter and the editor read the ids and remedies from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from postmortem.numbers import number

if TYPE_CHECKING:
    from postmortem.diagnose.patterns import Rule


@dataclass(frozen=True)
class Pattern:
    id: str
    title: str
    panels: tuple[str, ...]            # where its evidence shows, first the one to look at
    # rules(ctx, *, ev=the incident's event, f=its measured Features, e=the Weighing it adds
    # observations to) -> None: named at the call, so no rule takes them in the wrong order
    rules: Rule
    discriminate: str                  # the experiment that tells it apart
    arms: tuple[str, ...]              # replay arm ids that test it (postmortem/replay)
    remedies: tuple[str, ...]
    spike: bool = False                # a cause of a sudden spike (vs a tree leaf)
    # unseen(ctx) -> True where the log shows none of what the cause needs (fp16 overflow: no
    # fp16, no loss scale, no skipped step): at a score of 0 it goes last, below the rest
    unseen: Callable[[Any], bool] | None = None


def _checks(ctx) -> dict:
    return {c.id: c for c in ctx.checks}


def _cross_run(f, e, weight: str, why: str) -> None:
    """Another run over the same data in the same order: a spike at the same step there too
    points at the batch, not at this run's state."""
    for text in f.same_step:
        e.add(True, weight, "loss", f"{text}: {why}")
    for run_id in f.not_there:
        e.add(False, weight, "loss", f"{run_id}, over the same data, does not spike here", half=True)


def _long_tail(ctx, *, ev, f, e) -> None:
    th = ctx.th
    if f.gn_ratio is not None:
        smooth = f.lr_jump is None
        big = f.gn_ratio >= th.long_tail_grad_ratio
        some = f.gn_ratio >= th.long_tail_grad_ratio / 3
        # said either way, with why it does not count where it does not
        why_not = "" if (big or some) and smooth else (
            f", under the {th.long_tail_grad_ratio / 3:g}x of one batch's outsized gradient" if smooth
            else ", with the LR off its trend: the LR's doing, not the batch's")
        e.add((big or some) and smooth, "w_grad_ratio_big" if big else "w_grad_ratio", "grad-norm",
              f"grad norm {number(f.gn_at)} at step {f.gn_at_step} is {f.gn_ratio:.1f}x its rolling mean"
              + (" with a smooth LR" if smooth else "") + why_not)
    if ev.kind == "spike" and ev.metric == "loss" and not ctx.recovery_unknown(ev):
        rec = ctx.recovered(ev)
        short = ev.peak_step - ev.step <= 2
        within = f"within {ctx.recovery_reach(ev.segment):g} steps"
        e.add(rec and short, "w_recovers", "loss", f"loss {number(ev.window_mean)} -> {number(ev.peak)} at step "
              f"{ev.peak_step}, " + (f"back {within}" if rec else f"not back {within}"))
    elif ev.kind == "divergence" and ev.notes.from_spike and ev.metric == "loss":
        # one outsized batch moves the loss for a step or two; a loss that stays up is not it
        e.add(False, "w_recovers", "loss", f"loss {number(ev.window_mean)} -> {number(ev.peak)} at step "
              f"{ev.peak_step} and not back by step {ev.last}: one batch does not keep the loss up")
    if ev.kind == "nan":
        e.add(False, "w_not_finite_spike", "loss", f"the loss went non-finite at step {ev.step}, not a finite spike")
    if f.repeated_batch == 0:
        e.add(True, "w_unique_batch", "batch", f"the batch of step {ev.step} is unique among the "
              f"{ctx.th.batch_repeat_window} before it")
    if f.cascade is not None:
        e.add(False, "w_cascade_against", "loss-scale", f"loss scale {number(f.cascade.notes.scale_from)} -> "
              f"{number(f.cascade.notes.scale_to)} from step {f.cascade.step}, near the spike")
    _cross_run(f, e, "w_cross_run", "the same batch, so the data")


def cascade_span(c) -> str:
    """Where a cascade was seen: from its first skip or fall to its last, or, where the scale
    fell between two lines more than a step apart, between those lines (when within that
    span is not known)."""
    after = c.notes.after
    if after is not None and after < c.step - 1:
        return f"between the lines at step {after} and step {c.peak_step}"
    return f"from step {c.step} to step {c.peak_step}"


def _fp16(ctx, *, ev, f, e) -> None:
    dtype = ctx.facts.dtype
    if dtype in ("bf16", "fp32"):
        e.add(False, "w_dtype_rules_out", "loss-scale", f"the run is {dtype}: no fp16 overflow")
    elif dtype == "fp16":
        # said as the series and the config show it: a static scale is no dynamic scaling
        e.add(True, "w_dtype", "loss-scale", f"the run is fp16 with {ctx.scale_regime.said}")
    elif dtype is None and (ctx.has("loss_scale") or ctx.skips.any()):
        if ctx.scaler_idle:
            # Megatron prints `loss scale: 1.0` in bf16 too: a scale that never moves with
            # no step ever skipped is no sign of fp16
            e.add(False, "w_dtype", "loss-scale", f"{ctx.scale_regime.said}, and the log's skipped counter is 0 "
                  "on every line: no loss scaler at work", half=True)
        else:
            e.add(True, "w_dtype", "loss-scale", f"a loss scaler is at work (fp16): {ctx.scale_regime.said}")
    if f.cascade is not None:
        from postmortem.diagnose.scaler import cascade_words, persistent_words  # noqa: PLC0415 (the catalog imports no numpy: the linter and the editor read it)
        c = f.cascade
        e.add(True, "w_cascade", "loss-scale", f"{cascade_words(c)} {cascade_span(c)}")
        if c.notes.persistent:
            e.add(True, "w_cascade", "loss-scale", persistent_words(c))
    elif ctx.has("loss_scale"):
        probes = [p for p in ctx.probes if abs(p - ev.step) <= ctx.around(ev.segment)]
        e.add(False, "w_no_cascade", "loss-scale", "no loss-scale cascade around the incident"
              + (f" (a routine probe at step {probes[0]})" if probes else ""))
    if f.skipped:
        e.add(True, "w_skipped", "loss-scale", f"{f.skipped:.0f} skipped step(s) from step {ev.step}")
    if ev.kind == "nan" and f.recovers:
        e.add(True, "w_finite_again", "loss", "finite again after the non-finite steps (skipped, not corrupted)")
    if f.zero_loss_nan_grad and dtype not in ("bf16", "fp32"):
        # fp16 overflows to inf in the backward pass; a logger that drops the step prints 0.0
        e.add(True, "w_dtype", "loss", _zero_loss(f) + " (an fp16 overflow in the backward pass does this)",
              half=dtype is None)


def _no_fp16(ctx) -> bool:
    """No dtype said or fp16 evidence, no loss scale, no skipped step: nothing of an fp16 run
    (a Caffe, TF1 or fp32 fairseq log) to put its overflow above any other cause."""
    return ctx.facts.dtype in (None, "fp32", "bf16") and not ctx.has("loss_scale") and not ctx.skips.any()


def _lr_disc(ctx, *, ev, f, e) -> None:
    if f.lr_jump is not None:
        e.add(True, "w_lr_jump", "lr", f"LR {number(f.lr_jump.lr)} at step {f.lr_jump.step} is x{f.lr_jump.ratio:.2f} "
              "the trend of the steps before it")
    elif f.lr_smooth is not None:
        e.add(False, "w_lr_smooth", "lr", f"the LR follows its trend from step {f.lr_smooth.first} to step "
              f"{f.lr_smooth.last}" + (" (warmup)" if ev.step <= ctx.warmup_end else ""))
    if f.lr_vs_schedule is not None:
        off = abs(f.lr_vs_schedule - 1) > 0.2
        e.add(off, "w_lr_schedule_off" if off else "w_lr_schedule_on", "lr",
              f"logged LR is {f.lr_vs_schedule:.2f}x the configured schedule at step {ev.step}")


def _opt_reset(ctx, *, ev, f, e) -> None:
    if f.after_resume is not None:
        e.add(True, "w_after_restart", "loss", f"the incident comes {f.after_resume.steps_before} step(s) after a "
              f"restart at step {f.after_resume.step} ({f.after_resume.how})")
    elif ctx.resumes:
        e.add(False, "w_no_restart", "loss", f"no restart within {ctx.th.after_resume_steps} steps before it")
    else:
        e.add(False, "w_no_restart", "loss", "the run never restarted")
    for text in f.same_step:
        e.add(False, "w_cross_run_reset", "loss", f"{text}: not this run's restart")
    cols = [c for c in ctx.frame.columns if c.startswith("adam_v_norm/")]
    if cols and f.after_resume is not None:
        e.add(True, "w_moments", "optimizer-moments", f"Adam moments are recorded ({cols[0]}): compare them across the restart")


def _kind(ev) -> str:
    return {"nan": "NaN", "spike": "spike", "divergence": "divergence"}.get(ev.kind, "incident")


def _zero_loss(f) -> str:
    return (f"the loss is printed as exactly 0.0 on the {f.zero_loss_nan_grad} row(s) from the incident on where the "
            "grad norm is NaN: not a loss the model reached")


def _numerics(ctx, *, ev, f, e) -> None:
    if ev.kind != "nan":
        e.add(False, "w_all_finite", "loss", "every value around the incident is finite")
        return
    if f.first_nonfinite == "+inf":
        e.add(True, "w_inf_first", "loss", f"the loss is +inf at step {ev.step} before any NaN: log(0) or exp overflow")
    if f.zero_loss_nan_grad:
        # a mean over no unmasked token is 0/0: NaN gradients while the logged loss reads 0
        e.add(True, "w_never_finite", "loss", _zero_loss(f) + " (a loss masked to nothing, 0/0 in its mean, "
              "or an op overflowing)")
    if f.recovers is False:
        e.add(True, "w_never_finite", "loss", "never finite again: the weights were corrupted")
    elif f.recovers:
        e.add(False, "w_finite_later", "loss", "finite again later: the bad steps were skipped")
    if ctx.facts.dtype in ("fp32", "bf16"):
        e.add(True, "w_no_scaler", "loss-scale", f"{ctx.facts.dtype} run: no loss scaler to blame")


def _bad_data(ctx, *, ev, f, e) -> None:
    if f.repeated_batch:
        e.add(True, "w_repeated_batch", "batch", f"the batch of step {ev.step} was already trained "
              f"{f.repeated_batch} time(s) in the {ctx.th.batch_repeat_window} steps before")
    elif f.hashes_logged:
        e.add(False, "w_new_batch", "batch", f"the batch hash of step {ev.step} is new")
    if f.repeated_index:
        e.add(True, "w_repeated_index", "batch", f"{f.repeated_index.repeats} repeated batch index(es) in the "
              f"{ctx.th.batch_index_window} steps up to {ev.step}, first at step {f.repeated_index.first_step}")
    _cross_run(f, e, "w_cross_run_data", "the same batch, so the data")


def _lr_high(ctx, *, ev, f, e) -> None:
    if ev.kind == "divergence" and ev.notes.from_spike:
        # a blow-up that stays up says little of its cause by itself: half the weight, and
        # none where no LR is logged (the blow-up itself is no evidence of the LR)
        lr = ctx.has("lr")
        e.add(lr, "w_divergence", "loss", f"loss {number(ev.window_mean)} -> {number(ev.peak)} at step "
              f"{ev.peak_step}, not back within {ctx.recovery_reach(ev.segment):g} steps"
              + ("" if lr else ": no LR logged, so nothing says the LR was too high"), half=True)
    elif ev.kind == "divergence":
        e.add(True, "w_divergence", "loss", f"smoothed loss rising {ev.notes.rise or 0:.0%} from step "
              f"{ev.step} to step {ev.peak_step if ev.notes.confirmed_at is None else ev.notes.confirmed_at}")
    if ev.kind == "divergence":
        _lr_cut_after(ctx, ev, e)
    if ev.kind == "divergence" and f.gn_ratio is not None:
        # the grad norm's jump with the loss: the step the LR allows is too large for it
        jump = f.gn_ratio >= ctx.th.long_tail_grad_ratio / 3
        e.add(jump, "w_grad_regime", "grad-norm", f"grad norm {number(f.gn_at)} at step {f.gn_at_step} is "
              f"{f.gn_ratio:.1f}x its rolling mean" + ("" if jump else ", no jump"), half=not jump)
    checks = _checks(ctx)
    for cid in ("A5", "B4.3"):
        # only a failure that leads here (a dead gradient leads to bad-init)
        if cid in checks and checks[cid].status == "fail" and checks[cid].leaf == "lr-too-high":
            e.add(True, "w_grad_regime", "grad-norm", checks[cid].detail)
    if f.lr_climb is not None and not any(checks.get(k) and checks[k].status == "fail" for k in ("B4.1", "A4.1")):
        # (where the LR climbs against the configured decay, that is the schedule's finding)
        c = f.lr_climb
        # a quarter: a warmup still climbing is the usual start of a run; the LR it reached
        # is a suspect, not a finding
        e.add(True, ctx.th.w_lr_rising / 4, "lr", f"the {_kind(ev)} came with the LR at its highest yet: "
              f"{number(c.lr_at)} at step {c.at}, higher on each of the {c.rows} rows from step {c.first}")
    if ev.kind == "spike" and f.lr_smooth is not None and f.lr_jump is None:
        e.add(False, "w_lr_smooth_spike", "lr", f"the LR is smooth through the spike (steps {f.lr_smooth.first}"
              f"-{f.lr_smooth.last})")


def _lr_cut_after(ctx, ev, e) -> None:
    """The LR cut (to under 0.7x) at the first logged line after the divergence, and the loss
    back under where it rose from there: the LR was what held it up (ReduceLROnPlateau, an
    annealing script)."""
    if not ctx.has("lr") or ev.end_step is None:
        return
    steps, lr = ctx.finite("lr", ev.segment)
    before, after = lr[steps <= ev.end_step], (steps > ev.end_step).nonzero()[0]
    if not len(before) or not len(after):
        return
    cut_at, cut = int(steps[after[0]]), float(lr[after[0]])
    ls, loss = ctx.finite("loss", ev.segment)
    then = loss[(ls >= cut_at) & (ls <= cut_at + ctx.recovery_reach(ev.segment))]
    if cut < 0.7 * before[-1] and len(then) and float(sorted(then)[len(then) // 2]) <= ev.window_mean:
        e.add(True, "w_divergence", "lr", f"the LR cut to {number(cut)} (x{cut / before[-1]:.2f}) at step {cut_at} "
              f"brought the loss back under {number(ev.window_mean)}: the LR held it up")


def _schedule(ctx, *, ev, f, e) -> None:
    checks = _checks(ctx)
    for cid, w in (("B4.1", "w_lr_rising"), ("A4.1", "w_lr_rising"), ("A3", "w_schedule_check"),
                   ("A4", "w_schedule_check")):
        c = checks.get(cid)
        if c and c.status == "fail":
            e.add(True, w, "lr", c.detail)
        elif c and c.status == "pass" and cid in ("B4.1", "A4.1"):
            e.add(False, "w_lr_not_rising", "lr", c.detail)
    if ev.kind == "divergence" and f.lr_rise is not None and not any(
            checks.get(c) and checks[c].status == "fail" for c in ("B4.1", "A4.1")):
        rise = f.lr_rise
        rising = rise.ratio > 1 + ctx.th.warmup_reach and rise.first >= ctx.warmup_end
        e.add(rising, "w_lr_rising" if rising else "w_lr_not_rising", "lr",
              f"LR {number(rise.lr_first)} at step {rise.first} -> {number(rise.lr_last)} at step {rise.last} "
              f"(x{rise.ratio:.2f}) over the incident" + ("" if rising else ": not rising"))
    if f.lr_vs_schedule is not None and abs(f.lr_vs_schedule - 1) <= 0.2 and ev.kind != "divergence":
        e.add(False, "w_lr_schedule_on", "lr", f"the logged LR follows the configured schedule at step {ev.step}")
    c = f.lr_climb
    if c is not None and c.on_after is not False and not ctx.facts.warmup_steps and not any(
            checks.get(k) and checks[k].status == "fail" for k in ("B4.1", "A4.1")):
        # the schedule had not reached its peak: a warmup longer than the run, or an LR that
        # only rises (no warmup is configured that would end later and explain it)
        e.add(True, "w_lr_rising", "lr", f"the LR is still climbing at the {_kind(ev)}: {number(c.lr_first)} at step "
              f"{c.first} -> {number(c.lr_at)} at step {c.at}, higher on each of the {c.rows} rows"
              + (" and on after it" if c.on_after else "") + ": warmup (or the schedule) has not reached its peak",
              half=True)


def _weight_decay(ctx, *, ev, f, e) -> None:
    c = _checks(ctx).get("B4.2")
    if c and c.status != "skipped":
        e.add(c.status == "fail", "w_weight_norm", "weight-norm", c.detail, half=c.status != "fail")


def _bad_init(ctx, *, ev, f, e) -> None:
    first = int(ctx.frame.step.iloc[0])
    if ev.kind != "bad-start" and ev.step > first + ctx.th.early_window:
        e.add(False, "w_late", "loss", f"the incident is at step {ev.step}, long after the start")
        return
    checks = _checks(ctx)
    a5 = checks.get("A5")
    dead = a5 is not None and a5.status == "fail" and a5.leaf == "bad-init"      # A5: a dead gradient only
    for cid, w, panel in (("A1", "w_start_loss", "loss"), ("A2", "w_first_grad", "grad-norm"),
                          ("A5", "w_dead_grad", "grad-norm"), ("A8", "w_weight_growth", "weight-norm")):
        c = checks.get(cid)
        # a first grad norm of ~0 in a gradient dead everywhere is the same fact, counted once
        same_fact = cid == "A2" and dead and ctx.series("grad_norm", 0)[1][0] < ctx.th.first_grad_norm_min
        if c and c.status == "fail" and (cid != "A5" or dead) and not same_fact:
            e.add(True, w, panel, c.detail)
        elif c and c.status == "pass" and cid in ("A1", "A2"):
            e.add(False, w, panel, c.detail, half=True)


CATALOG: tuple[Pattern, ...] = (
    Pattern(
        "long-tail-token", "A batch of rare or junk tokens", ("loss", "grad-norm", "per-token-loss", "batch"),
        _long_tail,
        "replay the step with the batch swapped for a neighbour, and the batch from an earlier "
        "checkpoint; look at the per-token losses",
        ("swap-batch", "earlier-checkpoint"),
        ("filter or dedupe the documents behind the suspect batch (junk, long runs of rare tokens)",
         "shuffle at the document level so rare-token text is not concentrated in one batch",
         "skip a batch whose loss exceeds 3x the running mean, and log its index",
         "lower lr_max or warm up longer so one batch's gradient cannot dominate"), spike=True),
    Pattern(
        "fp16-overflow", "fp16 overflow: a loss-scale cascade", ("loss-scale", "loss", "activations"),
        _fp16, "replay the steps in fp32; find the first non-finite module", ("fp32",),
        ("train in bf16 instead of fp16 (same range as fp32)",
         "keep the dynamic loss scaler and log the scale every step",
         "compute softmax, norms and the loss in fp32 (autocast does; hand-written code may not)",
         "bound the activations: QK-layernorm, or scale the residual branches at init"), spike=True,
        unseen=_no_fp16),
    Pattern(
        "lr-discontinuity", "The LR jumped off its schedule", ("lr", "loss"),
        _lr_disc, "replay with the scheduled LR instead of the logged one", ("scheduled-lr",),
        ("derive the LR from the global step, never from a counter that restarts",
         "save and restore the scheduler state with every checkpoint",
         "plot lr(step) from the config before training and after every resume"), spike=True),
    Pattern(
        "optimizer-reset", "A resume without the optimizer state", ("loss", "optimizer-moments"),
        _opt_reset, "replay from the checkpoint with the optimizer moments restored",
        ("restored-moments", "earlier-checkpoint"),
        ("save and restore the optimizer state (Adam moments) with every checkpoint",
         "on a resume without the moments, re-warm the LR over a few hundred steps",
         "assert on resume that optimizer.state is not empty"), spike=True),
    Pattern(
        "numerics", "A non-finite op: log(0), 0/0, exp overflow", ("loss", "activations"),
        _numerics, "replay the step with the first-non-finite-module probe", (),
        ("use F.cross_entropy / log_softmax instead of log(softmax(x))",
         "add an epsilon where dividing or taking a log; clamp before exp",
         "find the first non-finite module with forward hooks (postmortem replay) and fix that op")),
    Pattern(
        "bad-data", "A corrupt or repeated batch", ("batch", "loss"),
        _bad_data, "compare the batch hash with its neighbours; replay with the batch swapped",
        ("swap-batch", "earlier-checkpoint"),
        ("fix the loader so no batch repeats (log a hash of every batch and check it)",
         "reseed the shuffle each epoch and assert the sampler covers the dataset once")),
    Pattern(
        "lr-too-high", "The LR is too high for the model", ("loss", "grad-norm", "lr"),
        _lr_high, "re-run the window at half the LR", (),
        ("lower lr_max by 2-3x", "lengthen the warmup", "clip the grad norm at 1.0")),
    Pattern(
        "schedule-misconfigured", "The LR schedule is not the one configured", ("lr", "loss"),
        # the scheduled-lr arm replays the configured schedule, the suspect itself: no arm
        _schedule, "plot the logged LR against the configured schedule", (),
        ("fix the schedule (warmup, then decay to lr_min by total_steps) and plot it before training",
         "check warmup_steps and total_steps against the run's real length")),
    Pattern(
        "weight-decay", "Weight decay on the wrong parameters, or too strong", ("weight-norm",),
        _weight_decay, "check the decay / no-decay parameter groups; record weight norms per layer", (),
        ("exclude biases, norms and embeddings from weight decay",
         "set weight decay to about 0.1 for AdamW, not 1.0")),
    Pattern(
        "bad-init", "A bad initialisation", ("loss", "grad-norm", "weight-norm"),
        _bad_init, "check the init std and the loss at step 0 against ln V", (),
        ("initialise with std 0.02 and scale the residual projections by 1/sqrt(2 n_layer)",
         "check the loss at step 0 is about ln(vocab size) before training")),
)
BY_ID = {p.id: p for p in CATALOG}
PATTERNS = tuple(p.id for p in CATALOG)
SPIKE_PATTERNS = tuple(p.id for p in CATALOG if p.spike)


def arm_tests(arm: str) -> list[str]:
    """The patterns a replay arm tests."""
    return [p.id for p in CATALOG if arm in p.arms]


def remedies_for(pattern: str | None) -> tuple[str, ...]:
    """The usual remedies of a pattern: what the editor offers for section 5. Suggestions,
    never filled in for the author: the remediation has to be what this run needs."""
    known = BY_ID.get(pattern or "")
    return known.remedies if known else ()
