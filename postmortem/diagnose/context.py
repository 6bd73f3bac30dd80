"""What the checks and the patterns share: the run, its thresholds and tree B's events."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from postmortem.diagnose.detectors.cascades import ScaleDrop, ScalerEvents, scaler_events
from postmortem.diagnose.detectors.divergence import divergence
from postmortem.diagnose.detectors.event import Event, overlaps
from postmortem.diagnose.detectors.grad_norm_spikes import grad_norm_spikes
from postmortem.diagnose.detectors.loss_spikes import Unjudged, loss_spikes
from postmortem.diagnose.detectors.resumes import Resume, resumes
from postmortem.diagnose.detectors.short_rise import short_rises
from postmortem.diagnose.logfacts import dtype_in_text, model_size, texts, vocab_in_text
from postmortem.diagnose.models import Check
from postmortem.diagnose.nan import nan_rows, overflow_rows, scaler_idle, skip_counts
from postmortem.diagnose.scaler import Regime, persistent, regime
from postmortem.diagnose.series import between, effective_history, interval, segment_rows
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import RunLog
from postmortem.run.model import RunConfig

# a column's (steps, values), read-only
Logged = tuple[np.ndarray, np.ndarray]


class OtherRun(NamedTuple):
    """Another run over the same data in the same order, as an incident is matched against
    it: its loss and grad-norm spikes and the first and last step it logged."""

    run_id: str
    spikes: list[Event]
    first_step: int
    last_step: int


@dataclass
class Context:
    log: RunLog
    th: Thresholds = field(default_factory=Thresholds)
    # other runs over the same data in the same order
    others: list[OtherRun] = field(default_factory=list)
    # tree A's and tree B's outcomes, once walked (trees.walk): several patterns weigh them
    checks: list[Check] = field(default_factory=list)
    # what several checks ask of the same run, kept once asked
    _has: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)
    _series: dict[tuple[str, int | None], Logged] = field(default_factory=dict, init=False, repr=False, compare=False)
    _finite: dict[tuple[str, int | None], Logged] = field(default_factory=dict, init=False, repr=False, compare=False)
    _rows: dict[int, slice | np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False)
    _histories: dict[int, pd.DataFrame] = field(default_factory=dict, init=False, repr=False, compare=False)
    _around: dict[int, float] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def frame(self) -> pd.DataFrame:
        return self.log.frame

    @property
    def config(self) -> RunConfig | None:
        return self.log.manifest.config if self.log.manifest else None

    def has(self, name: str) -> bool:
        """A column with at least one value (asked by many checks: cached)."""
        cache = self._has
        if name not in cache:
            cache[name] = bool(name in self.frame and self.frame[name].notna().any())
        return cache[name]

    def series(self, name: str, segment: int | None = None) -> Logged:
        """(steps, values) of the rows where `name` has a value, in one segment or all;
        cached (several checks ask), read-only as pandas gives them."""
        cache = self._series
        if (name, segment) not in cache:
            steps, values = self._logged(name, segment)
            steps.flags.writeable = values.flags.writeable = False
            cache[name, segment] = steps, values
        return cache[name, segment]

    def _logged(self, name: str, segment: int | None) -> Logged:
        col = self.frame[name]
        if not isinstance(col.dtype, np.dtype) or col.dtype.kind not in "fiub":
            # an object or extension column: filtered as pandas filters it
            f = self.frame if segment is None else self.frame[self.frame.segment == segment]
            rows = f[f[name].notna()]
            return rows.step.to_numpy(), rows[name].to_numpy()
        rows = slice(None) if segment is None else self.rows(segment)
        values, steps = col.to_numpy()[rows], self.frame.step.to_numpy()[rows]
        keep = ~np.isnan(values) if values.dtype.kind == "f" else None
        if keep is None or keep.all():     # read-only views, as pandas' to_numpy gives them
            return steps, values
        return steps[keep], values[keep]

    def finite(self, name: str, segment: int | None = None) -> Logged:
        """`series` without its non-finite values, cached (several checks ask): read-only."""
        cache = self._finite
        if (name, segment) not in cache:
            steps, values = self.series(name, segment)
            keep = np.isfinite(values)
            if not keep.all():
                steps, values = steps[keep], values[keep]
                steps.flags.writeable = values.flags.writeable = False
            cache[name, segment] = steps, values
        return cache[name, segment]

    def rows(self, segment: int) -> slice | np.ndarray:
        """The rows of one segment (see series.segment_rows), cached."""
        cache = self._rows
        if segment not in cache:
            cache[segment] = segment_rows(self.frame.segment.to_numpy(), segment)
        return cache[segment]

    def history(self, segment: int) -> pd.DataFrame:
        """The effective history of a segment (see series.effective_history), cached."""
        cache = self._histories
        if segment not in cache:
            cache[segment] = effective_history(self.log, segment) if segment else \
                self.frame.iloc[:int(np.searchsorted(self.frame.segment.to_numpy(), 1))]
        return cache[segment]

    def around(self, segment: int) -> float:
        """How far "around an incident" reaches in a segment, in steps: `near_steps`, or
        `near_lines` logging intervals where the log is sparser (its neighbours are a line
        away), cached."""
        return max(float(self.th.near_steps), self.th.near_lines * self.every(segment))

    def every(self, segment: int) -> float:
        """The segment's logging interval in steps (0 with one point), cached."""
        cache = self._around
        if segment not in cache:
            steps = self.history(segment).step.to_numpy()
            cache[segment] = interval(steps) if len(steps) > 1 else 0.0
        return cache[segment]

    def recovery_reach(self, segment: int) -> float:
        """How far after a peak the loss may come back, in steps: `recovery_window`, or
        `recovery_points` logging intervals where the log is sparser."""
        return max(float(self.th.recovery_window), self.th.recovery_points * self.every(segment))

    def recovered(self, event: Event) -> bool:
        """Back within mean + `recovery_sigma` std of the pre-spike window inside
        `recovery_window` steps of the peak (or `recovery_points` logged points, where the
        log is sparser)."""
        h = self.history(event.segment)
        after = between(h, event.peak_step + 1, event.peak_step + self.recovery_reach(event.segment)).loss
        return bool((after <= self.band(event)).any())

    def band(self, event: Event) -> float:
        """The top of the band the loss is back in: the window's mean + `recovery_sigma` std;
        a spike judged on too few points (notes.sparse) is back under the bar it was
        flagged at (`sparse_rise` over the level before it), as a std of a few points means
        little."""
        if event.notes.sparse:
            return event.window_mean + abs(event.window_mean) * self.th.sparse_rise
        std = event.window_std if np.isfinite(event.window_std) else abs(event.window_mean) * self.th.spike_min_rise
        return event.window_mean + self.th.recovery_sigma * std

    def open_ended(self, event: Event) -> bool:
        """The log ends at the spike's peak: no finite loss after it, so nothing says whether
        it came back (a spike) or stayed up (a divergence)."""
        loss = between(self.history(event.segment), event.peak_step + 1, np.inf).loss
        return not np.isfinite(loss.to_numpy(dtype=float, na_value=np.nan)).any()

    def kept_rising(self, event: Event) -> bool:
        """An open-ended spike whose last two points both stand above its band, the last the
        higher: a climb still going when the log ends (a divergence, not a spike to wait on)."""
        if not self.open_ended(event):
            return False
        loss = between(self.history(event.segment), -np.inf, event.peak_step).loss.to_numpy(
            dtype=float, na_value=np.nan)
        last = loss[np.isfinite(loss)][-2:]
        return len(last) == 2 and bool((last > self.band(event)).all()) and last[1] >= last[0]

    def recovery_unknown(self, event: Event) -> bool:
        """A loss spike at the log's last point(s) that is not (yet) a climb: cannot tell."""
        return event.kind == "spike" and event.metric == "loss" and self.open_ended(event) \
            and not self.kept_rising(event)

    @cached_property
    def _spikes_found(self) -> list[Event]:
        return loss_spikes(self.log, self.th, self.history, self.unjudged_rises)

    def seconded(self, event: Event) -> bool:
        """Another series moved with the loss: the loss scale fell, or the grad norm spiked,
        within `around` steps before the event or during it."""
        lo, hi = event.step - self.around(event.segment), event.last
        if self.has("loss_scale"):
            steps, scale = self.finite("loss_scale", event.segment)
            fell = steps[1:][np.diff(scale) < 0]
            if ((fell >= lo) & (fell <= hi)).any():
                return True
        return any(g.segment == event.segment and g.step <= hi and g.last >= lo for g in self.grad_spikes)

    def _unfinished(self, event: Event) -> bool:
        return event.notes.sparse and self.recovery_unknown(event) and not self.seconded(event)

    @cached_property
    def loss_spikes(self) -> list[Event]:
        """The loss spikes judged (less the `unfinished_rises`)."""
        return [e for e in self._spikes_found if not self._unfinished(e)]

    @cached_property
    def unfinished_rises(self) -> list[Event]:
        """Sparse loss rises at the log's last point that are not a climb and that no other
        series moved with: on a few points and nothing after them, nothing tells them from
        noise (B2 says it cannot tell yet)."""
        return [e for e in self._spikes_found if self._unfinished(e)]

    @cached_property
    def unjudged_rises(self) -> Unjudged:
        """(step, points before it, segment) of loss rises too early in a log to judge."""
        return []

    @cached_property
    def grad_spikes(self) -> list[Event]:
        return grad_norm_spikes(self.log, self.th, self.history)

    @cached_property
    def scaler(self) -> ScalerEvents:
        """What the loss scaler did (cascades, probes, drops); a persistent overflow (scaler.persistent) is a cascade
        of its own, or marks the cascade it is part of."""
        cascades, probes, drops = scaler_events(self.log, self.th, self.skips)
        for p in persistent(self.log, self.th, self.skips):
            host = next((c for c in cascades if overlaps(c, p, self.th.cascade_gap)), None)
            if host is None:
                cascades.append(p)
                continue
            host.notes.persistent, host.notes.at_start = p.notes.persistent, p.notes.at_start
            host.notes.floor, host.notes.persistent_step = p.notes.scale_to, p.step
            host.step, host.peak_step = min(host.step, p.step), max(host.peak_step, p.peak_step)
        cascades.sort(key=lambda c: (c.segment, c.step))
        return ScalerEvents(self._within_collapse(cascades), probes, drops)

    def _within_collapse(self, cascades: list[Event]) -> list[Event]:
        """Cascades while the scale stays below 1 after a persistent overflow are that same
        overflow going on (counted on it), not incidents of their own."""
        out: list[Event] = []
        for c in cascades:
            host = next((p for p in out if p.notes.persistent == "below-1" and p.segment == c.segment
                         and p.step < c.step and self.scale_before(c) < 1.0), None)
            if host is None:
                out.append(c)
                continue
            host.notes.later_cascades += 1
            host.notes.skipped = (host.notes.skipped or 0) + (c.notes.skipped or 0) or None
        return out

    def scale_before(self, c: Event) -> float:
        """The last logged loss scale at or before a cascade's first step (inf where none)."""
        steps, sc = self.finite("loss_scale", c.segment) if self.has("loss_scale") else ((), ())
        k = int(np.searchsorted(steps, c.step, side="right")) - 1 if len(steps) else -1
        return float(sc[k]) if k >= 0 else float("inf")

    @cached_property
    def skips(self) -> np.ndarray:
        """The loss scaler's skipped steps per row (counted, or an overflowing grad norm)."""
        return np.maximum(skip_counts(self.log), self.overflows)   # (one skip, counted or seen as inf)

    @cached_property
    def scale_regime(self) -> Regime:
        """Static or dynamic loss scaling (scaler.regime)."""
        return regime(self.log, self.skips)

    @cached_property
    def scaler_idle(self) -> bool:
        """The log says no loss scaler is at work (nan.scaler_idle)."""
        return scaler_idle(self.log)

    @property
    def cascades(self) -> list[Event]:
        return self.scaler.cascades

    @property
    def probes(self) -> list[int]:
        """Steps of the loss scaler's routine probes (an isolated overflow)."""
        return self.scaler.probes

    @property
    def scale_drops(self) -> list[ScaleDrop]:
        """Falls of the loss scale across a hole in the log: no cascade, it may have taken
        the whole hole."""
        return self.scaler.drops

    @cached_property
    def overflows(self) -> np.ndarray:
        return overflow_rows(self.log)

    @cached_property
    def divergences(self) -> list[Event]:
        return divergence(self.log, self.th) + short_rises(self.log, self.th)

    @cached_property
    def resumes(self) -> list[Resume]:
        return resumes(self.log, self.th)

    @cached_property
    def nonfinite(self) -> np.ndarray:
        """Non-finite rows that are not a loss scaler's skipped step."""
        return nan_rows(self.log) & ~self.overflows

    def as_other(self) -> OtherRun:
        """What another run's incidents are matched against: this run's loss and grad-norm
        spikes and the steps it covers."""
        steps = self.frame.step
        return OtherRun(self.log.run_id, self.loss_spikes + self.grad_spikes,
                        int(steps.min()) if len(steps) else 0, int(steps.max()) if len(steps) else -1)

    @property
    def ln_v(self) -> float | None:
        v = self.facts.vocab_size
        return math.log(v) if v else None

    @cached_property
    def facts(self) -> "Facts":
        return facts_of(self.log)

    def scheduled_lr(self, step: int) -> float | None:
        return scheduled_lr(self.facts, step)

    @cached_property
    def warmup_end(self) -> int:
        """The step warmup ends: the configured one, else where the logged LR first reaches
        95% of its peak after starting below half of it; the first step when neither says."""
        first = int(self.frame.step.iloc[0]) if len(self.frame) else 0
        if self.facts.warmup_steps:
            return int(self.facts.warmup_steps)
        if self.has("lr"):
            steps, lr = self.finite("lr", 0)
            if len(lr) >= 3 and lr.max() > 0 and lr[0] < 0.5 * lr.max():
                return int(steps[np.argmax(lr >= 0.95 * lr.max())])
        return first


