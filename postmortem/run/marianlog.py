"""Marian's cost-scaling messages on their own updates, from the counts they print.

marian-nmt/marian-dev 1.11.0/1.12.0 src/training/graph_group.cpp: the counters start at 0 with
each launch (`nanSeen_`, `noNanSeen_`), every update adds one, and every change of the factor
prints their sum and resets them: `Seen NaN/Inf after {total} gradient updates. Reduced
cost-scaling factor to {}`, `No NaN/Inf after {total} gradient updates. Increasing ...` (so
does ba91b391's `NaN/Inf percentage {:.2f} in/after {total} gradient updates`). The k-th
change of a launch is on update B0 + total_1 + ... + total_k, B0 the update the launch
started from; graph_group_sync.cpp prints `Seen NaN in gradient, skipping update` right
before the reduction of the same update. The display line every `disp-freq` updates would
otherwise leave k skips between two lines on the last k updates, a train of routine probes
read as a cascade.

B0 is 0 for a fresh launch; a restored one starts from its checkpoint, which the log does not
print: the last display update before the relaunch where the display lines allow it (a
checkpoint is saved on such an update more often than not), else the latest update that keeps
every message between the display lines around it. A
launch whose messages do not chain (a skip without its reduction, a wording without the
count, a message the display lines contradict) keeps the reader's placement.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

TOTAL = re.compile(r"\b(?:after|in) (\d+) gradient updates\b")
SKIP = "marian.skip_nan_gradient"
CHANGES = frozenset(("marian.cost_scaling.reduced", "marian.cost_scaling.minimum",
                     "marian.cost_scaling.at_minimum", "marian.cost_scaling.increase"))
_DOWN = CHANGES - {"marian.cost_scaling.increase"}


@dataclass
class Said:
    """One cost-scaling message: the reader's event index, its launch, its count."""

    event: int
    launch: int
    dialect: str
    total: int | None
    own_line_before: bool      # a display line of its own launch was read before it
    again: list[int] = field(default_factory=list)   # the same skip line from other MPI ranks


@dataclass
class Launches:
    """The launches of one log (each `Training started`) and the messages said in them."""

    fresh: list[bool] = field(default_factory=lambda: [True])   # launch 0: from update 0
    lines_at_start: list[int] = field(default_factory=lambda: [0])
    last_update: list[float] = field(default_factory=lambda: [math.nan])   # the display before it
    said: list[Said] = field(default_factory=list)

    def launch(self, lines_read: int, restored: bool, last_update: float) -> None:
        """`Training started`: a new launch unless nothing was read before it."""
        if lines_read == 0 and len(self.fresh) == 1 and not self.said:
            self.fresh[0] = not restored
            return
        self.fresh.append(False)
        self.lines_at_start.append(lines_read)
        self.last_update.append(last_update)

    def restored(self) -> None:
        """A restore message before any display line: the first launch goes on from a checkpoint."""
        if len(self.fresh) == 1:
            self.fresh[0] = False

    def message(self, event: int, dialect: str, text: str, lines_read: int) -> None:
        if dialect != SKIP and dialect not in CHANGES:
            return
        m = TOTAL.search(text)
        launch = len(self.fresh) - 1
        last = self.said[-1] if self.said else None
        if dialect == SKIP and "mpi:" in text and last and last.dialect == SKIP and last.launch == launch:
            # graph_group_sync.cpp logs the skip on every process (`[... mpi:N]`), the change on
            # the main one only: the same update's skip again
            last.again.append(event)
            return
        self.said.append(Said(event, launch, dialect, int(m.group(1)) if m else None,
                              lines_read > self.lines_at_start[launch]))


def updates(launches: Launches, around: list[list[float]]) -> dict[int, float]:
    """Event index -> its update, for the launches whose messages chain (see the module);
    `around[i]`: the steps of the display lines before and after event i (NaN: none)."""
    out: dict[int, float] = {}
    for launch in range(len(launches.fresh)):
        said = [s for s in launches.said if s.launch == launch]
        start = 0.0 if launches.fresh[launch] else launches.last_update[launch]
        placed = _launch(said, start, around)
        if placed:
            out.update(placed)
    return out


def _launch(said: list[Said], start: float, around: list[list[float]]) -> dict[int, float] | None:
    """`start`: the update the launch is known or likely to start from (0 for a fresh one, the
    last display line before a relaunch: a checkpoint is often saved on a display update); NaN:
    none, the latest update the display lines allow."""
    if not said or any(s.dialect in CHANGES and s.total is None for s in said):
        return None
    offsets: list[tuple[Said, int, bool]] = []      # (message, its offset from B0, a skipped update)
    c, pending = 0, 0
    for s in said:
        if s.dialect == SKIP:
            pending += 1
            continue
        if pending != (1 if s.dialect in _DOWN else 0):
            return None                 # a skip without its reduction, or the other way round
        c += s.total or 0
        offsets.append((s, c, s.dialect in _DOWN))
        pending = 0
    if pending:
        return None
    lo, hi = 0.0, math.inf
    for s, off, down in offsets:
        last, nxt = around[s.event]
        if s.own_line_before and not math.isnan(last):
            # a skip is before the display line of its update; a rise after it (end of update)
            lo = max(lo, last - off + (1 if down else 0))
        if not math.isnan(nxt):
            hi = min(hi, nxt - off)
    if lo > hi:
        return None
    b0 = start if lo <= start <= hi else hi
    if math.isinf(b0) or (start == 0.0 and b0 != 0.0):      # a fresh launch the lines contradict
        return None
    out: dict[int, float] = {}
    k = 0
    for s in said:                        # a skip is on the update of the reduction after it
        if s.dialect == SKIP:
            continue
        out[s.event] = b0 + offsets[k][1]
        k += 1
    for i, s in enumerate(said):
        if s.dialect == SKIP:
            for e in (s.event, *s.again):
                out[e] = out[said[i + 1].event]
    return out
