"""Tree B §3 Q3.2, what the loss scale says beyond a cascade: is the scaling static or
dynamic, and is the overflow persistent (a scale collapsed below 1, or held at its floor
while steps are still skipped)? Judged on halvings and skips, never on the scale's size."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from postmortem.diagnose.detectors.event import Event, Notes
from postmortem.diagnose.thresholds import Thresholds
from postmortem.numbers import number
from postmortem.run import RunLog


@dataclass(frozen=True)
class Regime:
    """How the run scaled its loss: `static` True (a fixed scale), False (dynamic), None
    (not known), and the words that say where that was read."""

    static: bool | None
    said: str


def _config(log: RunLog, *names):
    c = log.manifest.config if log.manifest and log.manifest.config else None
    extra = getattr(c, "model_extra", None) or {}
    for name in names:
        v = getattr(c, name, None) if c is not None else None
        v = extra.get(name) if v is None else v
        if v is not None:
            return name, v
    return None, None


def regime(log: RunLog, skips: np.ndarray) -> Regime:
    """Static or dynamic scaling, from the scale series (one value all run with overflows
    skipped: static; a scale that moves: dynamic) and the config (`loss_scale` > 0 is a fixed
    scale in Megatron and DeepSpeed; 0 or unset with a dynamic scaler's settings, dynamic)."""
    key, fixed = _config(log, "loss_scale", "static_loss_scale")
    dyn_key, dyn = _config(log, "initial_loss_scale", "initial_scale_power", "min_loss_scale",
                           "dynamic_loss_scale", "loss_scale_window")
    f = log.frame
    values = f.loss_scale.to_numpy(dtype=float, na_value=np.nan) if "loss_scale" in f else np.empty(0)
    values = values[np.isfinite(values) & (values > 0)]
    moves = len(values) > 1 and bool((values != values[0]).any())
    if moves:
        up = int((values[1:] > values[:-1]).sum())
        down = int((values[1:] < values[:-1]).sum())
        return Regime(False, f"dynamic loss scaling (the logged scale moves: {down} fall(s), {up} rise(s))")
    said = f.overflows.to_numpy(dtype=float, na_value=np.nan) if "overflows" in f else np.empty(0)
    if np.nansum(said) > 0 and not (isinstance(fixed, (int, float)) and fixed > 0):
        # the scaler's own overflow messages ('reducing to'): each a halving, the scale
        # regrown between them where it reads the same each time
        return Regime(False, f"dynamic loss scaling ({int(np.nansum(said))} overflow message(s), each "
                             "a halving of the scale)")
    if isinstance(fixed, (int, float)) and not isinstance(fixed, bool) and fixed > 0:
        return Regime(True, f"a static loss scale of {fixed:g} (config {key}): dynamic scaling is not engaged")
    if len(values) >= 3 and int(skips.sum()):
        # a dynamic scaler halves at each overflow: skips at one unmoved scale say static
        return Regime(True, f"a static loss scale of {values[0]:g} (one value on all {len(values)} logged "
                            f"lines, {int(skips.sum())} overflowing step(s) skipped at that scale): dynamic "
                            "scaling is not engaged")
    if len(values) >= 3 and values[0] == 1.0:
        # 1.0 on every line is the print of no scaling (Megatron's `loss scale: 1.0` in bf16)
        return Regime(True, f"a static loss scale of 1 (one value on all {len(values)} logged lines): dynamic "
                            "scaling is not engaged")
    if len(values) >= 3:
        # no overflow and no growth: a dynamic scaler holds its scale for a whole growth window
        # (GradScaler 2000 steps, fairseq's DynamicLossScaler up to 2^14 updates), so an unmoved
        # scale is no proof of a static one
        return Regime(None, f"one loss scale, {values[0]:g}, on all {len(values)} logged lines and no step "
                            "skipped: a dynamic scaler holds its scale between overflows and growths (2000 "
                            "steps in GradScaler, up to 2^14 updates in fairseq), so too few changes to tell "
                            "static from dynamic scaling")
    if dyn is not None or (isinstance(fixed, (int, float)) and fixed == 0):
        return Regime(False, f"dynamic loss scaling (config {dyn_key or key})")
    logged = f.loss_scale.to_numpy(dtype=float, na_value=np.nan) if "loss_scale" in f else np.empty(0)
    logged = logged[np.isfinite(logged) & (logged >= 0)]
    if len(logged):
        return _few(log, logged, skips)
    return Regime(None, "loss scaling of unknown kind (no scale logged, none configured)")


def _few(log: RunLog, logged: np.ndarray, skips: np.ndarray) -> Regime:
    """One or two logged values of the scale, all the same: said with the value, never as
    'no scale logged'. Below 1 only a dynamic scaler gets there (a fixed scale is set >= 1);
    with every step up to the line skipped at a power of two, it is the start-up search."""
    v = float(logged[0])
    n = f"{len(logged)} logged value(s) of the loss scale, {number(v) if v > 0 else '0'}"
    if v < 1.0:
        return Regime(False, f"dynamic loss scaling ({n}: only a dynamic scaler halves below 1)")
    skipped = int(skips.sum())
    step = int(log.frame.step.iloc[0])
    k = np.log2(v)
    if skipped and skipped >= step and k == round(k):
        # e.g. Megatron's first line, `loss scale: 8388608.0 | number of skipped iterations: 10`
        # at iteration 10: 2^32 (its initial_loss_scale) less 9 halvings (hysteresis 2)
        return Regime(None, f"{n} (2^{k:.0f}) with {skipped} of the first {step} step(s) skipped: the scaler's "
                            f"start-up search down from its initial scale (2^32 in Megatron and older DeepSpeed, "
                            f"2^16 in GradScaler): routine; static or dynamic not known from one value")
    if v == 1.0 and not skipped:
        # Megatron prints `loss scale: 1.0` when it scales nothing (bf16 / fp32)
        return Regime(None, f"{n}: no scaling at work (bf16 or fp32), or a scaler at its floor; "
                            "too few values to tell")
    return Regime(None, f"{n}: too few to tell static from dynamic scaling")


def persistent(log: RunLog, th: Thresholds, skips: np.ndarray) -> list[Event]:
    """Persistent overflow, per segment: the scale below 1 (the scaler has halved from its
    usual 2^16 at least 16 times; a log that begins there has done so before it), steps
    still skipped at the scale's floor (it cannot halve any further: DeepSpeed's 'already at
    minimum'), or a scale that fell to its floor without growing back once (`_bled`).
    Dated where the scale first went below 1 (the log's first line when it begins there), at
    the first skip at the floor, or where the fall reached the floor."""
    f = log.frame
    if "loss_scale" not in f:
        return []
    _, floor = _config(log, "min_loss_scale", "min_scale")
    out = []
    seg_all, st_all = f.segment.to_numpy(), f.step.to_numpy()
    sc_all = f.loss_scale.to_numpy(dtype=float, na_value=np.nan)
    for seg in np.unique(seg_all):
        # (a scale printed as 0.0, Megatron's `loss scale: {:.1f}`, is below the log's precision)
        rows = np.flatnonzero((seg_all == seg) & np.isfinite(sc_all) & (sc_all >= 0))
        # one row is judged too when its scale is below 1: no scaler starts there (GradScaler
        # at 2^16, DeepSpeed 2^16 or 2^32, Megatron 2^32), so one value says the halvings before it
        if not len(rows) or len(rows) < 2 and not sc_all[rows[0]] < 1.0:
            continue
        sc, st = sc_all[rows], st_all[rows]
        # skips counted on the rows with a scale (those between two of them go to the later)
        sk = np.add.reduceat(skips[rows[0]:rows[-1] + 1], rows - rows[0]) if len(rows) else np.zeros(0)
        below = np.flatnonzero(sc < 1.0)
        if len(below):
            i = int(below[0])
            low = sc[sc > 0].min() if (sc > 0).any() else 0.0
            # (as a difference of logs: 1 / a denormal scale such as 2e-320 overflows a float)
            halvings = (float(np.log2(max(sc[:i + 1].max(), 1.0)) - np.log2(low)) if 0 < low < 1
                        else float(th.cascade_halvings))
            # where the scale was first seen below 1 (it stays there); a log that begins there
            # and holds its scale longer than a cascade's gap is dated where the scaler is seen
            # falling again (fairseq's 'setting loss scale to': #515 holds 0.0625 from update 190
            # to 290, then halves 4 times by 486); a fall within the gap is the collapse the log
            # opened on, dated at its first line
            first, last, after = _falls(sc, st, th) if i == 0 else (int(st[i]), int(st[i]), None)
            out.append(Event("cascade", "loss_scale", first, int(seg), last,
                             float(sc.min()), float(sc[i]), notes=Notes(
                                 scale_from=float(sc[i]), scale_to=float(low), halvings=halvings,
                                 skipped=float(sk[i:].sum()) or None,
                                 after=int(st[i - 1]) if i else after,
                                 persistent="below-1", at_start=i == 0, sparse=False),
                             severity=float(th.spike_sigma * max(halvings, th.cascade_halvings) / th.cascade_halvings)))
            continue
        # at the floor (the configured min_loss_scale, else Megatron's and DeepSpeed's default
        # of 1): steps still skipped while the scale cannot halve any more
        low = float(floor) if isinstance(floor, (int, float)) and floor > 0 else 1.0
        held = (sc <= low) & (sk > 0)
        if int(sk[held].sum()) >= th.cascade_halvings:
            i = int(np.flatnonzero(held)[0])
            out.append(Event("cascade", "loss_scale", int(st[i]), int(seg), int(st[np.flatnonzero(held)[-1]]),
                             float(low), float(sc[i]), notes=Notes(
                                 scale_from=float(sc.max()), scale_to=float(low), halvings=0.0,
                                 skipped=float(sk[held].sum()), after=None, persistent="floor",
                                 at_start=False, sparse=False),
                             severity=float(th.spike_sigma * sk[held].sum() / th.cascade_halvings)))
            continue
        bled = _bled(sc, low, th)
        if bled is not None:
            start, i = bled
            halvings = float(np.log2(sc[start]) - np.log2(sc[i]))
            out.append(Event("cascade", "loss_scale", int(st[i]), int(seg), int(st[i]), float(sc[i]), float(sc[start]),
                             notes=Notes(scale_from=float(sc[start]), scale_to=float(sc[i]), halvings=halvings,
                                         skipped=float(sk[start:i + 1].sum()) or None, after=int(st[start]),
                                         persistent="bled", at_start=False, sparse=False),
                             severity=float(th.spike_sigma * halvings / th.cascade_halvings)))
    return out


def _falls(sc: np.ndarray, st: np.ndarray, th: Thresholds) -> tuple[int, int, int | None]:
    """(first fall, last fall, the line before the first) of a scale series that begins below
    1, where it first held a known scale (not 0 as printed) for more than the cascade gap (or
    1.5 logging intervals); else (its first line, the same, None)."""
    down = np.flatnonzero(sc[1:] < sc[:-1]) + 1
    gap = max(th.cascade_gap, 1.5 * float(np.median(np.diff(st)))) if len(st) > 1 else th.cascade_gap
    if not len(down) or not sc[0] > 0 or st[down[0]] - st[0] <= gap:
        return int(st[0]), int(st[0]), None
    return int(st[down[0]]), int(st[down[-1]]), int(st[down[0] - 1])


# the usual initial loss scale (torch GradScaler's init_scale, DeepSpeed's initial_scale_power 16
# since v0.3.14, MindSpore's DynamicLossScaler in mindyolo): what a log that begins below 1 is
# said to have halved from
_INITIAL = 2.0 ** 16


def _bled(sc: np.ndarray, low: float, th: Thresholds) -> tuple[int, int] | None:
    """(where the fall began, where it reached the floor) for a scale that fell to its floor
    (`low`) in at least `cascade_halvings` falls without ever growing back between them: each
    overflow came before the scaler's growth window was out (a routine probe follows a growth),
    however far apart they were; the run bled its scale away (DeepSpeed then stops: 'already at
    minimum'). None where it did not."""
    at = np.flatnonzero((sc > 0) & (sc <= low))
    if not len(at):
        return None
    i = int(at[0])
    start = i
    while start > 0 and 0 < sc[start] <= sc[start - 1]:
        start -= 1                              # back while the scale held or fell: no growth
    falls = int((np.diff(sc[start:i + 1]) < 0).sum())
    return (start, i) if falls >= th.cascade_halvings and sc[start] > low else None


def cascade_words(e: Event, *, listed: bool = False) -> str:
    """A cascade in words: the scale's fall and the steps skipped (the skips alone where no
    scale was logged). `listed`: as check B3 lists the cascades, `step S (...)`; else as the
    evidence for an fp16 overflow says it, `loss scale A -> B (...)`."""
    n = e.notes
    skipped = f", {n.skipped:.0f} {'skipped' if listed else 'steps skipped'}" if n.skipped else ""
    logged = n.scale_from == n.scale_from           # NaN: no scale was logged
    if listed:
        if logged:
            return f"step {e.step} ({number(n.scale_from)} -> {number(n.scale_to)}, {n.halvings:.0f} halvings{skipped})"
        return f"step {e.step} ({n.skipped:.0f} skipped steps)"
    if logged and n.halvings:
        return f"loss scale {number(n.scale_from)} -> {number(n.scale_to)} ({n.halvings:.0f} halvings{skipped})"
    return f"{(n.skipped or 0):.0f} overflowing steps skipped"


def persistent_words(e: Event) -> str:
    """A persistent overflow in words, with the fix it calls for (not the cascade's)."""
    n = e.notes
    if n.persistent == "below-1":
        where = "when the log begins" if n.at_start else f"from step {e.step}"
        # (a scale printed to fixed decimals as 0 is below the log's precision; any other as
        # `number` writes it, so 0.000244140625 reads 0.0002441, not 0)
        shown = lambda v: number(v) if v > 0 else "0 as printed"  # noqa: E731
        more = f", {n.later_cascades} more cascade(s) while it stays there" if n.later_cascades else ""
        to, assumed = n.scale_to or 0.0, ""
        if n.at_start and to > 0:
            # the log begins below 1: at least log2(1 / scale) halvings, more from a scaler's
            # usual initial 2^16 (assumed: the log shows no scale before)
            # (below 1 by log2(1 / scale) halvings, however few the host cascade counts)
            assumed = (f" (at least {-np.log2(to):.0f} halvings below 1, ~{np.log2(_INITIAL) - np.log2(to):.0f} in a row from a "
                       "scaler's usual initial 2^16, assumed: no earlier scale logged)")
        elif n.at_start:
            assumed = (" (0 as printed is below the printed precision or an underflow to 0: at least 16 halvings "
                       "in a row from a scaler's usual initial 2^16, assumed: no earlier scale logged)")
        return (f"loss scale below 1 {where} ({shown(n.scale_from)}, down to {shown(n.scale_to)}{more}): "
                f"persistent overflow{assumed}, "
                "the scaler has halved again and again and the gradients still overflow; no scale "
                "fixes it: find the activation out of fp16's range, or train in bf16")
    if n.persistent == "bled":
        return (f"loss scale {number(n.scale_from)} at step {n.after} -> {number(n.scale_to)} at step {e.step}, its "
                f"floor, in {n.halvings:.0f} halvings that it never grew back from: persistent overflow, every "
                "overflow came before the scaler's growth window was out, so none was a routine probe; the "
                "scale cannot go lower: find the overflowing module, or train in bf16")
    return (f"{n.skipped:.0f} step(s) skipped at the scale's floor ({number(n.scale_to)}) from step {e.step}: "
            "persistent overflow, the scale cannot go lower; activations overflow fp16 at any scale: "
            "find the overflowing module, or train in bf16")
