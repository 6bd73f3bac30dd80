"""One post-mortem rendered, as the lessons browser opens it: the front matter as a code block,
the figure as its path (a terminal shows no PNG)."""

from __future__ import annotations

import re
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Markdown

_FIGURE = re.compile(r"^!\[[^\]\n]*\]\((?P<src>[^()\s]+)\)[ \t]*$", re.M)


class DocumentScreen(Screen):
    """One post-mortem, rendered."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="document.back", tooltip="Back to the lessons")]

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as err:
            text = f"cannot read {self.path}: {err.strerror}"
        if text.startswith("---"):          # the front matter, as a code block rather than a rule
            _, front, body = text.split("---", 2)
            text = f"```yaml\n{front.strip()}\n```\n{body}"
        text = _FIGURE.sub(self._figure_line, text)
        yield Markdown(text, id="document")
        yield Footer(compact=True)

    def _figure_line(self, m) -> str:
        """A terminal shows no PNG: the figure's path instead, and whether it is there."""
        path = self.path.parent / m["src"]
        return f"**[figure: {path}]**" + ("" if path.is_file() else " (missing)")

    def on_mount(self) -> None:
        self.title = str(self.path)
