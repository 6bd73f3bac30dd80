"""Points in file order -> one row per (segment, step); resumes become segments."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from postmortem.errors import RunReadError
from postmortem.run.aliases import canonical_name
from postmortem.run.model import CANONICAL, RunLog, RunManifest, Source
from postmortem.run.nonfinite import nonfinite

_STEP_BITS = 40  # distinct steps up to ~1.1e12; the segment id sits above them in one int64 key


@dataclass
class Series:
    """One metric's logged points, in the order they appear in the source.

    `order` is a global position (line, row or record number) shared by all
    series of one source, so interleaved metrics keep their relative order.
    Every point present was logged: a NaN value is a logged NaN.
    """

    name: str
    order: np.ndarray
    step: np.ndarray
    value: np.ndarray


def series_from_wide(steps: np.ndarray, columns: dict[str, np.ndarray],
                     logged_nan: dict[str, np.ndarray] | None = None) -> list[Series]:
    """Split a wide table (NaN = missing unless flagged in `logged_nan`) into series."""
    order = np.arange(len(steps), dtype=np.int64)
    out = []
    for name, values in columns.items():
        if values.dtype == object:
            keep = pd.notna(values)
        else:
            keep = ~np.isnan(values)
            if logged_nan and name in logged_nan:
                keep |= logged_nan[name]
        out.append(Series(name, order[keep], steps[keep], values[keep]))
    return out


def canonical_order(names: list[str]) -> list[str]:
    rank = {c: i for i, c in enumerate(CANONICAL)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n if n not in rank else ""))


def _note_names(source: Source, origin: dict[str, list[str]]) -> None:
    """Which name in the log each canonical column came from (`info` shows it)."""
    names = source.extras.setdefault("names", {})
    for canon, given in origin.items():
        if given != [canon]:
            names[canon] = sorted(set(given))


def _merge_aliases(series: list[Series], source: Source) -> list[Series]:
    """Rename through the alias table; two source names on one column are concatenated."""
    by_name: dict[str, list[Series]] = {}
    origin: dict[str, list[str]] = {}
    for s in series:
        canon = canonical_name(s.name)
        by_name.setdefault(canon, []).append(s)
        origin.setdefault(canon, []).append(s.name)
    _note_names(source, origin)
    merged = []
    for canon, parts in by_name.items():
        if len(parts) > 1 and canon != parts[0].name:
            source.warn(f"{' and '.join(sorted(set(origin[canon])))} all map to {canon}; merged")
        if len(parts) == 1:
            s = parts[0]
            merged.append(Series(canon, s.order, s.step, s.value))
        else:
            merged.append(Series(
                canon,
                np.concatenate([p.order for p in parts]),
                np.concatenate([p.step for p in parts]),
                np.concatenate([p.value for p in parts]),
            ))
    return merged


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values: np.unique by a sort (numpy 2.4's hashed unique is ~20x
    slower on a million integers)."""
    s = np.sort(values)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    if s.dtype.kind == "f":
        keep[1:] &= ~(np.isnan(s[1:]) & np.isnan(s[:-1]))   # one NaN, as np.unique keeps
    return s[keep]


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == object:
        return a == b
    return (a == b) | (np.isnan(a) & np.isnan(b))


def _increasing(s: Series) -> bool:
    """Steps strictly increasing in file order: no resume, no repeat in this series."""
    if len(s.step) < 2:
        return True
    if not (s.order[1:] > s.order[:-1]).all():
        return False
    return bool((s.step[1:] > s.step[:-1]).all())


