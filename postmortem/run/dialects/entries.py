"""How a dialect module writes its entries: `entry` and the numbers its patterns capture.

Every module under `progress/` and `messages/` builds its `Dialect`s with `entry` and
splices one of two number grammars into its patterns:

- `NUM`: a number as a training logger prints it: `1,234` (torchtitan), `8.2E+00`
  (Megatron), and a non-finite value in any runtime's spelling: `nan`, `-nan`, `NaN`, `NAN`
  (Python's `{:E}`), `nan(ind)` (MSVC), `1.#QNAN`, `-1.#IND` (MSVC before 2015), `inf`,
  `+Inf` (Go), `Infinity` (JS, Java). Progress and eval lines use it.
- `scale(name)`: a loss scale as a scaler prints it, by `{}` / `str()` of a float or an int
  (`65536`, `32768.0`, `1e-06`); it may be `inf`, `nan` or `0` when the scaler itself went
  wrong. The overflow and scale messages use it; it reads no thousands separator, since a
  scaler never prints one.
"""

from __future__ import annotations

from postmortem.run.dialects import Dialect, Kind

# The non-finite spellings (postmortem.run.nonfinite.NONFINITE): every runtime's, not only Python's,
# since a NaN row read as no row (or MSVC's `1.#QNAN` read as a 1) hides the incident itself.
# The digits leave MSVC's `1.#QNAN` alone (they would take its `1.` for a number).
NUM = (r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?!\.#)(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
       r"|(?i:nan(?:\(\w*\))?|inf(?:inity)?)|\u221e|\d\.#(?:QNAN|SNAN|IND|INF)\d*)")

SCALE_NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|inf|nan)"


def scale(name: str) -> str:
    """A loss scale, as a scaler prints it, captured under `name`."""
    return f"(?P<{name}>{SCALE_NUM})"


def entry(id: str, framework: str, kind: Kind, source: str, format: str, pattern: str,
          examples: tuple[str, ...], keywords: tuple[str, ...] = (), flags: int = 0,
          prev_factor: float | None = None, one_rank: bool = False, after_step_line: bool = False) -> Dialect:
    """One dialect: `pattern` (compiled with `flags` when first used); `examples` are lines
    built from `format`."""
    return Dialect(id=id, framework=framework, kind=kind, source=source, format=format,
                   regex=pattern, flags=flags, keywords=keywords, examples=examples,
                   prev_factor=prev_factor, one_rank=one_rank, after_step_line=after_step_line)
