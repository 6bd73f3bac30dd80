"""Every Textual message of the app, in one place, each a dataclass with typed fields (the
pattern of toolong's messages.py): the loader process's run, a replay's progress, evidence and
end, posted from worker threads (Textual hands them to the UI thread), and the editor's
hypotheses table telling its screen it changed.

A replay's messages carry the child's own message (replay/models.py, the JSON-lines wire) as
a typed field: one vocabulary from the child to the panel. The types of the run, the
analysis and the wire are imported for the type checker only: the dashboard imports this
module at start-up, before pandas or pydantic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from textual.message import Message

if TYPE_CHECKING:
    from postmortem.diagnose.models import Analysis, Evidence
    from postmortem.replay.models import EvidenceArrived, Failed, Finished, Progress, Stopped
    from postmortem.run.model import RunLog
    from postmortem.tui.view import FirstView

ReplayEnd = Literal["done", "failed", "cancelled"]
"""How a replay ended: done (with its result), failed (with why) or cancelled."""

_END_OF_KIND: dict[str, ReplayEnd] = {"done": "done", "error": "failed", "cancelled": "cancelled"}


class Posted(Message, bubble=False):
    """Read by the screen it was posted to, not by the App behind it."""


# -- the loader process ---------------------------------------------------------------------

@dataclass
class RunRead(Posted):
    """The first view of the run (arrays and rows): the dashboard is drawn from it."""

    view: FirstView


@dataclass
class RunHandedOver(Posted):
    """The whole run and its analysis, after the first paint; and the fresh first view when
    the one painted was kept from an earlier opening and the run or the code has changed."""

    log: RunLog
    analysis: Analysis
    view: FirstView | None = None


@dataclass
class RunFailed(Posted):
    """The run could not be read (before the first paint) or handed over (after it)."""

    message: str
    painted: bool = False


# -- a replay, as its child says it -----------------------------------------------------------

@dataclass
class ReplayProgress(Posted):
    """One step of one arm; a newer one replaces one not yet shown."""

    progress: Progress

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReplayProgress)


@dataclass
class ReplayEvidence(Posted):
    """One evidence row, as soon as its arm is judged."""

    arrived: EvidenceArrived

    @property
    def evidence(self) -> Evidence:
        return self.arrived.evidence


@dataclass
class ReplayFinished(Posted):
    """The replay ended: the child's last message, Finished (with the result), Failed (with
    why: also when the child died without a word) or Stopped."""

    end: Finished | Failed | Stopped

    @property
    def state(self) -> ReplayEnd:
        return _END_OF_KIND[self.end.kind]


# -- the editor -------------------------------------------------------------------------------

@dataclass
class HypothesesTableChanged(Message):
    """The author changed section 2 (reordered, dismissed or added a hypothesis); it bubbles
    up to the editor (`on_hypotheses_table_changed`)."""
