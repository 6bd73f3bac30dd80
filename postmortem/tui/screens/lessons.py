"""The lessons browser: lessons across learners grouped by pattern with counts, filtered as
you type (`pattern:x learner:y` and free text), the post-mortem behind a lesson, and the
past incidents most like the current run's."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from postmortem.diagnose.signature import of_incident
from postmortem.document.runpath import run_id_of
from postmortem.kb.commit import kb_root
from postmortem.kb.lessons import Lesson, group_by_pattern, query, read_all
from postmortem.kb.similar import find_similar, this_incident
from postmortem.tui.screens.document import DocumentScreen
from postmortem.tui.widgets.fitted_table import Col, FittedTable


class LessonsScreen(Screen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="lessons.back", tooltip="Back to the dashboard")]

    def __init__(self, root: Path, run_log=None, incident=None):
        super().__init__()
        self.root = kb_root(root)
        self.run_log, self.incident = run_log, incident
        self.lessons: list[Lesson] = read_all(self.root)
        self.similar: list[tuple[float, Path, object, list[str]]] | None = None   # None: still scoring

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: text, or pattern:fp16 learner:ana run:19-", id="filter",
                    select_on_focus=False)     # a letter typed on a table is added, not a replacement
        # the lesson takes the rest of the width; the status line shows it whole
        table = FittedTable(Col("pattern", 26, wrap=True), Col("lesson", text=True, least=30), Col("learner", 10),
                            Col("date", 10, optional=True), Col("run", 18, optional=True), id="lessons")
        table.border_title = "lessons (enter opens the post-mortem)"
        yield table
        if self.incident is not None:
            similar = FittedTable(Col("score", 5), Col("run", 18), Col("pattern", 22, wrap=True),
                                  Col("why", text=True), Col("post-mortem", 48, optional=True), id="similar")
            similar.border_title = f"past incidents like this run's {self.incident.shown_kind} at step {self.incident.step}"
            yield similar
        yield Static("", id="status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.show("")
        if self.incident is not None:
            self.find_similar()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.show(event.value)

    def on_key(self, event) -> None:
        """A character typed on a table goes to the filter: it is what the person meant."""
        box = self.query_one("#filter", Input)
        if event.is_printable and event.character and self.focused is not box:
            event.stop()
            box.focus()
            box.insert_text_at_cursor(event.character)

    def show(self, text: str) -> None:
        # the biggest pattern first, newest first inside it
        groups = group_by_pattern(query(self.lessons, text))
        counts = {pattern: len(group) for pattern, group in groups}
        rows = [r for _, group in groups for r in group]
        self.query_one("#lessons", FittedTable).set_rows(
            [(f"{r.pattern} ({counts[r.pattern]})", r.lesson, r.learner, r.date, r.run_id) for r in rows],
            keys=[f"learners/{r.learner}/{r.link}" for r in rows], cursor=0)
        self.counted = f"{len(rows)} lesson(s) in {len(counts)} pattern(s)" if rows else "no lessons match"
        self.query_one("#status", Static).update(self.counted)

    @work(thread=True, exclusive=True)
    def find_similar(self) -> None:
        """Every past post-mortem scored against this incident (documents only, but many:
        off the UI thread)."""
        mine = of_incident(self.incident, self.run_log.manifest)
        # this very incident, already written up, is left out (by its post-mortem's run id)
        found = find_similar(self.root, mine, skip=this_incident(run_id_of(self.run_log), self.incident.step))
        self.app.call_from_thread(self.show_similar, [(m.score, m.path, m.pm, m.why) for m in found])

    def show_similar(self, found) -> None:
        rows, keys = [], []
        for score, path, pm, why in found[:20]:
            same = [w.split(":")[0] for w in why if ": match" in w]
            rows.append((f"{score:.2f}", pm.run_id, pm.pattern or "-", "same " + ", ".join(same) if same else "-",
                         path.relative_to(self.root)))
            keys.append(str(path))
        if not found:
            rows, keys = [("-", "", "", "no other past post-mortem under learners/", "")], ["-"]
        self.query_one("#similar", FittedTable).set_rows(rows, keys=keys, cursor=0)
        self.similar = found

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The whole lesson of the highlighted row, which its column may cut."""
        table = event.data_table
        row = table.row_text(event.cursor_row) if isinstance(table, FittedTable) else None
        if table.id == "lessons" and row:
            self.query_one("#status", Static).update(escape(f"{self.counted} | {row[1]} ({row[2]}, {row[4]})"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if not key or key == "-":
            return
        path = Path(key) if Path(key).is_absolute() else self.root / key
        self.app.push_screen(DocumentScreen(path))
