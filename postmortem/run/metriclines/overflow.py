"""Frameworks' event messages in a line: overflows, skipped steps, loss-scale changes, resumes.

The words come from the catalogue (`postmortem.run.dialects`, kinds overflow / skipped /
scale / resume / checkpoint), each entry read from the framework's own source. A line is
tested against the entries' keywords first (one substring test each), so a log without
such messages pays almost nothing.

`place` puts a run of messages that carry no step of their own on steps: the scaler
reports a skipped step before the trainer prints the step line that follows, so the
messages between the step lines L and N are the steps just before N, one each
(N-k+1..N), as far as the steps between L and N allow; where they do not, the first
ones share the first step left (their count kept, the scale after the last of them).
Messages after the last step line take L+1, L+2, ...; a log of messages alone, 1, 2, ...
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from postmortem.run.aliases import canonical_name
from postmortem.run.assemble import Series
from postmortem.run.dialects import Dialect, catalogue
from postmortem.run.metriclines.steps import STEP_KINDS, bfill, ffill
from postmortem.run.nonfinite import nonfinite

EVENT_KINDS = ("overflow", "skipped", "scale", "resume", "checkpoint", "eval_boundary")
# kinds that are one skipped optimizer step each
SKIPS = ("overflow", "skipped")

_ENTRIES: list[Dialect] | None = None
_KEYWORDS: tuple[str, ...] = ()


def entries() -> list[Dialect]:
    """The event dialects, most specific first (a hysteresis line before the bare OVERFLOW)."""
    global _ENTRIES, _KEYWORDS
    if _ENTRIES is None:
        found = [d for d in catalogue() if d.kind in EVENT_KINDS]
        _ENTRIES = sorted(found, key=lambda d: -len(d.regex))
        progress = [e for d in catalogue() if d.kind in ("progress", "eval") for e in d.examples]
        _KEYWORDS = stems(sorted({k for d in found for k in d.keywords}), progress)
    return _ENTRIES


def stems(keywords: list[str], progress: list[str], n: int = 7) -> tuple[str, ...]:
    """A few short pieces such that every keyword holds one (so a line holding a keyword holds
    a piece: the test before the entries' own), none of them in a progress line of the
    catalogue (those are the lines a log is made of). Greedy: the piece most keywords share
    first; a keyword with no such piece stands for itself. Fewer substring tests per line:
    the line readers ask every line."""
    blob = "\n".join(progress)
    holders: dict[str, set[str]] = {}
    for k in keywords:
        for i in range(len(k) - n + 1):
            holders.setdefault(k[i:i + n], set()).add(k)
    holders = {piece: ks for piece, ks in holders.items() if piece not in blob}
    left, out = set(keywords), []
    while left:
        best = max(sorted(holders), key=lambda piece: len(holders[piece] & left), default=None)
        if best is None or not holders[best] & left:
            out += sorted(left)
            break
        out.append(best)
        left -= holders[best]
    return tuple(out)


def find_event(text: str) -> dict | None:
    """The first event message in `text`: {'dialect', 'kind', 'start', 'end', and the spans of its
    values: 'scale', 'prev_scale', 'ratio', 'rank', 'step', 'loss', 'norm' (None where the message
    has none; a loss only where the message is the run's own metric line; 'ratio' where the new
    scale is printed as a product `X*r`, Paddle's; a norm where it names the grad norm it skipped
    on)}."""
    dialects = entries()
    if not any(k in text for k in _KEYWORDS):
        return None
    best = None
    for d in dialects:
        m = d.search(text)
        if m and (best is None or m.start() < best[1].start()):
            best = (d, m)
    if best is None:
        return None
    d, m = best
    names = m.re.groupindex
    out = {"dialect": d.id, "kind": d.kind, "start": m.start(), "end": m.end()}
    for name in ("scale", "prev_scale", "ratio", "rank", "step", "loss", "norm"):
        out[name] = m.span(name) if name in names and m.group(name) is not None else None
    return out


def said_norm(text: str) -> float | None:
    """The grad norm a skip message names, where it is not finite (`nan`, `inf`, PyTorch's
    `tensor(inf, device='cuda:0')`); None where it names none or a finite one."""
    m = _NORM_WORD.match(text)
    return nonfinite(m.group(1)) if m else None


_NORM_WORD = re.compile(r"\s*(?:tensor\()?([-+]?[\w.#()]+?)(?:,|\)|$)")


def number(text: str) -> float:
    """A scale as printed, `inf` and `nan` included."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def product(prev, ratio: float):
    """The scale after a change printed as a product (Paddle's `decrease to: X*0.5`): the
    scale before times the ratio, X/2 for the default `decr_ratio`."""
    return prev * ratio


@dataclass
class Event:
    """One message: where it is (`order`), its own step (NaN: none), what it says."""

    order: int
    dialect: str
    kind: str
    step: float = math.nan
    scale: float = math.nan
    prev: float = math.nan
    rank: float = math.nan
    said_nan: bool = False        # the scale printed was `nan` (not: no scale printed)
    norm: float | None = None     # the non-finite grad norm it names (ESPnet's, FunASR's skip)


def merge_repeats(events: list[Event], adjacent: list[bool]) -> tuple[list[Event], int, int]:
    """One event per thing that happened: a message of another rank is not counted (rank 0,
    or the lowest rank that spoke, is); a message said again right after itself with the same
    values (every rank printing it, without a rank of its own) is one; DeepSpeed's
    `Grad overflow on iteration N` is the first of the messages its scaler prints for one
    overflow, and `Reducing ... from X to Y` beside `Attempted loss scale: X, reducing to Y`
    is the same halving; a message its framework prints from one rank only (`one_rank`) said
    again is the next skip. `adjacent[i]`: nothing but messages between event i-1 and i.
    Returns the events kept, and how many were other ranks' and repeats."""
    ranks = [e.rank for e in events if not math.isnan(e.rank)]
    low = min(ranks) if ranks else math.nan
    kept: list[Event] = []
    others = repeats = 0
    pending_marker = False
    for e, near in zip(events, adjacent):
        if not math.isnan(e.rank) and e.rank != low:
            others += 1
            continue
        if e.dialect == "deepspeed.grad_overflow":
            pending_marker = True
            continue
        prev = kept[-1] if kept else None
        same = (prev is not None and near and prev.kind == e.kind
                and _eq(prev.scale, e.scale) and _eq(prev.prev, e.prev) and _eq(prev.step, e.step)
                and (prev.dialect == e.dialect or not math.isnan(e.scale)))
        if same and not pending_marker and math.isnan(e.rank) and e.dialect not in _one_rank():
            repeats += 1
            continue
        pending_marker = False
        kept.append(e)
    return kept, others, repeats


def _one_rank() -> frozenset[str]:
    return frozenset(d.id for d in entries() if d.one_rank)


def _eq(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _after_step_line() -> frozenset[str]:
    return frozenset(d.id for d in entries() if d.after_step_line)


def place(events: list[Event], next_step: list[float], last_step: list[float]) -> list[float]:
    """The step of each event (see the module's docstring). `next_step[i]` / `last_step[i]`:
    the step of the step line after / before event i (NaN: none)."""
    steps = [math.nan] * len(events)
    i = 0
    while i < len(events):
        e = events[i]
        if not math.isnan(e.step):
            steps[i] = e.step
            i += 1
            continue
        if e.dialect in _after_step_line() and not math.isnan(last_step[i]):
            steps[i] = last_step[i]         # said after its own step's line
            i += 1
            continue
        # a run of events without a step of their own, between the same two step lines
        j = i
        while (j < len(events) and math.isnan(events[j].step)
               and _eq(next_step[j], next_step[i]) and _eq(last_step[j], last_step[i])):
            j += 1
        run = list(range(i, j))
        skips = [k for k in run if events[k].kind in SKIPS]
        hi, lo = next_step[i], last_step[i]
        if math.isnan(hi):
            start = (lo + 1) if not math.isnan(lo) else 1.0
            slots = [start + n for n in range(len(skips))]
        else:
            low = lo + 1 if not math.isnan(lo) else 0.0
            room = max(int(hi - low + 1), 1)
            n = len(skips)
            slots = [max(hi - n + 1 + m, hi - room + 1) for m in range(n)]
        at = dict(zip(skips, slots))
        # other messages (a scale raised, a resume) go with the skip before them, else with the
        # first skip's step, else with the step line after them (before them, at the end)
        here = slots[0] if slots else (hi if not math.isnan(hi) else (lo if not math.isnan(lo) else 1.0))
        for k in run:
            here = at.get(k, here)
            steps[k] = here
        i = j
    return steps


def crowded(steps: list[float], events: list[Event]) -> int:
    """Skips that share a step with another skip (more of them than steps between lines)."""
    seen: dict[float, int] = {}
    for s, e in zip(steps, events):
        if e.kind in SKIPS:
            seen[s] = seen.get(s, 0) + 1
    return sum(c - 1 for c in seen.values() if c > 1)


def join_scale(series: list, extra: list) -> list:
    """The messages' series added to the lines' ones; the scales the messages print join a
    `loss_scale` the progress lines log (fairseq's `loss_scale=` every N updates and its
    `overflow detected, setting loss scale to: X` between them): every printed scale is a
    value; where a line and a message name the same step, the one printed last is kept. The
    grad norms skip messages name join a logged `grad_norm` the same way."""
    for name in ("loss_scale", "grad_norm"):
        series, extra = _join(series, extra, name)
    return series + extra


def _join(series: list, extra: list, name: str) -> tuple[list, list]:
    mine = next((s for s in extra if s.name == name), None)
    theirs = next((i for i, s in enumerate(series) if canonical_name(s.name) == name), None)
    if mine is None or theirs is None:
        return series, extra
    old = series[theirs]
    order = np.concatenate([old.order, mine.order])
    step = np.concatenate([old.step, mine.step])
    value = np.concatenate([old.value, mine.value])
    srt = np.lexsort((order, step))
    order, step, value = order[srt], step[srt], value[srt]
    last = np.append(step[1:] != step[:-1], True)
    series = list(series)
    series[theirs] = Series(old.name, order[last], step[last], value[last])
    return series, [s for s in extra if s is not mine]


# --- the general reader's side: groups of lines -> events on steps -> series ---------------

def own_step(g) -> tuple[np.ndarray, str | None]:
    """The step a message's own words give (`at iteration N`, `global step N`), else that of a
    progress frame printed in front of it on the same line (tqdm's `9/63645 [..]` and the
    scaler's message, written at the same moment), per row; and that counter's kind."""
    span = g.parsed.overflow.get("step")
    if span:
        kind = next((k for k, s in g.parsed.counters.items() if s == span), None)
    else:
        start = g.parsed.overflow["start"]
        kind = next((k for k in STEP_KINDS if k in g.parsed.counters
                     and g.parsed.counters[k][1] <= start), None)
    col = g.counters.get(kind) if kind else None
    return (col, kind) if col is not None else (np.full(len(g.rows), np.nan), None)


def group_scale(g) -> tuple[np.ndarray, bool]:
    """The scale each of the group's messages gives (NaN: none), and whether a `nan` was
    printed there; `inf` / `nan` are the same word on every line of the group (no digits:
    the shape holds it)."""
    col = g.counters.get("overflow_scale")
    if col is not None:
        return col, False
    ratio = g.parsed.overflow.get("ratio")
    if ratio and not g.parsed.overflow.get("scale"):
        return product(group_prev(g), number(g.text[ratio[0]:ratio[1]])), False
    span = g.parsed.overflow.get("scale")
    value = number(g.text[span[0]:span[1]]) if span else math.nan
    return np.full(len(g.rows), value), bool(span) and math.isnan(value)


def group_norm(g) -> float | None:
    """The non-finite grad norm the group's messages name (`nan`, `inf`: a word, the same on
    every line of the shape); None where they name none."""
    span = g.parsed.overflow.get("norm")
    return said_norm(g.text[span[0]:span[1]]) if span else None


def group_prev(g) -> np.ndarray:
    """The scale before the change each of the group's messages names (NaN: none)."""
    col = g.counters.get("overflow_prev_scale")
    if col is not None:
        return col
    span = g.parsed.overflow.get("prev_scale")
    return np.full(len(g.rows), number(g.text[span[0]:span[1]]) if span else math.nan)


def place_lines(groups, pos, step: np.ndarray, counted: np.ndarray, overflow: np.ndarray,
                source) -> None:
    """Give every message line its step in `step` (NaN: a repeat, not counted)."""
    base = np.where(counted, step, np.nan)
    last = ffill(base)
    after = bfill(base)
    at, evs = [], []
    for g, p in zip(groups, pos):
        ov = g.parsed.overflow
        if not ov:
            continue
        (own, _), (scale, _) = own_step(g), group_scale(g)
        rank = g.counters.get("overflow_rank", np.full(len(p), np.nan))
        prev = g.counters.get("overflow_prev_scale", np.full(len(p), np.nan))
        for j, entry in enumerate(p):
            at.append(int(entry))
            evs.append(Event(int(entry), ov["dialect"], ov["kind"], float(own[j]), float(scale[j]),
                             float(prev[j]), float(rank[j])))
    order = np.argsort(at, kind="stable")
    evs = [evs[i] for i in order]
    at = [at[i] for i in order]
    adjacent = [False] + [b == a + 1 for a, b in zip(at, at[1:])]
    kept, others, repeats = merge_repeats(evs, adjacent)
    nxt = [float(after[e.order]) for e in kept]
    placed = place(kept, nxt, [float(last[e.order]) for e in kept])
    step[np.asarray(at, dtype=np.int64)] = np.nan
    for e, s in zip(kept, placed):
        step[e.order] = s
    say(source, kept, placed, others, repeats, bool(np.isfinite(base).any()), trailing(kept, nxt))


def trailing(kept: list[Event], next_step: list[float]) -> int:
    """Skips with no step of their own and no step line after them (after the last one)."""
    return sum(e.kind in SKIPS and math.isnan(e.step) and math.isnan(n) for e, n in zip(kept, next_step))


def say(source, kept: list[Event], placed: list[float], others: int, repeats: int,
         any_step: bool, after_last: int = 0) -> None:
    if others:
        source.warn(f"{others} loss-scaler message(s) from ranks other than the first one were "
                    f"not counted twice")
    if repeats:
        source.warn(f"{repeats} message(s) said again right after themselves with the same values "
                    f"(every rank printing them) were counted once")
    skips = sum(e.kind in SKIPS for e in kept)
    if skips and not any_step:
        source.warn("the log holds loss-scaler messages and no step line: each skipped step is "
                    "placed on the next step (1, 2, ...), in the order printed")
    elif skips:
        source.extras["events_placed"] = (
            "a message without a step of its own is on the step the next step line names; "
            "k of them between step lines L and N are the steps N-k+1..N, one each")
        if after_last:
            # each scaler message is one iteration: the trainer went on past its last step line
            source.extras["events_placed"] += (
                f"; after the last step line L there is no N: its {after_last} message(s) are "
                f"L+1..L+{after_last}, one iteration each")
    crowd = crowded(placed, kept)
    if crowd:
        source.warn(f"{crowd} skipped-step message(s) outnumber the steps between the step lines "
                    f"around them: they share a step (counted in `overflows`, the last scale kept)")


def scale_before(order: int, step: int, scale: float, prev: float, dialect: str
                 ) -> tuple[int, int, float] | None:
    """The scale before the first change the messages print: DeepSpeed's `Attempted loss scale:
    X` (X), apex amp's halved scale (x 2, its entry's `prev_factor`). Without it N halvings read
    as N-1 (`256 -> 2`, where 512 was halved 8 times). It is on the step before the message's
    (the last step that ran with it; a progress line further back would put the first halving
    across a hole). None where no message says it."""
    if not math.isfinite(prev):
        factor = next((d.prev_factor for d in entries() if d.id == dialect), None)
        prev = scale * factor if factor and math.isfinite(scale) and scale > 0 else math.nan
    if not math.isfinite(prev) or prev == scale:
        return None
    return (order, step - 1, prev) if step >= 1 else None


def series_of(orders: np.ndarray, steps: np.ndarray, scales: np.ndarray, kinds: list[str],
              ids: list[str], source, present: set[str], nan_said: np.ndarray | None = None,
              prevs: np.ndarray | None = None, norms: list[float | None] | None = None) -> list:
    """Events on their steps -> `overflows` and `skipped` (skips per step), `loss_scale` (the
    scale after the last message of each step, and the one before the first of them: see
    `scale_before`); resumes are remembered for the segments, eval boundaries in
    `extras["evals"]`. `prevs`: the scale each message names as the one before (NaN: none);
    `norms`: the non-finite grad norm each names (None: none), a `grad_norm` logged at its step."""
    kinds_a = np.asarray(kinds, dtype=object)
    nan_said = np.zeros(len(orders), dtype=bool) if nan_said is None else nan_said
    prevs = np.full(len(orders), np.nan) if prevs is None else prevs
    ids_a = np.asarray(ids, dtype=object)
    srt = np.lexsort((orders, steps))
    orders, steps, scales = orders[srt], steps[srt].astype(np.int64), scales[srt]
    prevs = prevs[srt]
    kinds_a, ids_a = kinds_a[srt], ids_a[srt]
    norm_a = np.full(len(orders), np.nan) if norms is None else \
        np.array([math.nan if v is None else v for v in norms], dtype=np.float64)[srt]
    norm_said = np.zeros(len(orders), dtype=bool) if norms is None else \
        np.array([v is not None for v in norms], dtype=bool)[srt]
    out, said = [], {}
    skip = np.isin(kinds_a, SKIPS)
    if norm_said.any() and "loss_scale" not in present and np.isnan(scales).all():
        # a trainer's own skip on a non-finite grad norm (ESPnet2 / FunASR `The grad norm is nan.
        # Skipping updating the model.`) in a log that prints no loss scale anywhere: no scaler's
        # overflow is in evidence, so it is the grad norm it names, not a scaler's skip (under
        # fp16 their reporter prints `loss_scale`, and the skips count as before)
        skip &= ~norm_said
    if skip.any():
        u, first, counts = np.unique(steps[skip], return_index=True, return_counts=True)
        at = orders[skip][first + counts - 1]
        names = ["overflows"] + ([] if "skipped" in present else ["skipped"])
        for name in names:
            out.append(Series(name, at, u, counts.astype(np.float64)))
            said[name] = sorted(set(ids_a[skip]))
    if norm_said.any():
        # `The grad norm is nan. Skipping updating the model.`: what it says is a non-finite grad
        # norm at that step (the skip is counted above): the NaN judgement reads it as any other
        idx = np.flatnonzero(norm_said)
        u, f, c = np.unique(steps[idx], return_index=True, return_counts=True)
        pick = idx[f + c - 1]
        out.append(Series("grad_norm", orders[pick], u, norm_a[pick]))
        said["grad_norm"] = sorted(set(ids_a[idx]))
    # the scale each message printed (`inf`, `0` and a printed `nan` kept); a message that
    # prints none (a hysteresis skip, ColossalAI's) sets no scale
    has = np.isin(kinds_a, ("overflow", "scale", "skipped")) & (~np.isnan(scales) | nan_said[srt])
    if has.any():           # beside a logged loss_scale too: `join_scale` merges them
        idx = np.flatnonzero(has)
        u, f, c = np.unique(steps[idx], return_index=True, return_counts=True)
        pick = idx[f + c - 1]
        at, on, value = orders[pick], u, scales[pick]
        first = idx[0]
        start = None if "loss_scale" in present else scale_before(      # the lines said it
            int(orders[first]), int(steps[first]), float(scales[first]), float(prevs[first]), ids_a[first])
        if start is not None:
            at, on, value = np.insert(at, 0, start[0]), np.insert(on, 0, start[1]), np.insert(value, 0, start[2])
        out.append(Series("loss_scale", at, on, value))
        said["loss_scale"] = sorted(set(ids_a[idx]))
    resume = kinds_a == "resume"
    if resume.any():
        source.resumes.extend(int(o) for o in orders[resume])
        source.extras["resumes"] = [{"step": int(s), "dialect": d} for s, d in
                                    zip(steps[resume], ids_a[resume])]
    loads = kinds_a == "checkpoint"         # weights loaded: an event, no segment of its own
    if loads.any():
        source.extras["checkpoints"] = [{"step": int(s), "dialect": d} for s, d in
                                        zip(steps[loads], ids_a[loads])]
    evals = kinds_a == "eval_boundary"
    if evals.any():
        source.extras["evals"] = [{"step": int(s), "dialect": d} for s, d in zip(steps[evals], ids_a[evals])]
    if said:
        source.extras.setdefault("series_dialects", {}).update(said)
    return out

