"""What the progress modules share: a number as loggers print it, and `entry`."""

from __future__ import annotations

import re

from postmortem.run.dialects import Dialect, Kind

# 1,234 (torchtitan), 8.2E+00 (Megatron), nan, -nan, inf
NUM = (r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
       r"|nan|NaN|inf|Inf)")


def num(name: str) -> str:
    """A number captured under `name`."""
    return f"(?P<{name}>{NUM})"


def entry(id: str, framework: str, kind: Kind, source: str, format: str, pattern: str,
          examples: tuple[str, ...], keywords: tuple[str, ...] = (), flags: int = 0) -> Dialect:
    return Dialect(id=id, framework=framework, kind=kind, source=source, format=format,
                   pattern=re.compile(pattern, flags), keywords=keywords, examples=examples)
