"""The replay's arms in one table: each one's name, what it tells apart, and the patterns it
tests (read from the diagnosis' catalog, where each pattern names its arms). No torch: the
TUI lists them before a replay runs."""

from __future__ import annotations

from dataclasses import dataclass

from postmortem.diagnose.catalog import arm_tests


@dataclass(frozen=True)
class Arm:
    name: str
    tells_apart: str

    @property
    def tests(self) -> list[str]:
        """The patterns whose cause this arm takes away."""
        return arm_tests(self.name)


ARMS = (
    Arm("faithful", "the logged steps again: the replay must reproduce the run first"),
    Arm("fp32", "the same steps in fp32: an fp16 overflow goes away"),
    Arm("scheduled-lr", "the LR the schedule meant: a schedule discontinuity goes away"),
    Arm("restored-moments", "the checkpoint's Adam moments on resume: an optimizer reset goes away"),
    Arm("swap-batch", "the suspect batch replaced by its neighbour: a rare-token batch goes away"),
    Arm("earlier-checkpoint", "the suspect batch on an earlier state: hard data stays hard"),
)
NAMES = tuple(a.name for a in ARMS)
BY_NAME = {a.name: a for a in ARMS}
