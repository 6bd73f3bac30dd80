"""The general metric-line reader: any line-oriented text log -> series.

Groups of lines (`columns`) -> one step per line (`steps`) -> series per column,
with overflow lines turned into skipped steps and loss-scale values, the same
step printed again (every rank, micro-batches) read once, and streams kept apart
(`val_*`, `test_*` columns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from postmortem.errors import RunReadError
from postmortem.run.aliases import canonical_name
from postmortem.run.assemble import Series
from postmortem.run.metriclines import overflow as events
from postmortem.run.metriclines import steps as stepping
from postmortem.run.metriclines.columns import Group
from postmortem.run.metriclines.lettertotal import letter_total
from postmortem.run.model import Source

_METRIC_WORDS = ("loss", "acc", "norm", "lr", "learning", "ppl", "perplexity", "reward", "mse",
                 "mae", "error", "f1", "bleu", "map", "kl", "entropy", "grad", "top1", "auc")


@dataclass
class Lines:
    """Every useful line, in file order, with its group and its step."""

    groups: list[Group]
    rows: np.ndarray          # line number of each entry
    gid: np.ndarray           # its group
    pos: list[np.ndarray]     # per group: the entries of its rows
    step: np.ndarray          # per entry (NaN: no step could be given)
    keep: np.ndarray          # per entry
    first_counted: int | None = None   # the first entry with a step counter of its own


def _gather(groups: list[Group], name: str) -> np.ndarray:
    """A counter over every line; a message's counters are its own (`overflow.own_step`),
    never the file's step kind."""
    return np.concatenate([np.full(len(g.rows), np.nan) if g.parsed.overflow or name not in g.counters
                           else g.counters[name] for g in groups])


def metric_like(name: str) -> bool:
    low = name.lower()
    return any(w in low for w in _METRIC_WORDS)


def is_metric_log(groups: list[Group]) -> bool:
    """Enough evidence that this text is a training log: a metric-looking name or an overflow."""
    named = [g for g in groups if any(metric_like(c) for c in g.values) or letter_total(g.values)]
    lines = sum(len(g.rows) for g in named)
    counted = any(g.parsed.counters or g.parsed.epoch is not None for g in named)
    overflow = sum(len(g.rows) for g in groups if g.parsed.overflow)
    return lines >= 2 or (lines == 1 and counted) or overflow >= 2


def place(groups: list[Group], source: Source) -> Lines:
    rows = np.concatenate([g.rows for g in groups])
    gid = np.concatenate([np.full(len(g.rows), i) for i, g in enumerate(groups)])
    order = np.argsort(rows, kind="stable")
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    rows, gid = rows[order], gid[order]
    bounds = np.concatenate([[0], np.cumsum([len(g.rows) for g in groups])])
    pos = [inv[bounds[i]:bounds[i + 1]] for i in range(len(groups))]

    counters: dict[str, np.ndarray] = {}
    names = {k for g in groups for k in g.counters}
    for name in names:
        counters[name] = _gather(groups, name)[order]
    n = len(rows)
    keep = np.ones(n, dtype=bool)
    if "progress_i" in counters:         # a Keras bar before its epoch's last batch
        pi, pn = counters["progress_i"], counters["progress_n"]
        frame = np.isfinite(pi)
        if frame.any() and not (pi[frame] >= pn[frame]).any():
            # only frames from within one epoch (a paste of Keras 1/2's `ETA:` frames, deep_qa):
            # each frame's batch i is its step, its values the epoch's running means so far
            tqdm = counters.get("tqdm", np.full(n, np.nan))
            counters["tqdm"] = np.where(frame & np.isnan(tqdm), pi, tqdm)
            source.warn("only progress-bar frames from within an epoch: steps are their batch i, "
                        "the values running means over the epoch")
        else:
            keep &= ~(frame & (pi < pn))
    own, kind = stepping.own_steps(counters, n, source)
    overflow = np.zeros(n, dtype=bool)
    train = np.zeros(n, dtype=bool)
    for i, g in enumerate(groups):
        if g.parsed.overflow:
            overflow[pos[i]] = True
        if g.parsed.values and g.parsed.stream not in ("val", "test") and not all(
                c.startswith(("val", "eval", "test")) for c in g.values):
            train[pos[i]] = True
    own = np.where(keep, own, np.nan)
    for i, g in enumerate(groups):
        if g.parsed.overflow:       # a message's step is only the one its words (or frame) give
            own[pos[i]], beside = events.own_step(g)
            kind = kind or beside or ""
    counted = np.flatnonzero(np.isfinite(own))
    step, note = stepping.assign(own, overflow, train & keep, source)
    _after_last_logged(groups, pos, own, step, keep)
    if kind:
        source.extras["step_from"] = f"{kind} (the lines' own counter)"
    elif note:
        source.extras["step_from"] = note
    if overflow.any():
        events.place_lines(groups, pos, step, keep & (~overflow | np.isfinite(own)), overflow, source)
    keep &= np.isfinite(step)
    head = np.arange(n) < (counted[0] if len(counted) else n)
    _dedupe(groups, pos, step, keep, head, np.isfinite(own), source)
    return Lines(groups, rows, gid, pos, step, keep, int(counted[0]) if len(counted) else None)