def _single_segment(series: list[Series], source: Source, manifest: RunManifest | None) -> RunLog:
    """The common case, without the sorting the general route needs. Consumes `series`:
    each one is freed once its column is built."""
    first = series[0].step
    same = all(s.step is first or len(s.step) == len(first) and (s.step == first).all() for s in series[1:])
    if same:
        steps = first.astype(np.int64)
    else:
        steps = distinct(np.concatenate([s.step for s in series])).astype(np.int64)
    if steps[0] < 0:
        raise RunReadError(source.path, f"step {steps[0]} is negative")
    n = len(steps)
    frame = {"segment": np.zeros(n, dtype=np.int64), "step": steps}
    logged_nan: dict[str, np.ndarray] = {}
    while series:
        s = series.pop(0)
        if s.value.dtype == object:
            col = np.full(n, None, dtype=object)
            col[np.searchsorted(steps, s.step)] = s.value
        elif same:                               # every metric on every step: no scatter
            col = s.value.astype(np.float64, copy=False)
            nan_rows = np.flatnonzero(np.isnan(col))
        else:
            rows = np.searchsorted(steps, s.step)
            col = np.full(n, np.nan)
            col[rows] = s.value
            nan_rows = rows[np.isnan(s.value)]
        if col.dtype != object and len(nan_rows):
            logged_nan[s.name] = nan_rows
        frame[s.name] = col
        del s
    names = canonical_order([k for k in frame if k not in ("segment", "step")])
    df = pd.DataFrame({k: frame[k] for k in ["segment", "step", *names]}, copy=False)
    return RunLog(frame=df, source=source, manifest=manifest, logged_nan=logged_nan)


# Columns that name the launch or phase a row belongs to: where they change, a segment starts.
LAUNCH_COLUMNS = {"run", "run_id", "runid", "phase", "stage", "launch", "attempt", "restart", "job_id"}
# A pause between two logged points this much longer than the usual one (and at least
# _GAP_SECONDS) is a relaunch, where the wall-clock column says it.
_GAP_TIMES, _GAP_SECONDS = 50, 600.0


def relaunches(series: list[Series], source: Source) -> list[int]:
    """Where a relaunch that keeps counting starts (orders): the LR going back into warmup, a
    launch / phase column changing, the wall clock jumping (back, or a long pause)."""
    out: list[int] = []
    for s in series:
        name = canonical_name(s.name)
        if len(s.value) < 3:
            continue
        if name == "lr" and s.value.dtype != object:
            at = _warmup_again(s.value.astype(np.float64, copy=False))
            if len(at):
                out += s.order[at].tolist()
                _reason(source, "the LR back in warmup", s.order[at], "the LR back in warmup (a relaunch)")
                source.warn(f"the LR goes back into warmup {len(at)} time(s) (at step(s) "
                            f"{', '.join(str(int(x)) for x in s.step[at][:5])}): a relaunch, read as a "
                            f"new segment though the steps go on")
        elif name.lower() in LAUNCH_COLUMNS:
            v = s.value
            changed = np.flatnonzero(np.asarray(v[1:] != v[:-1], dtype=bool)
                                     & ~np.asarray(pd.isna(v[1:]) & pd.isna(v[:-1]), dtype=bool)) + 1
            if len(changed):
                out += s.order[changed].tolist()
                _reason(source, f"{s.name} changing", s.order[changed], f"{s.name} changed")
                source.warn(f"{s.name} changes {len(changed)} time(s): each value read as a "
                            f"segment (a launch or phase of its own)")
        elif name == "wall_time" and s.value.dtype != object:
            t = s.value.astype(np.float64, copy=False)
            d = np.diff(t)
            ok = np.isfinite(d)
            if ok.sum() < 3:
                continue
            usual = float(np.median(d[ok & (d > 0)])) if (ok & (d > 0)).any() else 0.0
            jump = ok & ((d < 0) | (d > max(_GAP_TIMES * usual, _GAP_SECONDS)))
            # a pause before the last point only (a final eval written later) starts nothing
            jump[-1] &= d[-1] < 0
            at = np.flatnonzero(jump) + 1
            if len(at):
                out += s.order[at].tolist()
                hows = [f"wall clock went back {-d[i - 1]:.0f}s (appended runs)" if d[i - 1] < 0
                        else f"wall-clock gap of {d[i - 1]:.0f}s" for i in at]
                _reason(source, "the wall clock jumping", s.order[at], hows)
                source.warn(f"the wall clock jumps {len(at)} time(s) (back, or a pause far longer "
                            f"than a step): read as a relaunch each")
    return out


