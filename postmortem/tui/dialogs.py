"""The small modal screens: the help of a panel, an incident's causes whole, one line asked
of the author, a yes or no."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static


class HelpScreen(ModalScreen):
    """What every panel of the screen below shows, the focused one first; it scrolls where it
    is taller than the terminal."""

    BINDINGS = [Binding("escape,f1,question_mark", "app.pop_screen", "Close", id="help.close",
                        tooltip="Close the help")]

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help") as scroll:
            scroll.border_title = "help: escape closes"
            yield Static(self.text, id="help-text")


class AskScreen(ModalScreen[str | None]):
    """One line from the author (a dismissal's reason, a new hypothesis); escape cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="ask.cancel", tooltip="Ask nothing")]

    def __init__(self, prompt: str, placeholder: str = ""):
        super().__init__()
        self.prompt, self.placeholder = prompt, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="ask"):
            yield Label(self.prompt)
            yield Input(placeholder=self.placeholder, id="answer")

    def on_mount(self) -> None:
        self.query_one("#answer", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """A yes or no question; y confirms, n or escape says no."""

    BINDINGS = [Binding("y", "answer(True)", "Yes", id="confirm.yes", tooltip="Yes"),
                Binding("n,escape", "answer(False)", "No", id="confirm.no", tooltip="No")]

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="ask"):
            yield Label(f"{self.question}\n\n[b]y[/b] yes   [b]n[/b] no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class CausesScreen(ModalScreen):
    """Every cause of one incident, ranked, with its evidence for and against (c or escape
    closes): the dashboard's causes pane whole, at any terminal size."""

    BINDINGS = [Binding("escape,c", "app.pop_screen", "Close", id="causes.close", tooltip="Back to the dashboard")]

    def __init__(self, title: str, text: str):
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="causes-all") as scroll:
            scroll.border_title = f"{self.title_text}: escape closes"
            yield Static(self.text, id="causes-all-text")
