"""`similar`: past post-mortems whose incident looks like this one, explained field by field.
Only documents are read: a post-mortem carries its incident's signature in its front matter
(written when it was drafted); an older one without it is compared on its Symptoms."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from postmortem.diagnose.signature import Signature, signature
from postmortem.document.markdown import read
from postmortem.document.model import PostMortem
from postmortem.errors import DocumentError
from postmortem.files import NameRefused, check_name
from postmortem.numbers import rise

# the kind of incident (a NaN, a cascade, a divergence) weighs right after the cause and more
# than the dtype and the phase together: a NaN is first like another NaN
WEIGHTS = {"pattern": 3.0, "kind": 2.5, "dtype": 1.0, "phase": 1.0, "grad_lead": 1.0, "rise": 1.0,
           "recovery": 1.0}


@dataclass
class Match:
    score: float
    path: Path
    pm: PostMortem
    why: list[str]


def compare(a: Signature, b: Signature) -> tuple[float, list[str]]:
    """Score in [0, 1] and one line per field saying whether it matches and why."""
    score, total, why = 0.0, 0.0, []
    for name, w in WEIGHTS.items():
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            why.append(f"{name}: not compared ({_shown(name, x)} vs {_shown(name, y)})")
            continue
        total += w
        if name == "rise":
            same = max(x, y) / max(min(x, y), 1e-9) <= 1.5
        elif name == "grad_lead":
            same = abs(x - y) <= 2
        else:
            same = x == y
        shown = f"{_shown(name, x)} vs {_shown(name, y)}"
        score += w if same else 0.0
        why.append(f"{name}: {'match' if same else 'differs'} ({shown})")
    return (score / total if total else 0.0), why


def _shown(name: str, v) -> str:
    """A signature's field in words: the rise as the dashboard writes it (x3.96)."""
    if v is None:
        return "not known"
    if name == "rise":
        return rise(v)
    if name == "grad_lead":
        return f"{v} steps"
    return str(v)


def of_document(pm: PostMortem) -> Signature:
    """A post-mortem's signature: the one written in it, the author's pattern first."""
    if pm.signature is not None:
        return pm.signature.model_copy(update={"pattern": pm.pattern or pm.signature.pattern})
    return signature(pm.pattern, pm.symptoms)


def past_postmortems(root: Path) -> list[tuple[Path, PostMortem]]:
    out = []
    for f in sorted(Path(root, "learners").glob("*/postmortems/*.md")):
        try:
            check_name(f.parent.parent.name)
            out.append((f, read(f)))
        except (DocumentError, NameRefused):
            continue
    return out


def find_similar(root: Path, mine: Signature, skip=lambda pm: False) -> list[Match]:
    """Every past post-mortem under `root/learners` scored against `mine`, best first;
    `skip(pm)`: the document of this very incident, left out."""
    found = []
    for path, pm in past_postmortems(root):
        if not skip(pm):
            score, why = compare(mine, of_document(pm))
            found.append(Match(score, path, pm, why))
    found.sort(key=lambda m: -m.score)
    return found


def this_incident(run_id: str, step: int | None):
    """The `skip` of find_similar for an incident being looked at: its own post-mortems (the
    run's, at the incident's step) are no past incident like it. Both front ends use it."""
    return lambda pm: pm.run_id == run_id and (step is None or pm.spike_step == step)
