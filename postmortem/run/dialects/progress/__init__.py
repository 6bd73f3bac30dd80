"""Progress and eval lines, one module per framework (see postmortem.run.dialects).

A dialect's family is its id less the last part (`megatron.iteration` -> `megatron`,
`llm.c.step` -> `llm.c`): the name a text log's format takes when its lines are the
family's. `families()` is the table the sniffer counts hits with.
"""

from __future__ import annotations

import re

from postmortem.run.dialects import Dialect, catalogue

# Families whose trainer steps on the sum of the loss parts it prints, with no total among
# them (Ultralytics' box + cls + dfl): their module adds itself; the loss is then that sum.
LOSS_IS_SUM_OF_PARTS: set[str] = set()
# Progress entries whose `train ...` values beside `val ...` ones are the run's own train values
# (an epoch's means: nnUNet's `Train Loss : X` beside `Val Loss : Y`), never the train split
# measured at an eval (nanoGPT's `train loss X, val loss Y`): their module adds their ids.
TRAIN_BESIDE_VAL: set[str] = set()


def family(d: Dialect) -> str:
    return d.id.rsplit(".", 1)[0]


def family_names() -> tuple[str, ...]:
    """The families, in id order (the names a text log's format takes), nothing compiled."""
    return tuple(dict.fromkeys(family(d) for d in sorted(catalogue("progress") + catalogue("eval"),
                                                         key=lambda d: d.id)))


def families() -> dict[str, tuple[re.Pattern[str], ...]]:
    """Family -> the patterns of its progress and eval lines, families in id order."""
    out: dict[str, list[re.Pattern[str]]] = {}
    for d in sorted(catalogue("progress") + catalogue("eval"), key=lambda d: d.id):
        out.setdefault(family(d), []).append(d.pattern)
    return {f: tuple(p) for f, p in out.items()}


def dialect(id: str) -> Dialect:
    """One entry by its id (a reader that keeps a line reader of its own uses its pattern)."""
    return next(d for d in catalogue() if d.id == id)


def of_line(line: str) -> Dialect | None:
    """The progress or eval dialect whose pattern the (cleaned) line matches, if any."""
    for d in catalogue("progress") + catalogue("eval"):
        if d.search(line):
            return d
    return None
