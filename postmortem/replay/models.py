"""What a replay hands over, typed from the engine to the child's JSON lines, the TUI and the
document: each arm's losses, the ReplayResult with its Evidence rows (diagnose/models.py, so
that the document holds the same rows), and the child's messages."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from postmortem.diagnose.models import Evidence, Hypothesis

# a diverged arm's loss is inf or NaN: written as JSON's Infinity/NaN and read back as such
_FLOATS = ConfigDict(ser_json_inf_nan="constants")


class Cancelled(Exception):
    """The replay was asked to stop; the message names the arm it stopped in."""


class ArmResult(BaseModel):
    model_config = _FLOATS
    name: str
    losses: dict[int, float] = {}
    skipped: str | None = None       # why the arm did not run

    def __init__(self, name: str, losses: dict[int, float] | None = None, skipped: str | None = None, **rest):
        super().__init__(name=name, losses=losses or {}, skipped=skipped, **rest)


class ReplayResult(BaseModel):
    model_config = _FLOATS
    run_id: str
    incident_step: int
    checkpoint: int
    device: str
    faithful_max_diff: float | None
    faithful: bool
    arms: dict[str, ArmResult]
    # the probes' own findings, by probe (replay/probes.py, each key there only where it ran):
    # "per_token", "hashes", "layers", "first_nonfinite"; kept a dict, not a model, so the
    # child's JSON stays as it is (a model would write the probes that did not run as null)
    probes: dict[str, Any]
    evidence: list[Evidence]
    hypotheses: list[Hypothesis]


# -- the child's messages, one JSON object a line ---------------------------------------

class Progress(BaseModel):
    kind: Literal["progress"] = "progress"
    arm: str
    step: int
    done: int
    total: int


class EvidenceArrived(BaseModel):
    model_config = _FLOATS
    kind: Literal["evidence"] = "evidence"
    evidence: Evidence


class Finished(BaseModel):
    model_config = _FLOATS
    kind: Literal["done"] = "done"
    result: ReplayResult


class Failed(BaseModel):
    kind: Literal["error"] = "error"
    message: str                     # one line: what is missing, or where the run's code failed


class Stopped(BaseModel):
    kind: Literal["cancelled"] = "cancelled"
    arm: str


Message = Annotated[Union[Progress, EvidenceArrived, Finished, Failed, Stopped], Field(discriminator="kind")]
MESSAGE = TypeAdapter(Message)
