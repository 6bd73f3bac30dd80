"""How a number is written for a person: one formatter for the document, the editor and the
dashboard, and the check's idea of two numbers being equal (equal as written)."""

from __future__ import annotations

import math

DIGITS = 4                  # significant digits shown: 1.2508078326284633 is 1.251
NO_VALUE = "no value"       # where the run has no (finite) value: not logged, or NaN at a NaN incident
_PLAIN_INT = 1e6            # whole numbers below this are written out (a loss scale of 65536)


def number(v) -> str:
    """`v` as a person writes it: 4 significant digits, whole numbers in full (below a
    million), NaN and +inf/-inf by name, `no value` for None. Written twice over it is
    the same text (number(float(number(x))) == number(x)): the document parses back to itself."""
    if v is None:
        return NO_VALUE
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+inf" if v > 0 else "-inf"
    shown = f"{v:.{DIGITS}g}"
    rounded = float(shown)
    if math.isinf(rounded):
        return repr(v)           # within a hair of the largest float: rounding up would overflow
    for whole in (v, rounded):       # 65536.0 stays 65536, 99999.7 rounds to 100000
        if whole == int(whole) and abs(whole) < _PLAIN_INT:
            return str(int(whole))
    return shown


def rounded(v: float) -> float:
    """`v` at the precision `number` shows."""
    return float(f"{v:.{DIGITS}g}") if math.isfinite(v) else v


def same_as_shown(a, b) -> bool:
    """Two values equal as `number` writes them: a document's 1.251 is the run's
    1.2508078326284633, and so is a document that kept every digit."""
    if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        return a == b
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return rounded(a) == rounded(b)


def rise(v: float | None) -> str:
    """An incident's rise (its peak over the level before it) as the dashboard, the report
    and `similar` write it: x3.96."""
    return "-" if v is None else f"x{v:.2f}"


def counts(found: dict | None) -> str:
    """Counts of kinds of values in words, the zero ones left out: {'nan': 539, '+inf': 1088,
    'size': 4096} -> `539 NaN, 1088 +inf of 4096`."""
    if not found:
        return "no values"
    names = {"nan": "NaN", "+inf": "+inf", "-inf": "-inf", "zeros": "zeros"}
    parts = [f"{n} {names.get(k, k)}" for k, n in found.items() if k != "size" and n]
    text = ", ".join(parts) or "all finite"
    return f"{text} of {found['size']} values" if found.get("size") else text