@dataclass(frozen=True)
class Facts:
    """The run's configured facts, wherever they were found (manifest.json, or the config
    a reader found in the log itself); every one may be None."""

    lr_max: float | None = None
    min_lr: float | None = None
    warmup_steps: int | None = None
    schedule: str | None = None          # cosine | linear | constant | step | ...
    total_steps: int | None = None
    vocab_size: int | None = None
    dtype: str | None = None
    clip: float | None = None
    from_trained: bool | None = None     # a fine-tune: starts from a trained model
    n_params: float | None = None        # the model's size, where known
    # where a fact was read when not from a config: {"dtype": "train.log: its lines say bf16"}
    read_from: dict[str, str] = field(default_factory=dict)


_FINETUNE = ("lora", "qlora", "peft", "sft", "finetune", "fine-tune", "fine_tune", "dpo", "grpo", "ppo")


def _get(obj: Any, *names: str) -> Any:
    for name in names:
        v = getattr(obj, name, None)
        if v is None and isinstance(getattr(obj, "model_extra", None), dict):
            v = obj.model_extra.get(name)
        if v is not None:
            return v
    return None


def facts_of(log: RunLog) -> Facts:
    """The one place the checks read facts from: the manifest's config and top-level fields
    (which readers fill from the log's own config), then what the log's text states."""
    facts = _configured(log)
    heads = texts(log)            # each text file's head read once for all three facts
    found: dict[str, tuple[Any, str]] = {}       # fact: (value, where it was read)
    if facts.dtype is None and (dtype := dtype_in_text(heads)):
        found["dtype"] = dtype
    if facts.vocab_size is None and (vocab := vocab_in_text(heads)):
        found["vocab_size"] = vocab
    if (size := model_size(log, heads)):
        found["n_params"] = size
    return replace(facts, **{k: v for k, (v, _) in found.items()},
                   read_from={k: where for k, (_, where) in found.items()})


