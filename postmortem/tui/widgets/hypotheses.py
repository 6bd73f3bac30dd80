"""Section 2 of the editor: the ranked hypotheses, which the author reorders, dismisses with
a reason and adds to."""

from __future__ import annotations

from textual.binding import Binding

from postmortem.document.model import HypothesisEntry
from postmortem.tui.dialogs import AskScreen
from postmortem.tui.messages import HypothesesTableChanged
from postmortem.tui.widgets.fitted_table import Col, FittedTable


class HypothesesTable(FittedTable):
    """Section 2: the ranked hypotheses; the author reorders, adds and dismisses."""

    # show=False: the label above the table says them, and the editor's footer keeps its
    # workflow keys at 80 columns. No bare letters: a Tab too many lands here from a section
    # being typed, and the sentence typed on must not dismiss or add anything
    BINDINGS = [
        Binding("shift+up", "move(-1)", "Up", id="hypotheses.up", show=False,
                tooltip="Move the hypothesis up"),
        Binding("shift+down", "move(1)", "Down", id="hypotheses.down", show=False,
                tooltip="Move the hypothesis down"),
        Binding("ctrl+d,delete", "dismiss_hypothesis", "Dismiss", id="hypotheses.dismiss", show=False,
                tooltip="Dismiss with a reason (again: restore it)"),
        Binding("ctrl+n,insert", "add", "Add", id="hypotheses.add", show=False,
                tooltip="Add a hypothesis: pattern | panel | observation"),
    ]

    def __init__(self, hypotheses: list[HypothesisEntry], **kw):
        # the observation takes the rest of the width; under the table it shows whole
        super().__init__(Col("#", 2), Col("pattern", 22, wrap=True), Col("panel", 12, wrap=True),
                         Col("observation", text=True, least=36), Col("dismissed", 16, optional=True), **kw)
        self.hypotheses = list(hypotheses)

    def on_mount(self) -> None:
        self.fill()

    def fill(self, row: int | None = None) -> None:
        self.set_rows([(i, h.pattern, h.panel, h.observation, h.dismissed or "")
                       for i, h in enumerate(self.hypotheses, 1)],
                      cursor=None if row is None else max(0, min(row, len(self.hypotheses) - 1)))
        self.post_message(HypothesesTableChanged())

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