def _after_last_logged(groups: list[Group], pos: list[np.ndarray], own: np.ndarray, step: np.ndarray,
                       keep: np.ndarray) -> None:
    """A NaN said in words (`nanwords`) at the step after the last one logged before it, under
    the log's own loss column's name (OpenNMT-tf's `Loss`). Where the log then prints that step
    itself (SpeechBrain's epoch line after the words said during the epoch), the NaN is that
    line's loss: the mean it prints leaves the non-finite batches out."""
    said = np.zeros(len(step), dtype=bool)
    for g, p in zip(groups, pos):
        if g.parsed.next_step:
            said[p] = True
    if not said.any():
        return
    last = stepping.ffill(np.where(said, np.nan, own))
    step[said] = np.where(np.isfinite(last[said]), last[said] + 1, step[said])
    _onto_the_step_logged(groups, pos, own, step, said, keep)
    names = [c for g in groups if not g.parsed.next_step for c in g.values if c.lower() == "loss"]
    if names and names[0] != "loss":
        for g in groups:
            if g.parsed.next_step and "loss" in g.values:
                g.values = {names[0]: g.values.pop("loss"), **g.values}


def _onto_the_step_logged(groups: list[Group], pos: list[np.ndarray], own: np.ndarray, step: np.ndarray,
                          said: np.ndarray, keep: np.ndarray) -> None:
    """Each said NaN whose step a later train line of the log prints with its own counter:
    that line's loss made NaN, the said row dropped (one step, one row)."""
    for g, p in zip(groups, pos):
        if g.parsed.next_step or g.parsed.stream in ("val", "test"):
            continue
        col = next((c for c in g.values if canonical_name(c) == "loss"), None)
        if col is None:
            continue
        mine = np.isfinite(own[p])
        for q in np.flatnonzero(said & keep):
            at = np.flatnonzero(mine & (own[p] == step[q]) & (p > q))
            if len(at):
                g.values[col] = g.values[col].astype(np.float64, copy=True)
                g.values[col][at[0]] = np.nan
                keep[q] = False


# A step printed again with other values at more places than this is a trainer's habit
# (micro-batches of one step), not a relaunch
RELAUNCHES_AT_MOST = 3


def _dedupe(groups: list[Group], pos: list[np.ndarray], step: np.ndarray, keep: np.ndarray,
            head: np.ndarray, counted: np.ndarray, source: Source) -> None:
    """The same step printed again by a line with the same columns.

    With the same values (every rank printing it) the first is kept. With other values at
    a few places only, and a step counter on both lines (not a step given by guess), both
    are kept: a second launch logging that step again, which
    `assemble` makes a segment of its own (two values for one step are never dropped
    unsaid). At many places (micro-batches of one step) the first is kept, or the one with
    a NaN where the other has none (a logged NaN is evidence), with a warning. A `head` line
    (before any step counter: given the first step by guess) followed by the step's own
    (OLMo's pre-train system metrics, then the same names under `[step=10/...]`) is dropped
    unsaid, as the preamble's values are (`_preamble`), being no repeat."""
    same = differ = 0
    kinds: dict[tuple, list[tuple[Group, np.ndarray]]] = {}
    for g, p in zip(groups, pos):
        if g.parsed.values:
            kinds.setdefault((g.parsed.stream, tuple(sorted(g.values))), []).append((g, p))
    for (_, cols), parts in kinds.items():
        p = np.concatenate([q for _, q in parts])
        if len(p) < 2:
            continue
        srt = np.argsort(p, kind="stable")
        p = p[srt]
        live = keep[p]
        p, srt = p[live], srt[live]
        s = step[p]
        again = np.flatnonzero(s[1:] == s[:-1]) + 1
        if not len(again):
            continue
        values = np.concatenate([np.column_stack([g.values[c] for c in cols]) for g, _ in parts])[srt]
        a, b = values[again - 1], values[again]
        equal = ((a == b) | (np.isnan(a) & np.isnan(b))).all(axis=1)
        guessed = head[p[again - 1]] & ~head[p[again]]
        keep[p[again - 1][guessed]] = False
        rest = ~guessed
        keep[p[again[rest & equal]]] = False
        same += int((rest & equal).sum())
        other = rest & ~equal
        own = counted[p[again - 1]] & counted[p[again]]
        if 0 < (other & own).sum() <= RELAUNCHES_AT_MOST:
            other &= ~own               # both kept: `assemble` opens a segment at the second
        nan_later = np.isnan(b).any(axis=1) & ~np.isnan(a).any(axis=1)
        keep[p[np.where(other & nan_later, again - 1, again)[other]]] = False
        differ += int(other.sum())
    if same:
        source.warn(f"{same} line(s) repeat the line before them, step and values (every rank "
                    f"printing): the first of each is kept")
    if differ:
        source.warn(f"{differ} line(s) repeat the step of the line before them with other values "
                    f"(micro-batches of one step?): the first of each is kept (or the one with a NaN)")