def _configured(log: RunLog) -> Facts:
    m = log.manifest
    if m is None:
        return Facts(dtype=log.dtype)
    c = m.config
    schedule = _get(c, "schedule", "lr_scheduler_type", "lr_schedule", "scheduler")
    init = _get(c, "init_from", "resume_from", "pretrained", "base_model", "model_name_or_path") \
        or _get(m, "init_from", "base_model", "model_name_or_path")
    tune = _get(c, "finetune", "fine_tune", "from_trained", "peft") or _get(m, "from_trained", "finetune")
    task = str(_get(c, "task", "method", "trainer") or _get(m, "task", "method") or "").lower()
    from_trained = bool(tune) or (isinstance(init, str) and init not in ("", "scratch", "none")) \
        or any(w in task for w in _FINETUNE) or None
    num = lambda v: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None  # noqa: E731
    integer = lambda v: int(v) if num(v) is not None else None  # noqa: E731
    return Facts(
        lr_max=num(_get(c, "lr_max", "learning_rate", "lr", "max_lr")),
        min_lr=num(_get(c, "min_lr", "lr_min")),
        warmup_steps=integer(_get(c, "warmup_steps", "warmup_iters", "lr_warmup_steps")),
        schedule=str(schedule).lower() if schedule else None,
        total_steps=integer(_get(c, "total_steps", "max_steps", "max_iters", "train_iters")),
        vocab_size=integer(_get(m, "vocab_size") or _get(c, "vocab_size")),
        dtype=log.dtype, clip=num(_get(c, "clip", "max_grad_norm", "grad_clip")),
        from_trained=from_trained)


DECAYS = ("cosine", "linear", "step", "exponential", "inverse_sqrt", "polynomial", "wsd", "cosine_with_restarts")


def scheduled_lr(c: Facts | RunConfig | None, step: int) -> float | None:
    """The LR a config promises at `step` (warmup, then cosine or linear decay), if it says
    enough."""
    if not c or not c.lr_max or c.schedule not in ("cosine", "linear", None) or not c.total_steps:
        return None
    warm = c.warmup_steps or 0
    if step < warm:
        return c.lr_max * (step + 1) / warm
    min_lr = getattr(c, "min_lr", None) or 0.0
    progress = min(1.0, (step - warm) / max(1, c.total_steps - warm))
    if c.schedule == "linear":
        return c.lr_max - (c.lr_max - min_lr) * progress
    return min_lr + (c.lr_max - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
