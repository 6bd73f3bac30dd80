"""A NaN loss said in words only (`dialects/messages/tensorflow.py`): a NaN of `loss` at the
step after the last one logged, as the trainer stopped on a step it never printed."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from postmortem.run.dialects import catalogue

if TYPE_CHECKING:
    from postmortem.run.metriclines.pairs import Parsed, Value

_ENTRIES = None
_KEYWORDS: tuple[str, ...] = ()


def said_nan(text: str, out: Parsed, value: type[Value]) -> bool:
    """True where the line is such a message: `out` then holds that NaN loss, and nothing else
    (the traceback around OpenNMT-tf's words holds no metric)."""
    global _ENTRIES, _KEYWORDS
    if _ENTRIES is None:
        _ENTRIES = catalogue("nan_loss")
        _KEYWORDS = tuple(k for d in _ENTRIES for k in d.keywords)
    # (TensorFlow's words say `NaN`; SpeechBrain's `not finite` / `not yet exhausted`)
    if not any(k in text for k in _KEYWORDS):
        return False
    for d in _ENTRIES:
        m = d.search(text)
        if m:
            out.values = [value("loss", m.start("nan"), m.end("nan"), math.nan, m.start())]
            out.stream, out.next_step = "train", True
            return True
    return False