def _warmup_again(lr: np.ndarray) -> np.ndarray:
    """Points where the LR falls to a small fraction of what it was and then replays the run's
    own first values (its warmup, as logged at the start): a relaunch with the same schedule.
    A schedule that falls and climbs on its own course (a sign flipped in a cosine, a cyclic
    or warm-restart schedule) is no relaunch: that is for the checks to find."""
    n = len(lr)
    if n < 5:
        return np.empty(0, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        i = np.flatnonzero(lr[1:n - 3] < 0.4 * lr[:n - 4]) + 1     # one pass: falls are rare
    if not len(i):
        return np.empty(0, dtype=np.int64)
    i = i[(lr[i + 1] > lr[i]) & (lr[i + 2] > lr[i + 1]) & (lr[i + 3] > lr[i + 2])]
    start = lr[:4]
    return np.array([k for k in i if np.allclose(lr[k:k + 4], start, rtol=0.02, atol=0)
                     and np.all(lr[k:k + 4] > 0)], dtype=np.int64)


_RELAUNCH_SAYERS = ("loss", "grad_norm", "lr")


def _repeats(series: list[Series], uorder: np.ndarray, source: Source) -> np.ndarray:
    """Positions in `uorder` where a metric logs a step it logged just before with another
    value, at a few places only: a second launch logging that step again."""
    at: list[np.ndarray] = []
    retried = _skipped_steps(series)
    for s in series:
        # the training metrics: a clock or an epoch counter written twice at one step (by
        # two loggers, an eval and a summary) is no relaunch
        if len(s.step) < 2 or s.value.dtype == object or canonical_name(s.name) not in _RELAUNCH_SAYERS:
            continue
        o = np.argsort(s.order, kind="stable")
        st, v, line = s.step[o], s.value[o].astype(np.float64, copy=False), s.order[o]
        # (two names of one line merged by the alias table, `loss` and `lm_loss`: no relaunch)
        again = np.flatnonzero((st[1:] == st[:-1]) & (line[1:] != line[:-1])) + 1
        if len(again):
            differ = again[~_same(v[again], v[again - 1])]
            # a step the scaler said it skipped (fairseq's fp16 `NOTE: overflow detected`, its
            # progress row printed again with num_updates unchanged) is the update retried
            differ = differ[~np.isin(st[differ], retried)]
            at.append(s.order[o][differ])
    if not at:
        return np.empty(0, dtype=np.int64)
    orders = distinct(np.concatenate(at))
    if not 0 < len(orders) <= 3:
        return np.empty(0, dtype=np.int64)
    _reason(source, "a step logged again with other values", orders, "the step logged again with other values")
    source.warn(f"{len(orders)} step(s) logged again with other values (a second launch logging "
                f"them again?): both kept, the second in a new segment")
    return np.searchsorted(uorder, orders)


def _skipped_steps(series: list[Series]) -> np.ndarray:
    """The steps where an overflow / skipped-update message was counted (`overflows`, `skipped`):
    the update is done again at the same step, so a row logged again there is no relaunch."""
    steps = [s.step[np.asarray(s.value, dtype=np.float64) > 0] for s in series
             if canonical_name(s.name) in ("overflows", "skipped") and s.value.dtype != object]
    return np.concatenate(steps) if steps else np.empty(0, dtype=np.int64)


def segment_reason(source: Source, why: str, orders=(), how: str = "") -> None:
    """A reader's own reason for the segments it marks in `Source.resumes` (a launch banner)."""
    _reason(source, why, orders, how)


def _reason(source: Source, why: str, orders=(), how: str | list[str] = "") -> None:
    """Say why segments start: `why` once for the whole read; `how` for each start at
    `orders` (kept as `segment_how`, order -> words, until the segments are numbered)."""
    reasons = source.extras.setdefault("segment_reasons", [])
    if why not in reasons:
        reasons.append(why)
    hows = [how] * len(orders) if isinstance(how, str) else how
    at = source.extras.setdefault("segment_how", {})
    for o, h in zip(np.asarray(orders).tolist(), hows):
        at.setdefault(int(o), h)


def build_runlog(series: list[Series], source: Source,
                 manifest: RunManifest | None = None, resumes: Sequence[int] = ()) -> RunLog:
    """Assemble series into a RunLog: segments where steps go backwards, one row per step.

    `resumes` lists order positions known to start a new segment (a Lightning
    version directory of a resumed run) even where the steps carry on.
    """
    given, series = series, [s for s in _merge_aliases(series, source) if s.name not in ("step", "segment")]
    given.clear()        # the caller's list let go: each array is freed once it is placed
    series = [s for s in series if len(s.step)]
    if not series:
        raise RunReadError(source.path, "no per-step metrics found")
    starts = _known_starts(series, source, resumes)
    if not len(starts) and all(_increasing(s) for s in series):
        return _single_segment(series, source, manifest)

    all_step = np.concatenate([s.step for s in series]).astype(np.int64, copy=False)
    if all_step.min() < 0:
        raise RunReadError(source.path, f"step {all_step[all_step < 0][0]} is negative")
    # Keys hold the segment above the step's rank among the distinct steps, so a step of any
    # size (tokens as the step axis) fits beside it in one int64.
    steps_seen = distinct(all_step)
    uorder, seg_of_order = _segments(series, all_step, starts, source)
    keys = [(seg_of_order[np.searchsorted(uorder, s.order)] << _STEP_BITS)
            | np.searchsorted(steps_seen, s.step.astype(np.int64, copy=False)) for s in series]
    row_keys = distinct(np.concatenate(keys))
    frame = {"segment": (row_keys >> _STEP_BITS).astype(np.int64),
             "step": steps_seen[row_keys & ((1 << _STEP_BITS) - 1)].astype(np.int64)}
    logged_nan: dict[str, np.ndarray] = {}
    for s, key in zip(series, keys):
        key, value = _last_at_each_key(s, key, source)
        frame[s.name], nan_rows = _scatter(value, np.searchsorted(row_keys, key), len(row_keys))
        if len(nan_rows):
            logged_nan[s.name] = np.sort(nan_rows)
    names = canonical_order([k for k in frame if k not in ("segment", "step")])
    df = pd.DataFrame({k: frame[k] for k in ["segment", "step", *names]}, copy=False)
    return RunLog(frame=df, source=source, manifest=manifest, logged_nan=logged_nan)


def _known_starts(series: list[Series], source: Source, resumes: Sequence[int]) -> list[int]:
    """The orders where a segment starts though the steps may go on: a resumed run's new
    folder, a resume message, a relaunch the LR, a launch column or the clock shows."""
    if len(resumes):
        _reason(source, "a resumed run's new folder")
    if len(source.resumes):
        said = source.extras.get("segment_how", {})        # a reader that named its own reason
        messages = [o for o in source.resumes if int(o) not in said]
        if messages:
            _reason(source, "a resume message", messages, "a resume message")
    return [*resumes, *source.resumes, *relaunches(series, source)]


def _segments(series: list[Series], all_step: np.ndarray, starts: list[int],
              source: Source) -> tuple[np.ndarray, np.ndarray]:
    """The distinct orders (the step sequence in file order, rows shared by several metrics
    counted once) and the segment of each: a new one where the steps go back, at a known
    start, and at a step logged again with other values; said in the source."""
    all_order = np.concatenate([s.order for s in series])
    uorder, first = np.unique(all_order, return_index=True)
    ustep = all_step[first]
    back = np.flatnonzero(np.diff(ustep) < 0) + 1
    seg_of_order = np.zeros(len(uorder), dtype=np.int64)
    seg_of_order[back] = 1
    known = np.searchsorted(uorder, np.asarray(starts, dtype=np.int64))
    seg_of_order[known[(known > 0) & (known < len(uorder))]] = 1
    seg_of_order[_repeats(series, uorder, source)] = 1
    np.cumsum(seg_of_order, out=seg_of_order)
    if len(back):
        shown = ", ".join(f"{ustep[b - 1]}->{ustep[b]}" for b in back[:5])
        more = f" and {len(back) - 5} more" if len(back) > 5 else ""
        source.warn(f"steps go backwards {len(back)} time(s) ({shown}{more}): "
                    f"read as {len(back) + 1} segments (resumes)")
        _reason(source, "the steps going back")
    _say_segment_starts(uorder, seg_of_order, source)
    return uorder, seg_of_order


def _say_segment_starts(uorder: np.ndarray, seg_of_order: np.ndarray, source: Source) -> None:
    """How each segment after the first starts, where the reader knows it (the checks say it)."""
    how_at = source.extras.pop("segment_how", {})
    if not seg_of_order[-1]:
        return
    starts = np.flatnonzero(np.diff(seg_of_order)) + 1
    source.extras["segment_starts"] = {
        int(seg_of_order[i]): how_at[int(uorder[i])] for i in starts if int(uorder[i]) in how_at}
    why = source.extras.get("segment_reasons", [])
    source.extras["segments_from"] = f"{int(seg_of_order[-1]) + 1} segments, from " + ", ".join(why)


def _last_at_each_key(s: Series, key: np.ndarray, source: Source) -> tuple[np.ndarray, np.ndarray]:
    """One value per (segment, step): the last one logged there, but a logged NaN among them
    kept as the value (a NaN is evidence: never merged away by a later number)."""
    rev_unique, rev_idx = np.unique(key[::-1], return_index=True)
    if len(rev_unique) == len(key):
        return key, s.value
    idx = len(key) - 1 - rev_idx
    kept = np.searchsorted(rev_unique, key)
    differs = ~_same(s.value, s.value[idx][kept])
    if differs.any():
        source.warn(f"{s.name}: {int(differs.sum())} value(s) logged again at the same "
                    f"step of a segment with another value; kept the later one (a NaN "
                    f"among them kept as the step's value)")
    value = s.value[idx]
    if value.dtype != object:
        nan_at = np.zeros(len(rev_unique), dtype=bool)
        np.logical_or.at(nan_at, kept, np.isnan(s.value.astype(np.float64, copy=False)))
        if nan_at.any():
            value = np.where(nan_at, np.nan, value.astype(np.float64, copy=False))
    return key[idx], value


def _scatter(value: np.ndarray, rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A column of `n` rows with `value` at `rows` (missing elsewhere), and the rows where it
    holds a logged NaN."""
    if value.dtype == object:
        col = np.full(n, None, dtype=object)
        col[rows] = value
        return col, np.empty(0, dtype=np.int64)
    value = value.astype(np.float64, copy=False)
    col = np.full(n, np.nan)
    col[rows] = value
    return col, rows[np.isnan(value)]


def build_runlog_wide(steps: np.ndarray, columns: dict[str, np.ndarray], source: Source,
                      manifest: RunManifest | None = None,
                      logged_nan: dict[str, np.ndarray] | None = None) -> RunLog:
    """A wide table in file order (NaN = missing unless flagged in `logged_nan`).

    Fast path: steps strictly increasing and every name already distinct after
    aliasing means the table is the frame; anything else takes the general route.
    """
    steps = np.asarray(steps)
    if steps.dtype.kind == "f":
        if np.isnan(steps).any():
            raise RunReadError(source.path, "the step column has missing values")
        if (steps != np.floor(steps)).any():
            raise RunReadError(source.path, "the step column has non-integer values")
    steps = steps.astype(np.int64, copy=False)
    canon = {name: canonical_name(name) for name in columns}
    canon.pop("step", None)
    distinct = len(set(canon.values())) == len(canon) and not {"segment", "step"} & set(canon.values())
    if (len(steps) and distinct and steps.min() >= 0
            and (len(steps) < 2 or bool((steps[1:] > steps[:-1]).all()))
            and not source.resumes and not _relaunched_wide(steps, columns, canon, source)):
        frame = {"segment": np.zeros(len(steps), dtype=np.int64), "step": steps}
        nan_rows: dict[str, np.ndarray] = {}
        for name, target in canon.items():
            values = columns[name]
            if values.dtype != object:
                values = values.astype(np.float64, copy=False)
                if logged_nan and name in logged_nan and logged_nan[name].any():
                    nan_rows[target] = np.flatnonzero(logged_nan[name])
            frame[target] = values
        _note_names(source, {t: [n] for n, t in canon.items()})
        present = [t for t in canon.values()
                   if frame[t].dtype == object and pd.notna(frame[t]).any()
                   or frame[t].dtype != object and (not np.isnan(frame[t]).all() or t in nan_rows)]
        names = canonical_order(present)
        if names:
            df = pd.DataFrame({k: frame[k] for k in ["segment", "step", *names]}, copy=False)
            return RunLog(frame=df, source=source, manifest=manifest, logged_nan=nan_rows)
    columns = {k: v for k, v in columns.items() if k != "step"}
    return build_runlog(series_from_wide(steps, columns, logged_nan), source, manifest)


def _relaunched_wide(steps: np.ndarray, columns: dict[str, np.ndarray], canon: dict[str, str],
                     source: Source) -> bool:
    """A table whose steps go on but whose LR, launch column or clock says it was relaunched."""
    order = np.arange(len(steps), dtype=np.int64)
    probe = []
    for name, target in canon.items():
        if target in ("lr", "wall_time") or target.lower() in LAUNCH_COLUMNS:
            v = columns[name]
            keep = pd.notna(v) if v.dtype == object else ~np.isnan(v)
            probe.append(Series(name, order[keep], steps[keep], v[keep]))
    if not probe:
        return False
    quiet = Source(format=source.format, path=source.path)
    return bool(relaunches(probe, quiet))


# Canonical numeric columns: a non-number there is an error, never a silent drop.
STRICT = {"loss", "val_loss", "grad_norm", "lr", "loss_scale"}
_NAN_WORDS = {"nan", "-nan", "+nan", "nan%"}
_INF_WORDS = {"inf": np.inf, "+inf": np.inf, "infinity": np.inf, "+infinity": np.inf,
              "-inf": -np.inf, "-infinity": -np.inf}


def to_number(value) -> float | None:
    """A logged value as float (NaN and Inf spellings included), or None if not a number."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _NAN_WORDS:
            return float("nan")
        if word in _INF_WORDS:
            return float(_INF_WORDS[word])
        special = nonfinite(value)           # `-nan(ind)`, `1.#QNAN`, `+Inf`: C, MSVC, Go
        if special is not None:
            return special
        try:
            return float(word.replace(",", "")) if word else None
        except ValueError:
            return None
    return None


class Collector:
    """Points appended record by record into compact typed arrays.

    Each `add` is one record (a log line, a JSON row) at one position in the
    file; a NaN value is a logged NaN, an absent key is simply not a point. A
    record's step is kept once; each metric keeps the record's number (4 bytes)
    and its value (8 bytes).
    """

    def __init__(self, source: Source, where: str = "step"):
        self.source, self.where = source, where
        self.steps = array("q")
        self.cols: dict[str, tuple[array, array]] = {}
        self.hashes: dict[str, tuple[list, list]] = {}
        self.dropped: dict[str, str] = {}

    @property
    def count(self) -> int:
        return len(self.steps)

    def add(self, step: int, values: dict) -> None:
        record = len(self.steps)
        self.steps.append(step)
        cols = self.cols
        for name, raw in values.items():
            num: float | None
            if raw is None:
                continue
            if type(raw) is float:
                num = raw
            else:
                try:
                    num = float(raw)
                except (TypeError, ValueError):
                    num = to_number(raw)
                    if num is None:
                        self._not_a_number(name, raw, step, record)
                        continue
            col = cols.get(name)
            if col is None:
                col = cols[name] = (array("i"), array("d"))
            col[0].append(record)
            col[1].append(num)

    def _not_a_number(self, name: str, raw, step: int, record: int) -> None:
        if name == "batch_hash":
            r, v = self.hashes.setdefault(name, ([], []))
            r.append(record)
            v.append(str(raw))
        elif canonical_name(name) in STRICT:
            raise RunReadError(self.source.path, f"{self.where} {step}: {name} is {raw!r}, not a number")
        else:
            self.dropped.setdefault(name, repr(raw)[:40])

    def drop(self, name: str) -> None:
        self.cols.pop(name, None)

    def series(self) -> list[Series]:
        for name, example in self.dropped.items():
            self.source.warn(f"{name}: not numeric (e.g. {example}); kept out of the table")
        steps = np.frombuffer(self.steps, dtype=np.int64)
        if len(steps) and 0 <= steps.min() and steps.max() < (1 << 31):
            steps = steps.astype(np.int32)
        out = []
        for name, (records, values) in self.cols.items():
            if name in self.dropped:
                continue
            idx = np.frombuffer(records, dtype=np.int32)
            out.append(Series(name, idx, steps[idx], np.frombuffer(values, dtype=np.float64)))
        for name, (rows, texts) in self.hashes.items():
            idx = np.array(rows, dtype=np.int64)
            out.append(Series(name, idx, steps[idx], np.array(texts, dtype=object)))
        return out


def series_from_records(records, source: Source, where: str = "step") -> list[Series]:
    """(step, {name: value}) records in file order -> series."""
    collector = Collector(source, where)
    for step, values in records:
        collector.add(step, values)
    return collector.series()
