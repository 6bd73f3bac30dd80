"""An incident's signature: the few facts two incidents are compared on. Written into the
post-mortem's front matter when it is drafted, so the knowledge base compares documents
without reading their runs again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import AliasChoices, BaseModel, Field

from postmortem.diagnose.models import Incident, Symptoms

if TYPE_CHECKING:
    from postmortem.run.model import RunManifest


class Signature(BaseModel):
    pattern: str | None = None
    # what happened, in the user's words (nan | spike | cascade | divergence | bad-start): a NaN
    # is like a NaN before it is like anything in the same dtype
    kind: str | None = None
    dtype: str | None = None
    phase: str | None = None          # warmup | early | mid | late, from the run's schedule
    grad_lead: int | None = None      # steps the grad-norm spike came before the loss spike
    # the incident's rise, as the dashboard shows it (x3.96: the peak over the level before
    # it); documents written before it was named so carry it as peak_ratio
    rise: float | None = Field(None, validation_alias=AliasChoices("rise", "peak_ratio"))
    recovery: str | None = None       # recovered | did not recover

    @property
    def peak_ratio(self) -> float | None:
        """The rise under its old name (code written before the rename)."""
        return self.rise


def phase_of(step: int | None, manifest: RunManifest | None) -> str | None:
    c = manifest.config if manifest else None
    if step is None or not c or not c.total_steps:
        return None
    if c.warmup_steps and step < c.warmup_steps:
        return "warmup"
    third = step / c.total_steps
    return "early" if third < 1 / 3 else "mid" if third < 2 / 3 else "late"


def signature(pattern: str | None, sym: Symptoms, manifest: RunManifest | None = None, grad_lead: int | None = None,
              phase: str | None = None, rise: float | None = None, kind: str | None = None) -> Signature:
    """`rise`: the incident's own (the analysis'); without it (a document that carries no
    signature) the peak loss over the EMA before it stands in."""
    if rise is None and sym.peak_loss and sym.pre_spike_loss_ema50:
        rise = round(sym.peak_loss / sym.pre_spike_loss_ema50, 3)
    rec = None if sym.recovery_loss is None else (
        "did not recover" if sym.recovery_loss == "did not recover" else "recovered")
    return Signature(pattern=pattern, kind=kind, dtype=sym.dtype, phase=phase or phase_of(sym.spike_step, manifest),
                     grad_lead=grad_lead, rise=rise, recovery=rec)


def grad_lead(incident: Incident) -> int | None:
    """How many steps the grad-norm spike came before the loss went up (0: together)."""
    for r in incident.related_events:
        if r.metric == "grad_norm" and r.kind == "spike":
            return max(0, incident.step - r.step)
    return None


def of_incident(inc: Incident, manifest: RunManifest | None = None, pattern: str | None = None) -> Signature:
    """The signature of an incident already found (no second analysis)."""
    top = inc.hypotheses[0].pattern if inc.hypotheses else None
    return signature(pattern or top, inc.symptoms, manifest, grad_lead(inc), rise=inc.rise, kind=inc.shown_kind)
