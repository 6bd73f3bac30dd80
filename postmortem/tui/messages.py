"""What the workers tell the screens: the loader process's run, and a replay's progress,
evidence and end, posted from their threads (Textual hands them to the UI thread)."""

from __future__ import annotations

from textual.message import Message


class Posted(Message, bubble=False):
    """Read by the screen it was posted to, not by the App behind it."""


class RunRead(Posted):
    """The first view of the run (arrays and rows): the dashboard is drawn from it."""

    def __init__(self, view) -> None:
        super().__init__()
        self.view = view


class RunHandedOver(Posted):
    """The whole run and its analysis, after the first paint; and the fresh first view when
    the one painted was kept from an earlier opening and the run or the code has changed."""

    def __init__(self, log, analysis, view=None) -> None:
        super().__init__()
        self.log, self.analysis, self.view = log, analysis, view


class RunFailed(Posted):
    """The run could not be read (before the first paint) or handed over (after it)."""

    def __init__(self, message: str, painted: bool = False) -> None:
        super().__init__()
        self.message, self.painted = message, painted


class ReplayProgress(Posted):
    """One step of one arm; a newer one replaces one not yet shown."""

    def __init__(self, arm: str, step: int, done: int, total: int) -> None:
        super().__init__()
        self.arm, self.step, self.done, self.total = arm, step, done, total

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReplayProgress)


class EvidenceArrived(Posted):
    """One evidence row, as soon as its arm is judged."""

    def __init__(self, evidence) -> None:
        super().__init__()
        self.evidence = evidence


class ReplayFinished(Posted):
    """The replay ended: state is done (with its result), failed (with why) or cancelled."""

    def __init__(self, state: str, result=None, message: str = "") -> None:
        super().__init__()
        self.state, self.result, self.message = state, result, message
