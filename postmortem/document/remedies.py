"""The usual remedies of each pattern: what the editor offers for section 5. Suggestions,
never filled in for the author: the remediation has to be what this run needs. They live
with their pattern in the catalog (postmortem/diagnose/catalog.py)."""

from __future__ import annotations

from postmortem.diagnose.catalog import BY_ID

REMEDIES: dict[str, tuple[str, ...]] = {pid: p.remedies for pid, p in BY_ID.items()}


def remedies_for(pattern: str | None) -> tuple[str, ...]:
    return REMEDIES.get(pattern or "", ())
