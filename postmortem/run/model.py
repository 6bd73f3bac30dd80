"""The canonical run: RunLog (frame + manifest + source) and RunManifest."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from postmortem.run.identity import run_id

# Canonical columns, in display order. Any other metric keeps its own name.
CANONICAL = [
    "step", "loss", "grad_norm", "lr", "loss_scale", "skipped", "val_loss",
    "batch_index", "batch_hash", "wall_time",
]


class RunConfig(BaseModel):
    """Training configuration facts the checks use; all optional."""

    model_config = ConfigDict(extra="allow")
    lr_max: float | None = None
    warmup_steps: int | None = None
    schedule: str | None = None
    total_steps: int | None = None
    batch_size: int | None = None
    clip: float | None = None
    weight_decay: float | None = None


class ReplaySpec(BaseModel):
    """Where the replay finds the user's code and checkpoints."""

    model_config = ConfigDict(extra="allow")
    entrypoint: str
    checkpoints: str = "checkpoints/"


class RunManifest(BaseModel):
    """`manifest.json` beside the metrics: facts a log alone does not carry."""

    model_config = ConfigDict(extra="allow")
    run_id: str | None = None
    seed: int | None = None
    versions: dict[str, str] = {}
    dtype: str | None = None
    vocab_size: int | None = None
    config: RunConfig = RunConfig()
    replay: ReplaySpec | None = None


@dataclass
class Source:
    """What was read and what the reader noticed on the way."""

    format: str
    path: str
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Facts about the log that are not per-step metrics (HF summary row, eval-only
    # rows without a step, the args a text log printed).
    extras: dict[str, Any] = field(default_factory=dict)
    # Positions (line, row or record numbers, as Series.order) where a resume message says a
    # new launch starts, though the steps may go on (`assemble.build_runlog` splits there).
    resumes: list[int] = field(default_factory=list)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)


@dataclass
class RunLog:
    """One row per (segment, step); NaN in `frame` is either missing or a logged NaN.

    `logged_nan[metric]` holds the row positions where the log really said NaN,
    so a metric that was simply not logged at a step is never mistaken for one.
    """

    frame: pd.DataFrame
    source: Source
    manifest: RunManifest | None = None
    logged_nan: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        """What names the run, safe as a file name (see run/identity.py)."""
        return run_id(self.manifest.run_id if self.manifest else None, self.source.extras, self.source.path)

    @property
    def metrics(self) -> list[str]:
        return [c for c in self.frame.columns if c not in ("segment", "step")]

    @property
    def dtype(self) -> str | None:
        if self.manifest and self.manifest.dtype:
            return self.manifest.dtype
        return self.source.extras.get("dtype")

    def nan_mask(self, metric: str) -> np.ndarray:
        """Boolean mask of rows where `metric` was logged as NaN."""
        mask = np.zeros(len(self.frame), dtype=bool)
        mask[self.logged_nan.get(metric, np.empty(0, dtype=np.int64))] = True
        return mask

    def logged_mask(self, metric: str) -> np.ndarray:
        """Rows where `metric` was logged at all (a value, NaN or Inf)."""
        col = self.frame[metric]
        present = col.notna().to_numpy()
        return present | self.nan_mask(metric)

    def segments(self) -> list[dict[str, int]]:
        """Each segment's first and last step and row count, in order."""
        seg = self.frame["segment"].to_numpy()
        step = self.frame["step"].to_numpy()
        out: list[dict[str, int]] = []
        if len(seg) == 0:
            return out
        bounds = np.flatnonzero(np.diff(seg)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [len(seg)]])
        for s, e in zip(starts, ends):
            out.append({"segment": int(seg[s]), "first_step": int(step[s]),
                        "last_step": int(step[e - 1]), "rows": int(e - s)})
        return out
