"""The lessons browser: lessons across learners, grouped by pattern, filtered as you type."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from postmortem.kb.lessons import Lesson, read_all


class LessonsScreen(Screen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="lessons.back", tooltip="Back to the dashboard")]

    def __init__(self, root: Path):
        super().__init__()
        self.root = root
        self.lessons: list[Lesson] = read_all(root)

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: pattern, learner or text", id="filter")
        table = DataTable(id="lessons", cursor_type="row")
        table.border_title = "lessons"
        yield table
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#lessons", DataTable).add_columns("pattern", "date", "learner", "run", "lesson")
        self.show("")

    def on_input_changed(self, event: Input.Changed) -> None:
        self.show(event.value)

    def show(self, text: str) -> None:
        text = text.lower().strip()
        rows = [r for r in self.lessons
                if not text or text in f"{r.pattern} {r.learner} {r.run_id} {r.lesson}".lower()]
        rows.sort(key=lambda r: (r.pattern, r.date), reverse=True)
        counts: dict[str, int] = {}
        for r in rows:
            counts[r.pattern] = counts.get(r.pattern, 0) + 1
        rows.sort(key=lambda r: (-counts[r.pattern], r.pattern, [-ord(c) for c in r.date]))
        table = self.query_one("#lessons", DataTable)
        table.clear()
        for r in rows:
            table.add_row(f"{r.pattern} ({counts[r.pattern]})", r.date, r.learner, r.run_id, r.lesson,
                          key=f"learners/{r.learner}/{r.link}")
        self.query_one("#status", Static).update(
            f"{len(rows)} lesson(s) in {len(counts)} pattern(s)" if rows else "no lessons match")