def series(lines: Lines, source: Source) -> list[Series]:
    """One series per column; overflow lines become `overflows`, `skipped` and `loss_scale`."""
    parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for g, p in zip(lines.groups, lines.pos):
        k = lines.keep[p]
        every = bool(k.all())
        for name, values in g.values.items():
            mask = k & g.masks[name] if name in g.masks else (None if every else k)
            if mask is None:
                parts.setdefault(name, []).append((p, values))
            elif mask.any():
                parts.setdefault(name, []).append((p[mask], values[mask]))
    kept = lines.step[lines.keep]
    if len(kept) and (kept.max() >= 2 ** 40 or kept.min() < 0):
        bad = kept.max() if kept.max() >= 2 ** 40 else kept.min()
        raise RunReadError(source.path, f"step {bad:.0f} is out of range")
    result = []
    preamble: dict[str, float] = {}
    rows = int(lines.keep.sum())
    merged: dict[tuple, tuple] = {}      # the same groups' entries merged once for all their columns
    for name, pieces in parts.items():
        key = tuple(id(a) for a, _ in pieces)
        if key not in merged:
            at = pieces[0][0] if len(pieces) == 1 else np.concatenate([a for a, _ in pieces])
            # a group's entries are in file order already; several groups are merged by position
            order = None if len(pieces) == 1 else np.argsort(at, kind="stable")
            at = at if order is None else at[order]
            merged[key] = ([a for a, _ in pieces], order, at, lines.rows[at], lines.step[at].astype(np.int64))
        _, order, at, at_rows, at_steps = merged[key]
        values = pieces[0][1] if order is None else np.concatenate([v for _, v in pieces])[order]
        if _preamble(lines, name, at):
            value = float(values[0])
            if _stated(lines, name, at[0]):
                preamble[".".join(name.split())] = int(value) if value.is_integer() else value
            continue
        if rows >= 200 and len(at) <= 2 and not metric_like(name):
            continue                      # a number in a printed sample
        result.append(Series(name, at_rows, at_steps, values))
    if preamble:
        source.extras["preamble"] = preamble
    _say_twice(lines, source)
    result = events.join_scale(result, _overflow_series(lines, source, {canonical_name(s.name) for s in result}))
    return result


def _say_twice(lines: Lines, source: Source) -> None:
    """A name printed twice in one line: both kept (`pairs._apart`), and said."""
    twice: dict[str, int] = {}
    for g, p in zip(lines.groups, lines.pos):
        kept = int(lines.keep[p].sum())
        for name in g.parsed.twice if kept else ():
            twice[name] = twice.get(name, 0) + kept
    for name, n in twice.items():
        source.warn(f"{name!r} is printed twice in one line ({n} line(s)): both kept, the later "
                    f"one as {name}_2")


def _preamble(lines: Lines, name: str, at: np.ndarray) -> bool:
    """A `name: value` printed once before the first line with a step counter (nanoGPT's
    `tokens per iteration will be: 491,520`, `number of parameters: 10.65M`, a config dump's
    `lr: 0.0006`): a fact about the run, not a metric. A loss printed there stays a metric."""
    first = lines.first_counted
    if first is None or len(at) != 1 or at[0] >= first:
        return False
    return "loss" not in name.lower()


_WORDS = re.compile(r"[A-Za-z][\w ]*")


def _stated(lines: Lines, name: str, entry: int) -> bool:
    """A fact stated in words (`found vocab_size = 65`), not a number in printed code
    (`DataLoader(dataset, batch_size=1)`): kept as the run's config."""
    g = lines.groups[lines.gid[entry]]
    start = next((v.start for v in g.parsed.values if v.column == name), None)
    return start is not None and "(" not in g.text[:start] and bool(_WORDS.fullmatch(name))


def _overflow_series(lines: Lines, source: Source, present: set[str]) -> list[Series]:
    orders, steps, scales, kinds, ids, nans, prevs = [], [], [], [], [], [], []
    norms: list[float | None] = []
    for g, p in zip(lines.groups, lines.pos):
        if not g.parsed.overflow:
            continue
        k = lines.keep[p]
        n = int(k.sum())
        orders.append(lines.rows[p][k])
        steps.append(lines.step[p][k])
        scale, said_nan = events.group_scale(g)
        scales.append(scale[k])
        prevs.append(events.group_prev(g)[k])
        nans.append(np.full(n, said_nan))
        kinds += [g.parsed.overflow["kind"]] * n
        norms += [events.group_norm(g)] * n
        ids += [g.parsed.overflow["dialect"]] * n
    if not orders or not sum(len(o) for o in orders):
        return []
    return events.series_of(np.concatenate(orders), np.concatenate(steps), np.concatenate(scales),
                            kinds, ids, source, present, np.concatenate(nans), np.concatenate(prevs),
                            norms)
