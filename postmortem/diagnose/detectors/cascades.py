"""The loss scaler's overflows: cascades of halvings or skips, routine probes, and falls of
the scale across a hole in the log."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from postmortem.diagnose.detectors.event import Event, Notes
from postmortem.diagnose.detectors.windows import segment_ids
from postmortem.diagnose.nan import overflow_rows, skip_counts
from postmortem.diagnose.series import interval, segment_rows
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import RunLog


class Mark(NamedTuple):
    """One sign of an overflow: a fall of the logged scale (`halvings` of it, from the row
    at step `before`, `across` a hole in the log when farther than the gap) or a row's
    skipped steps."""

    step: int
    halvings: float
    skips: float
    scale_from: float
    scale_to: float
    before: int | None
    across: bool


@dataclass(frozen=True)
class ScaleDrop:
    """A fall of the loss scale across a hole in the log (no line between the two rows): it
    may have taken the whole hole, so no cascade. From `scale_from` on the line at step
    `after` to `scale_to` at `step`."""

    after: int | None
    step: int
    scale_from: float
    scale_to: float
    halvings: float
    segment: int


class ScalerEvents(NamedTuple):
    """What the loss scaler did: its cascades, the steps of its routine probes, and the
    falls of its scale across a hole in the log."""

    cascades: list[Event]
    probes: list[int]
    drops: list[ScaleDrop]


def scaler_events(log: RunLog, th: Thresholds, skips: np.ndarray | None = None) -> ScalerEvents:
    """The loss scaler's overflows, as (cascades, steps of routine probes, drops across a
    hole in the log).

    A dynamic scaler (GradScaler, Megatron, DeepSpeed, fairseq) doubles its scale after N
    clean steps and the next step often overflows once: one skip, one halving, then normal
    training. That probe is routine. A cascade is a dense run of overflows, at least
    `cascade_halvings` halvings (or skips) with at most `cascade_gap` steps between one and
    the next (also halvings between two logged rows), dated at its first skip. The
    scaler's calibration at the start of training is neither. A fall of the scale between
    two rows farther apart than that (a hole in the log) may be spread over the whole hole:
    alone it is no cascade, only a drop {after, step, from, to, halvings}; where the scale
    goes on falling on the next lines, a cascade of low confidence (notes.sparse).
    `skips`: the skipped steps per row (Context.skips), when the caller has them."""
    f = log.frame
    if skips is None:
        # a skipped step the log counts and whose grad norm it logs as inf is one skip, not two
        skips = np.maximum(skip_counts(log), overflow_rows(log))
    sc_all = f.loss_scale.to_numpy(dtype=float, na_value=np.nan) if "loss_scale" in f else None
    has_scale = sc_all is not None and not np.isnan(sc_all).all()
    if not has_scale and not skips.any():
        return ScalerEvents([], [], [])
    first_step = int(f.step.iloc[0])
    cascades: list[Event] = []
    probes: list[int] = []
    drops: list[ScaleDrop] = []
    seg_all, st_all = f.segment.to_numpy(), f.step.to_numpy()
    for seg in segment_ids(seg_all):
        rows = segment_rows(seg_all, seg)
        st = st_all[rows]
        gap = max(th.cascade_gap, 1.5 * interval(st) if len(st) > 1 else 0)
        marks = _marks(st, skips[rows], sc_all[rows] if has_scale and sc_all is not None else None, gap)
        for cluster in _clusters(marks, gap):
            cascade, probe, drop = _judge(cluster, int(seg), gap, f, rows, first_step, th)
            cascades += cascade
            probes += probe
            drops += drop
    return ScalerEvents(cascades, probes, drops)


def _marks(st: np.ndarray, sk: np.ndarray, sc: np.ndarray | None, gap: float) -> list[Mark]:
    """A segment's falls of the scale (between its rows with a positive scale), then its
    skips."""
    marks = []
    if sc is not None:
        ok = np.isfinite(sc) & (sc > 0)
        keep = None if ok.all() else np.flatnonzero(ok)     # (no index array when all are)
        scale = sc if keep is None else sc[keep]
        for k in np.flatnonzero(scale[1:] < scale[:-1]) + 1:
            i, j = (k - 1, k) if keep is None else (keep[k - 1], keep[k])
            marks.append(Mark(int(st[j]), float(np.log2(sc[i]) - np.log2(sc[j])), 0.0, sc[i], sc[j], int(st[i]),
                              bool(st[j] - st[i] > gap)))
    for i in np.flatnonzero(sk > 0):
        marks.append(Mark(int(st[i]), 0.0, float(sk[i]), np.nan, np.nan, None, False))
    return marks


def _clusters(marks: list[Mark], gap: float) -> Iterator[list[Mark]]:
    """The marks by step (a fall before a skip of the same step), split where the next is
    more than `gap` steps after the one before."""
    marks = sorted(marks, key=lambda m: m[0])
    cluster: list[Mark] = []
    for m in marks:
        if cluster and m[0] - cluster[-1][0] > gap:
            yield cluster
            cluster = []
        cluster.append(m)
    if cluster:
        yield cluster


def _startup(step: int, first_step: int, th: Thresholds, frm: float = np.nan) -> bool:
    """The scaler's calibration at the start of training: early, and falling from near
    a scaler's initial scale (2^7 for fairseq up to 2^16 or 2^32; a search never begins
    far below, so 64 -> 2 on the first steps is a cascade)."""
    return (first_step <= th.cascade_stable_before and step < first_step + th.cascade_stable_before
            and not frm < th.scaler_initial_min)


def _judge(cluster: list[Mark], seg: int, gap: float, f: pd.DataFrame, rows: slice | np.ndarray,
           first_step: int, th: Thresholds) -> ScalerEvents:
    """One cluster of marks as ([its cascade], [routine probes], [drops across a hole]),
    each list empty where it is none of them."""
    def startup(step: int, frm: float = np.nan) -> bool:
        return _startup(step, first_step, th, frm)

    cluster, early = _past_probes(cluster, th, f.step.to_numpy()[rows])
    probes = [int(c[0]) for c in early if not startup(c[0])][:1]
    halvings = sum(c[1] for c in cluster)
    skipped = sum(c[2] for c in cluster)
    start = cluster[0][0]
    holes = [c for c in cluster if c[6]]
    frm0 = next((c[3] for c in cluster if np.isfinite(c[3])), np.nan)
    if holes and len(holes) == len(cluster) and halvings >= th.cascade_halvings and not startup(start, frm0):
        # fallen across a hole, then steady: how fast it fell is not known
        return ScalerEvents([], probes, [ScaleDrop(c.before, c.step, float(c.scale_from), float(c.scale_to),
                                                   c.halvings, seg) for c in holes])
    # (the start-up calibration never takes the scale below 1: that is overflow)
    if (max(halvings, skipped) >= th.cascade_halvings or halvings >= 2 and _loss_jumps(
            f, rows, start, cluster[-1][0] + gap, th)) and (
            not startup(start, frm0) or min((c[4] for c in cluster if np.isfinite(c[4])), default=1.0) < 1.0):
        return ScalerEvents([_cascade(cluster, seg, halvings, skipped, th)], probes, [])
    if not startup(start):
        probes.append(int(start))
    return ScalerEvents([], probes, [])


def _cascade(cluster: list[Mark], seg: int, halvings: float, skipped: float, th: Thresholds) -> Event:
    """A cluster of marks as a cascade, dated at its first skip."""
    start = cluster[0][0]
    holes = [c for c in cluster if c[6]]
    scales = [c for c in cluster if np.isfinite(c[3])]
    frm = scales[0][3] if scales else np.nan
    to = scales[-1][4] if scales else np.nan
    # the first skip: the step before a halving when the scale is logged after it
    dated = next((c[0] for c in cluster if c[2] > 0), start)
    return Event("cascade", "loss_scale", int(dated), int(seg), int(cluster[-1][0]), float(to), float(frm),
                 notes=Notes(scale_from=float(frm), scale_to=float(to), halvings=float(halvings),
                             skipped=float(skipped) if skipped else None,
                             across_gap=len(cluster) == 1 and halvings >= th.cascade_halvings,
                             # the line before the first fall, where the scale was still
                             # `scale_from` (None: dated by a skip)
                             after=scales[0][5] if scales else None,
                             sparse=bool(holes)),
                 severity=float(th.spike_sigma * max(halvings, skipped) / th.cascade_halvings))


def _loss_jumps(f: pd.DataFrame, rows: slice | np.ndarray, start: int, end: float, th: Thresholds) -> bool:
    """The loss at least `cascade_loss_jump` x its level before `start` on a line up to `end`:
    two halvings close together while the loss triples are no routine probes."""
    if "loss" not in f:
        return False
    st = f.step.to_numpy()[rows]
    loss = f.loss.to_numpy(dtype=float, na_value=np.nan)[rows]
    before = loss[(st < start) & np.isfinite(loss)][-th.spike_min_points:]
    during = loss[(st >= start) & (st <= end) & np.isfinite(loss)]
    return bool(len(before) and len(during) and np.median(before) > 0
                and during.max() >= th.cascade_loss_jump * np.median(before))


def _past_probes(cluster: list[Mark], th: Thresholds, logged: np.ndarray) -> tuple[list[Mark], list[Mark]]:
    """A cascade's marks without the routine probe just before it: the leading burst (marks on
    consecutive steps: a skip and its halving) of one halving or one skip, where the rest is
    still a cascade, and a line of the log between the two says the steps there ran clean
    (`logged`: the segment's steps). Without one, the steps between are not seen: messages
    placed at the end of a logging interval (k of them on N-k+1..N), a scale logged every 50
    steps, leave a hole after the cascade's first skip that is no calm.
    Returns (the cascade's marks, the probe's)."""
    bursts, cur = [], [cluster[0]]
    for m in cluster[1:]:
        if m[0] - cur[-1][0] > 1:
            bursts.append(cur)
            cur = []
        cur.append(m)
    bursts.append(cur)

    def size(b: list[Mark]) -> float:
        return max(sum(c[1] for c in b), sum(c[2] for c in b))

    if len(bursts) > 1 and size(bursts[0]) <= 1 and size([c for b in bursts[1:] for c in b]) >= th.cascade_halvings:
        calm = bool(((logged > bursts[0][-1][0]) & (logged < bursts[1][0][0])).any())
        if calm:
            return [c for b in bursts[1:] for c in b], bursts[0]
    return cluster, []


def scaler_events_reference(log: RunLog, th: Thresholds, skips: np.ndarray | None = None) -> ScalerEvents:
    """`scaler_events` one row at a time (slow: what the property test holds the vectorised
    one to): in each segment, every fall of the logged scale from the row before that has a
    positive scale, and every row's skipped steps, in step order, taken together while each
    is within the gap (`cascade_gap`, or 1.5 logging intervals) of the one before. What a
    cluster is (`_judge`: cascade, probe, drop or the start-up calibration) is one reading
    of the rules, shared by both."""
    f = log.frame
    if skips is None:
        skips = np.maximum(skip_counts(log), overflow_rows(log))
    scale = f.loss_scale.to_numpy(dtype=float, na_value=np.nan) if "loss_scale" in f else np.full(len(f), np.nan)
    if np.isnan(scale).all() and not skips.any():
        return ScalerEvents([], [], [])
    steps, segments = f.step.to_numpy(), f.segment.to_numpy()
    cascades: list[Event] = []
    probes: list[int] = []
    drops: list[ScaleDrop] = []
    for seg in sorted(set(segments.tolist())):
        rows = [r for r in range(len(f)) if segments[r] == seg]
        gap = max(th.cascade_gap, 1.5 * float(np.median(np.diff(steps[rows]))) if len(rows) > 1 else 0)
        marks, before = [], None              # (before: the last row with a positive scale)
        for r in rows:
            if scale[r] > 0 and np.isfinite(scale[r]):
                if before is not None and scale[r] < scale[before]:
                    marks.append(Mark(int(steps[r]), float(np.log2(scale[before]) - np.log2(scale[r])), 0.0, scale[before],
                                      scale[r], int(steps[before]), bool(steps[r] - steps[before] > gap)))
                before = r
        marks += [Mark(int(steps[r]), 0.0, float(skips[r]), np.nan, np.nan, None, False) for r in rows if skips[r] > 0]
        marks.sort(key=lambda m: m.step)
        while marks:
            cluster = [marks.pop(0)]
            while marks and marks[0].step - cluster[-1].step <= gap:
                cluster.append(marks.pop(0))
            cascade, probe, drop = _judge(cluster, seg, gap, f, np.array(rows), int(steps[0]), th)
            cascades, probes, drops = cascades + cascade, probes + probe, drops + drop
    return ScalerEvents(cascades, probes, drops)
