"""The shape of `postmortem analyze --json` (DESIGN.md), as pydantic models, and the
Evidence row that the replay finds and the post-mortem's section 3 holds (here, below both).

Beyond DESIGN.md: checks carry their threshold and the leaf a failure leads to;
incidents carry the metric they were seen on, a confidence and the other tree-B
events around them; hypotheses carry the experiment that would discriminate them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer


class RunSummary(BaseModel):
    id: str
    format: str
    steps: int
    metrics: list[str]
    dtype: str | None
    # what the reader noticed on the way (a cut last line dropped, no column that looks like
    # the loss, a resume): the analysis judged what was read, and these say what that was
    warnings: list[str] = []
    # where the diagnosis read a fact no config gave: {"dtype": "train.log: its lines say bf16"}
    facts_from: dict[str, str] = {}


Status = Literal["pass", "fail", "skipped"]
IncidentKind = Literal["nan", "spike", "divergence", "bad-start"]
Confidence = Literal["high", "low"]


class Check(BaseModel):
    id: str
    question: str
    status: Status
    detail: str
    threshold: str | None = None
    leaf: str | None = None          # the pattern a failure points to


class Observation(BaseModel):
    panel: str
    observation: str


class Evidence(BaseModel):
    """One row of discriminating evidence: the panel, what it shows, the patterns it favors
    and those it rules out. The replay's rows, its JSON messages and the post-mortem's
    section 3 are these rows."""

    panel: str
    observation: str
    favors: list[str] = []
    rules_out: list[str] = []

    def __init__(self, panel: str, observation: str, **rest):
        # the replay engine writes rows as Evidence(panel, observation, favors=...)
        super().__init__(panel=panel, observation=observation, **rest)


class Hypothesis(BaseModel):
    pattern: str
    rank: int
    score: float
    supported_by: list[Observation] = []
    contradicted_by: list[Observation] = []
    discriminate: str = ""


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


class RelatedEvent(BaseModel):
    """Another of tree B's events merged into an incident, as numbers: what one line of
    `Incident.related` says in words ("grad_norm spike at step 330")."""

    kind: str                        # spike | nan | divergence | cascade
    metric: str                      # the series it was seen on: loss, grad_norm, loss_scale
    step: int


class Incident(BaseModel):
    kind: IncidentKind
    step: int
    symptoms: Symptoms
    hypotheses: list[Hypothesis] = []
    metric: str = "loss"
    segment: int = 0
    confidence: Confidence = "high"
    related: list[str] = []
    related_events: list[RelatedEvent] = []      # `related`, typed: what code reads
    # the peak over the level before it (loss: the window's mean; grad norm: its median),
    # e.g. 1.38 for 3.83 -> 5.28; None where it does not apply (NaN, loss-scale cascade)
    rise: float | None = None
    # how far it stands out of the series' own noise, on one scale for every metric (the
    # detection threshold is spike_sigma for all); None for a NaN or a bad start
    severity: float | None = None
    headline: bool = True             # False for a grad-norm blip during warmup
    # where every hypothesis scores 0: why none is supported (what the log lacks); the
    # key is left out of the JSON where it is None (added, as the contract allows)
    no_cause: str | None = None

    @model_serializer(mode="wrap")
    def _without_unset_no_cause(self, handler: SerializerFunctionWrapHandler) -> dict:
        out = handler(self)
        if out.get("no_cause", "") is None:
            del out["no_cause"]
        return out

    @property
    def shown_kind(self) -> str:
        """The kind in the user's words: a spike of the loss scale is its fall, a cascade of
        overflows (`kind` stays "spike", as the JSON contract names it)."""
        return "cascade" if self.kind == "spike" and self.metric == "loss_scale" else self.kind

    def priority(self) -> tuple[int, int, int, float]:
        """For picking the incident to look at first: a non-finite loss, then any other
        non-finite value, then what the loss or its scaler shows before a grad-norm blip the
        loss took in its stride (a divergence the LR causes, not an early blip), then the most
        severe; warmup blips and a bad start last."""
        nonfinite = 2 if self.kind == "nan" and self.metric == "loss" else 1 if self.kind == "nan" else 0
        return (nonfinite, int(self.headline and self.kind != "bad-start"), int(self.metric != "grad_norm"),
                self.severity or 0.0)


def worst(incidents: list[Incident]) -> int:
    """Index of the incident to look at first (0 when there is none)."""
    return max(range(len(incidents)), key=lambda i: incidents[i].priority(), default=0)


class Analysis(BaseModel):
    run: RunSummary
    checks: list[Check]
    incidents: list[Incident]
