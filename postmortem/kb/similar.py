"""`similar`: past post-mortems whose incident looks like this one, explained field by field."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from postmortem.diagnose.models import Symptoms
from postmortem.document.markdown import DocumentError, read

WEIGHTS = {"pattern": 3.0, "dtype": 1.0, "phase": 1.0, "grad_lead": 1.0, "peak_ratio": 1.0,
           "recovery": 1.0}


@dataclass
class Signature:
    pattern: str | None
    dtype: str | None
    phase: str | None          # warmup | early | mid | late, from the run's schedule
    grad_lead: int | None      # steps the grad-norm spike came before the loss spike
    peak_ratio: float | None   # peak loss / the 50-step EMA before
    recovery: str | None       # recovered | did not recover


def phase_of(step: int | None, manifest) -> str | None:
    c = manifest.config if manifest else None
    if step is None or not c or not c.total_steps:
        return None
    if c.warmup_steps and step < c.warmup_steps:
        return "warmup"
    third = step / c.total_steps
    return "early" if third < 1 / 3 else "mid" if third < 2 / 3 else "late"


def signature(pattern: str | None, sym: Symptoms, manifest=None, grad_lead: int | None = None) -> Signature:
    ratio = None
    if sym.peak_loss and sym.pre_spike_loss_ema50:
        ratio = sym.peak_loss / sym.pre_spike_loss_ema50
    rec = None if sym.recovery_loss is None else (
        "did not recover" if sym.recovery_loss == "did not recover" else "recovered")
    return Signature(pattern, sym.dtype, phase_of(sym.spike_step, manifest), grad_lead, ratio, rec)


def compare(a: Signature, b: Signature) -> tuple[float, list[str]]:
    """Score in [0, 1] and one line per field saying whether it matches and why."""
    score, total, why = 0.0, 0.0, []
    for name, w in WEIGHTS.items():
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            why.append(f"{name}: unknown ({x} vs {y})")
            continue
        total += w
        if name == "peak_ratio":
            same = max(x, y) / max(min(x, y), 1e-9) <= 1.5
            shown = f"{x:.2f} vs {y:.2f}"
        elif name == "grad_lead":
            same = abs(x - y) <= 2
            shown = f"{x} vs {y} steps"
        else:
            same = x == y
            shown = f"{x} vs {y}"
        score += w if same else 0.0
        why.append(f"{name}: {'match' if same else 'differs'} ({shown})")
    return (score / total if total else 0.0), why


def grad_lead(incident) -> int | None:
    """How many steps the grad-norm spike came before the loss went up (0: together)."""
    for r in incident.related:
        if r.startswith("grad_norm spike at step "):
            return max(0, incident.step - int(r.rsplit(" ", 1)[1]))
    return None


def of_run(log, step: int | None = None, pattern: str | None = None) -> Signature:
    """The signature of a run's incident (the largest, or the one at `step`)."""
    from postmortem.diagnose.analyze import analyze
    from postmortem.diagnose.models import worst
    incidents = analyze(log).incidents
    if step is not None:
        incidents = [i for i in incidents if i.step == step] or incidents
    if not incidents:
        return Signature(pattern, log.dtype, None, None, None, None)
    return of_incident(incidents[worst(incidents)], log.manifest, pattern)


def of_incident(inc, manifest=None, pattern: str | None = None) -> Signature:
    """The signature of an incident already found (no second analysis)."""
    top = inc.hypotheses[0].pattern if inc.hypotheses else None
    return signature(pattern or top, inc.symptoms, manifest, grad_lead(inc))


def of_document(pm, root: Path) -> Signature:
    """A post-mortem's signature; with its run still on disk, phase and grad-norm lead too."""
    from postmortem.run import RunReadError, read_run
    if pm.run:
        path = Path(pm.run) if Path(pm.run).is_absolute() else root / pm.run
        if path.exists():
            try:
                return of_run(read_run(path), pm.spike_step, pm.pattern)
            except RunReadError:
                pass
    return signature(pm.pattern, pm.symptoms)


def past_postmortems(root: Path) -> list[tuple[Path, object]]:
    out = []
    for f in sorted((root / "learners").glob("*/postmortems/*.md")):
        try:
            out.append((f, read(f)))
        except DocumentError:
            continue
    return out
