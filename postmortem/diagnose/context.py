"""What the checks and the patterns share: the run, its thresholds and tree B's events."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from postmortem.diagnose import detect
from postmortem.diagnose.nan import nan_rows
from postmortem.diagnose.series import effective_history
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import RunLog


@dataclass
class Context:
    log: RunLog
    th: Thresholds = field(default_factory=Thresholds)
    # other runs over the same data in the same order: (run id, their loss and grad-norm
    # spikes, the first and last step they logged)
    others: list = field(default_factory=list)

    @property
    def frame(self):
        return self.log.frame

    @property
    def config(self):
        return self.log.manifest.config if self.log.manifest else None

    def has(self, name: str) -> bool:
        return name in self.frame and self.frame[name].notna().any()

    def series(self, name: str, segment: int | None = None):
        f = self.frame if segment is None else self.frame[self.frame.segment == segment]
        rows = f[f[name].notna()]
        return rows.step.to_numpy(), rows[name].to_numpy()

    def history(self, segment: int):
        """The effective history of a segment (see series.effective_history), cached."""
        cache = self.__dict__.setdefault("_histories", {})
        if segment not in cache:
            cache[segment] = effective_history(self.log, segment) if segment else \
                self.frame.iloc[:int(np.searchsorted(self.frame.segment.to_numpy(), 1))]
        return cache[segment]

    @cached_property
    def loss_spikes(self):
        return detect.loss_spikes(self.log, self.th, self.history)

    @cached_property
    def grad_spikes(self):
        return detect.grad_norm_spikes(self.log, self.th, self.history)

    @cached_property
    def cascades(self):
        return detect.loss_scale_cascades(self.log, self.th)

    @cached_property
    def divergences(self):
        return detect.divergence(self.log, self.th)

    @cached_property
    def resumes(self):
        return detect.resumes(self.log, self.th)

    @cached_property
    def nonfinite(self) -> np.ndarray:
        return nan_rows(self.log)

    def as_other(self) -> tuple:
        """What another run's incidents are matched against: this run's loss and grad-norm
        spikes and the steps it covers."""
        steps = self.frame.step
        return (self.log.run_id, self.loss_spikes + self.grad_spikes,
                int(steps.min()) if len(steps) else 0, int(steps.max()) if len(steps) else -1)

    @property
    def ln_v(self) -> float | None:
        m = self.log.manifest
        return math.log(m.vocab_size) if m and m.vocab_size else None

    def scheduled_lr(self, step: int) -> float | None:
        return scheduled_lr(self.config, step)


def scheduled_lr(c, step: int) -> float | None:
    """The LR a manifest's config promises at `step` (warmup + cosine), if it says enough."""
    if not c or not c.lr_max or c.schedule not in ("cosine", None) or not c.total_steps:
        return None
    warm = c.warmup_steps or 0
    if step < warm:
        return c.lr_max * (step + 1) / warm
    min_lr = getattr(c, "min_lr", None) or 0.0
    progress = min(1.0, (step - warm) / max(1, c.total_steps - warm))
    return min_lr + (c.lr_max - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
