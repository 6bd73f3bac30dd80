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
    """Sections 3-7 of the document as the editor shows them, by area; a line that could not
    be read is back in its place, as typed."""
    rows = [f"{e.panel} | {e.observation} | {', '.join(e.favors)} | {', '.join(e.rules_out)}"
            for e in pm.evidence]
    return {"evidence": "\n".join(in_place(rows, pm.unreadable.get(SECTION_OF["evidence"], []))),
            "root_cause": pm.root_cause, "remediation": "\n".join(pm.remediation),
            "verification": "\n".join(in_place(pm.verification.lines(),
                                               pm.unreadable.get(SECTION_OF["verification"], []))),
            "lesson": pm.lesson}


def in_place(lines: list[str], unreadable: list[tuple[int, str]]) -> list[str]:
    """`lines` with each (line number, line) that could not be read put back at its number
    (after the others when the text has grown shorter)."""
    out = list(lines)
    for n, line in sorted(unreadable):
        out.insert(n - 1, line)
    return out


def row_of(line: str) -> Evidence | None:
    """`panel | observation | favors, ... | rules out, ...` as a row; None for a line without
    a panel and an observation (the author is still typing it, or wrote prose)."""
    parts = [p.strip() for p in line.split("|")]
    if len(parts) < 2 or not parts[0]:
        return None
    parts += [""] * (4 - len(parts))
    return Evidence(panel=parts[0], observation=parts[1],
                    favors=split_patterns(parts[2]), rules_out=split_patterns(parts[3]))


def read_rows(text: str) -> tuple[list[Evidence], list[tuple[int, str]]]:
    """Section 3's text in one pass: its rows, and the lines that are not rows as (line
    number, line); blank lines are neither."""
    rows, unreadable = [], []
    for n, line in enumerate(text.splitlines(), 1):
        row = row_of(line)
        if row is not None:
            rows.append(row)
        elif line.strip():
            unreadable.append((n, line.strip()))
    return rows, unreadable


def collect(pm: PostMortem, areas: dict[str, str], hypotheses: list[HypothesisEntry], pattern: str,
            unusual_tokens: str) -> PostMortem:
    """The document as the inputs say it now: `areas` the texts of sections 3-7, `pattern` and
    `unusual_tokens` as typed, `hypotheses` section 2. Lines that do not read are kept apart,
    in `unreadable`, for the document to hold and the check to name."""
    tokens = unusual_tokens.strip() or None
    verification, unread_facts = Verification.read(areas["verification"].splitlines())
    evidence, unread_rows = read_rows(areas["evidence"])
    unreadable = {SECTION_OF["evidence"]: unread_rows, SECTION_OF["verification"]: unread_facts}
    return pm.model_copy(update={
        "symptoms": pm.symptoms.model_copy(update={"unusual_tokens": tokens}),
        "hypotheses": list(hypotheses),
        "pattern": pattern.strip() or None, "evidence": evidence,
        "root_cause": areas["root_cause"].strip(), "lesson": areas["lesson"].strip(),
        "remediation": [r.strip() for r in areas["remediation"].splitlines() if r.strip()],
        "verification": verification, "unreadable": {k: v for k, v in unreadable.items() if v}})


def first_empty(pm: PostMortem) -> str:
    """Where the writing starts: the first of sections 3-7 still empty."""
    shown = texts(pm)
    return next((n for n in AREAS if not shown[n].strip()), AREAS[0])
