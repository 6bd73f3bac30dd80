"""Loss-scaler overflow lines: a skipped step, and the loss scale after it.

DeepSpeed (`OVERFLOW! Rank 0 Skipping step. Attempted loss scale: X, reducing to Y`,
`Reducing dynamic loss scale from X to Y`), fairseq (`overflow detected, setting
loss scale to: Y`) and apex amp (`Gradient overflow.  Skipping step, loss scaler 0
reducing loss scale to Y`). A rank other than 0 reporting the same overflow is
not counted twice.
"""

from __future__ import annotations

import re

_N = r"([-+]?(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|inf|nan))"
_PATTERNS = [
    re.compile(r"overflow!.*?Attempted loss scale:\s*" + _N + r"(?:, reducing to\s*" + _N + r")?", re.I),
    re.compile(r"Reducing dynamic loss scale from\s*" + _N + r"\s*to\s*" + _N),
    re.compile(r"overflow detected, setting loss scale to:?\s*" + _N),
    re.compile(r"Gradient overflow\.?\s*Skipping step,.*?reducing loss scale to\s*" + _N),
]
_RANK = re.compile(r"OVERFLOW! Rank (\d+)")


def find_overflow(text: str) -> dict | None:
    """{'scale': span of the new scale or None, 'rank': span of the rank or None}."""
    if "verflow" not in text and "Reducing dynamic" not in text:
        return None
    for p in _PATTERNS:
        m = p.search(text)
        if m:
            last = m.lastindex or 0
            scale = m.span(last) if last and m.group(last) and (last > 1 or p is not _PATTERNS[0]) else None
            rank = _RANK.search(text)
            return {"scale": scale, "rank": rank.span(1) if rank else None}
    return None
