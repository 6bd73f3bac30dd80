"""Sections 3-7 as the author types them, one text each, and back into the document.

The guided editor shows these texts and reads them back on every change; the forms are the
document's, so they are tested here without a screen."""

from __future__ import annotations

from postmortem.diagnose.models import Evidence
from postmortem.document.model import SECTIONS, HypothesisEntry, PostMortem, Verification, split_patterns

# the free-text sections, by the name of their input
AREAS = ("evidence", "root_cause", "remediation", "verification", "lesson")
GUIDE = {
    "evidence": "one row a line: panel | observation | favors, ... | rules out, ...",
    "root_cause": "one sentence: what caused the incident",
    "remediation": "one change a line (the usual remedies below: enter adds one)",
    "verification": "seed: N / epsilon: X / through step: T / expect: step N loss < X",
    "lesson": "one line for the lessons file",
}
SECTION_OF = dict(zip(("symptoms", "hypotheses", "evidence", "root_cause", "remediation", "verification",
                       "lesson"), SECTIONS))
SHORT = dict(zip(SECTIONS, ("Symptoms", "Hypotheses", "Evidence", "Root cause", "Remediation", "Verification",
                            "Lesson")))


def texts(pm: PostMortem) -> dict[str, str]:
    """Sections 3-7 of the document as the editor shows them, by area."""
    return {"evidence": "\n".join(f"{e.panel} | {e.observation} | {', '.join(e.favors)} | "
                                  f"{', '.join(e.rules_out)}" for e in pm.evidence),
            "root_cause": pm.root_cause, "remediation": "\n".join(pm.remediation),
            "verification": "\n".join(pm.verification.lines()), "lesson": pm.lesson}


def evidence_of(text: str) -> list[Evidence]:
    """`panel | observation | favors, ... | rules out, ...` a line; a line without a panel
    and an observation is left out (the author is still typing it)."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 2 and parts[0]:
            parts += [""] * (4 - len(parts))
            rows.append(Evidence(panel=parts[0], observation=parts[1],
                                 favors=split_patterns(parts[2]), rules_out=split_patterns(parts[3])))
    return rows


def collect(pm: PostMortem, areas: dict[str, str], hypotheses: list[HypothesisEntry], pattern: str,
            unusual_tokens: str) -> PostMortem:
    """The document as the inputs say it now: `areas` the texts of sections 3-7, `pattern` and
    `unusual_tokens` as typed, `hypotheses` section 2. Lines that do not parse are left out."""
    tokens = unusual_tokens.strip() or None
    return pm.model_copy(update={
        "symptoms": pm.symptoms.model_copy(update={"unusual_tokens": tokens}),
        "hypotheses": list(hypotheses),
        "pattern": pattern.strip() or None, "evidence": evidence_of(areas["evidence"]),
        "root_cause": areas["root_cause"].strip(), "lesson": areas["lesson"].strip(),
        "remediation": [r.strip() for r in areas["remediation"].splitlines() if r.strip()],
        "verification": Verification.from_lines(areas["verification"].splitlines(), strict=False)})


def first_empty(pm: PostMortem) -> str:
    """Where the writing starts: the first of sections 3-7 still empty."""
    shown = texts(pm)
    return next((n for n in AREAS if not shown[n].strip()), AREAS[0])
