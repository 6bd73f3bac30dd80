"""Section 2 of the editor: the ranked hypotheses, which the author reorders, dismisses with
a reason and adds to."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from postmortem.document.model import HypothesisEntry
from postmortem.tui.dialogs import AskScreen
from postmortem.tui.widgets.cells import columns, plain


class HypothesesTable(DataTable):
    """Section 2: the ranked hypotheses; the author reorders, adds and dismisses."""

    BINDINGS = [
        Binding("shift+up", "move(-1)", "Up", id="hypotheses.up", tooltip="Move the hypothesis up"),
        Binding("shift+down", "move(1)", "Down", id="hypotheses.down", tooltip="Move the hypothesis down"),
        Binding("d", "dismiss_hypothesis", "Dismiss", id="hypotheses.dismiss",
                tooltip="Dismiss with a reason (again: restore it)"),
        Binding("a", "add", "Add", id="hypotheses.add", tooltip="Add a hypothesis: pattern | panel | observation"),
    ]

    def __init__(self, hypotheses: list[HypothesisEntry], **kw):
        super().__init__(cursor_type="row", **kw)
        self.hypotheses = list(hypotheses)

    def on_mount(self) -> None:
        columns(self, **{"#": 2}, pattern=22, panel=16, observation=80, dismissed=40)
        self.fill()

    def fill(self, row: int | None = None) -> None:
        self.clear()
        for i, h in enumerate(self.hypotheses, 1):
            self.add_row(*plain(i, h.pattern, h.panel, h.observation, h.dismissed or ""))
        if row is not None and self.hypotheses:
            self.move_cursor(row=max(0, min(row, len(self.hypotheses) - 1)))
        self.post_message(self.Changed())

    class Changed(Message):
        """The author changed section 2."""

    def action_move(self, delta: int) -> None:
        i = self.cursor_row
        j = i + delta
        if not (0 <= i < len(self.hypotheses) and 0 <= j < len(self.hypotheses)):
            return
        self.hypotheses[i], self.hypotheses[j] = self.hypotheses[j], self.hypotheses[i]
        self.fill(j)

    def action_dismiss_hypothesis(self) -> None:
        i = self.cursor_row
        if not 0 <= i < len(self.hypotheses):
            return
        h = self.hypotheses[i]
        if h.dismissed:
            self.hypotheses[i] = h.model_copy(update={"dismissed": None})
            self.fill(i)
            return

        def done(reason: str | None) -> None:
            if reason:
                self.hypotheses[i] = h.model_copy(update={"dismissed": reason})
                self.fill(i)
        self.app.push_screen(AskScreen(f"Why dismiss {h.pattern}?", "the observation that rules it out"), done)

    def action_add(self) -> None:
        def done(text: str | None) -> None:
            parts = [p.strip() for p in (text or "").split("|")]
            if len(parts) == 3 and all(parts):
                self.hypotheses.append(HypothesisEntry(pattern=parts[0], panel=parts[1], observation=parts[2]))
                self.fill(len(self.hypotheses) - 1)
            elif text:
                self.app.notify("a hypothesis is: pattern | panel | observation", severity="warning")
        self.app.push_screen(AskScreen("New hypothesis", "pattern | panel | observation"), done)
