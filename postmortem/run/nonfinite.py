"""A non-finite number as any runtime prints it: one grammar for every reader."""

from __future__ import annotations

import math
import re

# A non-finite number as runtimes print it, sign included: Python / numpy / torch `nan`, `inf`;
# C printf `-nan`, `NAN`, `INF` (%F, %E, and Python's `{:E}`, which Megatron uses); C99
# `nan(chars)` and MSVC's UCRT `nan(ind)`, `-nan(ind)`, `inf`; MSVC before 2015 `1.#QNAN`,
# `-1.#IND`, `1.#INF` (`1.#QNAN0` under %f); JS, Java, .NET, JSON written by Python `NaN`,
# `Infinity`; Go `NaN`, `+Inf`; .NET Core 3.0+ `∞`.
NONFINITE = (r"[-+]?(?:\d\.#(?:QNAN|SNAN|IND|INF)\d*|(?i:nan(?:\(\w*\))?|inf(?:inity)?)|\u221e)")
_NONFINITE = re.compile(NONFINITE)


def nonfinite(text: str) -> float | None:
    """NaN, +inf or -inf for a non-finite number as some runtime prints it (`-nan(ind)`,
    `1.#QNAN`, `+Inf`, `Infinity`), None for anything else."""
    word = text.strip()
    if not _NONFINITE.fullmatch(word):
        return None
    low = word.lower()
    if "nan" in low or "#ind" in low:
        return math.nan                      # a NaN's sign means nothing: `-nan` is a NaN
    return -math.inf if low.startswith("-") else math.inf
