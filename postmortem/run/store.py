"""Runs where they live: one rule for every store (an MLflow file store or database, Lightning
versions, TensorBoard run folders, W&B run folders, mmengine work dirs, folders of logs).

A store that holds one run opens it; a store with several runs lists them and says how to pick
one with `--run ID`; `--run` picks by id, by name, or by an unambiguous start of the id."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from postmortem.errors import RunReadError

_STAMP = re.compile(r"(?<!\d)(20\d{6})[_-]?(\d{6})(?!\d)")        # 20240321_113341 (W&B, mmengine)
_TB_STAMP = re.compile(r"tfevents\.(\d{9,10})(?:\.|$)")          # events.out.tfevents.<unix time>.


@dataclass
class StoredRun:
    """One run of a store, as the listing shows it."""

    id: str
    name: str = ""
    start: float | None = None          # Unix seconds
    steps: int | None = None
    status: str = ""
    aliases: set[str] = field(default_factory=set)   # what else --run may say (its folder, its name)
    stamp: str = ""         # changes when the run's data changes, where its store says so (a database)

    def start_text(self) -> str:
        if self.start is None:
            return "-"
        return datetime.fromtimestamp(self.start, timezone.utc).strftime("%Y-%m-%d %H:%M")


_SHOWN = 40         # runs a refusal lists; a store of thousands is listed by `postmortem runs`


class SeveralRuns(RunReadError):
    """The path is a store of several runs and none was picked: the message lists them, one a
    line, and says how to pick one; `runs` holds them for a picker."""

    def __init__(self, path: str | Path, runs: list[StoredRun], command: str = "analyze"):
        self.runs = sorted(runs, key=lambda r: r.id)
        super().__init__(path, "")
        self.for_command(command)

    def for_command(self, command: str) -> None:
        """The message as the command that was given says it (`postmortem info STORE --run ID`)."""
        runs = self.runs
        lines = [f"holds {len(runs)} different runs or logs; pick one with "
                 f"`postmortem {command} {self.path} --run ID` (`postmortem runs {self.path}` "
                 f"analyzes them all):"]
        shown = runs[:_SHOWN] if len(runs) > _SHOWN + 1 else runs
        width = max(len(r.id) for r in shown)
        for r in shown:
            lines.append(f"  {r.id:<{width}}  {r.name or '-':<20}  {r.start_text():16}  "
                         f"{'?' if r.steps is None else r.steps:>7} steps  {r.status or '-'}")
        if len(shown) < len(runs):
            lines.append(f"  ... and {len(runs) - len(shown)} more (`postmortem runs {self.path}` "
                         f"lists them all)")
        self.problem = "\n".join(lines)
        self.args = (f"{self.path}: {self.problem}",)


def from_stamp(text: str) -> float | None:
    """The start time a folder or file name carries (W&B's run-20240321_113341-id, mmengine's
    20240321_113341, TensorBoard's events.out.tfevents.<unix time>), if any."""
    m = _TB_STAMP.search(text)
    if m:
        return float(m.group(1))
    m = _STAMP.search(text)
    if m:
        try:
            return datetime.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S").replace(
                tzinfo=timezone.utc).timestamp()
        except ValueError:
            return None
    return None


class NoSuchRun(RunReadError):
    """`--run` names no run of the store, or several: `held` is what it holds (their ids)."""

    def __init__(self, path: str | Path, problem: str, wanted: str, held: list[str]):
        super().__init__(path, problem)
        self.wanted, self.held = wanted, held


def pick(runs: list[StoredRun], wanted: str, path: str | Path) -> int:
    """The index of the run `--run` names: its id, a name or folder, else the one id that starts
    with it; otherwise a one-line refusal that lists what the store holds."""
    for i, r in enumerate(runs):
        if wanted == r.id:
            return i
    named = [i for i, r in enumerate(runs) if wanted in r.aliases or wanted == r.name]
    if len(named) == 1:
        return named[0]
    starts = [i for i, r in enumerate(runs) if r.id.startswith(wanted)]
    if len(starts) == 1 and not named:
        return starts[0]
    shown = ", ".join(runs[i].id for i in (named or starts or range(len(runs)))[:6])
    why = "names several runs" if len(named) > 1 or len(starts) > 1 else "is no run of it"
    raise NoSuchRun(path, f"--run {wanted} {why}; it holds: {shown}"
                          f"{' ...' if len(runs) > 6 else ''} (`postmortem runs {path}` lists them)",
                    wanted, [r.id for r in runs])


def newest_first(runs: list[StoredRun]) -> list[StoredRun]:
    return sorted(runs, key=lambda r: (r.start is None, -(r.start or 0.0), r.id))
