"""What the message modules share: a number as the frameworks print it, and `entry`.

A scale is printed by `{}` / `str()` of a float or an int (`65536`, `32768.0`, `1e-06`),
and may be `inf`, `nan` or `0` when the scaler itself went wrong: all are read.
"""

from __future__ import annotations

import re

from postmortem.run.dialects import Dialect, Kind

NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|inf|nan)"


def num(name: str) -> str:
    """A number captured under `name`."""
    return f"(?P<{name}>{NUM})"


def entry(id: str, framework: str, kind: Kind, source: str, format: str, pattern: str,
          keywords: tuple[str, ...], examples: tuple[str, ...], flags: int = 0,
          prev_factor: float | None = None) -> Dialect:
    return Dialect(id=id, framework=framework, kind=kind, source=source, format=format,
                   pattern=re.compile(pattern, flags), keywords=keywords, examples=examples,
                   prev_factor=prev_factor)
