"""The shape of `postmortem analyze --json` (DESIGN.md), as pydantic models."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

PANELS = ("loss", "lr", "grad-norm", "loss-scale", "activations", "per-token-loss", "batch",
          "optimizer-moments", "weight-norm")
PATTERNS = ("long-tail-token", "fp16-overflow", "lr-discontinuity", "optimizer-reset", "numerics",
            "bad-data", "lr-too-high", "schedule-misconfigured", "weight-decay", "bad-init")


class RunSummary(BaseModel):
    id: str
    format: str
    steps: int
    metrics: list[str]
    dtype: str | None


class Check(BaseModel):
    id: str
    question: str
    status: Literal["pass", "fail", "skipped"]
    detail: str


class Observation(BaseModel):
    panel: str
    observation: str


class Hypothesis(BaseModel):
    pattern: str
    rank: int
    score: float
    supported_by: list[Observation] = []
    contradicted_by: list[Observation] = []


class Symptoms(BaseModel):
    spike_step: int | None = None
    pre_spike_loss_ema50: float | None = None
    peak_loss: float | None = None
    peak_step: int | None = None
    recovery_loss: float | Literal["did not recover"] | None = None
    grad_norm_pre_clip: float | None = None
    lr: float | None = None
    dtype: str | None = None
    batch_index: int | None = None
    unusual_tokens: str | None = None


class Incident(BaseModel):
    kind: Literal["nan", "spike", "divergence"]
    step: int
    symptoms: Symptoms
    hypotheses: list[Hypothesis] = []


class Analysis(BaseModel):
    run: RunSummary
    checks: list[Check]
    incidents: list[Incident]
