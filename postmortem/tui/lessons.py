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
from textual.widgets import DataTable, Footer, Input, Markdown, Static

from postmortem.kb.lessons import Lesson, read_all
from postmortem.tui.widgets.cells import columns, plain


def kb_root(start: Path) -> Path:
    """The repository's root when `start` is inside one (where learners/ lives), else `start`."""
    from postmortem.kb.lessons import KBError
    from postmortem.kb.repo import open_repo
    try:
        return Path(open_repo(start).working_tree_dir)
    except KBError:
        return start


def matches(lesson: Lesson, query: str) -> bool:
    """`pattern:fp16 learner:ana spike`: each field token narrows by prefix, the rest is text."""
    words = []
    for token in query.lower().split():
        field, _, value = token.partition(":")
        if value and field in ("pattern", "learner", "run"):
            have = {"pattern": lesson.pattern, "learner": lesson.learner, "run": lesson.run_id}[field]
            if not have.lower().startswith(value):
                return False
        else:
            words.append(token)
    text = f"{lesson.pattern} {lesson.learner} {lesson.run_id} {lesson.lesson}".lower()
    return all(w in text for w in words)


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
        yield Markdown(text, id="document")
        yield Footer()

    def on_mount(self) -> None:
        self.title = str(self.path)


class LessonsScreen(Screen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="lessons.back", tooltip="Back to the dashboard")]

    def __init__(self, root: Path, run_log=None, incident=None):
        super().__init__()
        self.root = kb_root(root)
        self.run_log, self.incident = run_log, incident
        self.lessons: list[Lesson] = read_all(self.root)
        self.similar: list[tuple[float, Path, object, list[str]]] | None = None   # None: still scoring

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: text, or pattern:fp16 learner:ana run:19-", id="filter")
        table = DataTable(id="lessons", cursor_type="row")
        table.border_title = "lessons (enter opens the post-mortem)"
        yield table
        if self.incident is not None:
            similar = DataTable(id="similar", cursor_type="row")
            similar.border_title = f"past incidents like this run's {self.incident.kind} at step {self.incident.step}"
            yield similar
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        columns(self.query_one("#lessons", DataTable), pattern=22, lesson=64, learner=10, date=10, run=18)
        self.show("")
        if self.incident is not None:
            columns(self.query_one("#similar", DataTable), score=5, run=18, pattern=22, why=60,
                    **{"post-mortem": 48})
            self.find_similar()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.show(event.value)

    def show(self, query: str) -> None:
        rows = [r for r in self.lessons if matches(r, query)]
        counts: dict[str, int] = {}
        for r in rows:
            counts[r.pattern] = counts.get(r.pattern, 0) + 1
        # the biggest pattern first, newest first inside it
        rows.sort(key=lambda r: r.date, reverse=True)
        rows.sort(key=lambda r: (-counts[r.pattern], r.pattern))
        table = self.query_one("#lessons", DataTable)
        table.clear()
        for r in rows:
            table.add_row(*plain(f"{r.pattern} ({counts[r.pattern]})", r.lesson, r.learner, r.date, r.run_id),
                          key=f"learners/{r.learner}/{r.link}")
        self.counted = f"{len(rows)} lesson(s) in {len(counts)} pattern(s)" if rows else "no lessons match"
        self.query_one("#status", Static).update(self.counted)

    @work(thread=True, exclusive=True)
    def find_similar(self) -> None:
        """Every past post-mortem scored against this incident (their runs are read again
        when still on disk, so off the UI thread)."""
        from postmortem.kb.similar import compare, of_document, of_incident, past_postmortems
        mine = of_incident(self.incident, self.run_log.manifest)
        found = []
        for path, pm in past_postmortems(self.root):
            if pm.run_id == self.run_log.run_id and pm.spike_step == self.incident.step:
                continue                      # this very incident, already written up
            score, why = compare(mine, of_document(pm, self.root))
            found.append((score, path, pm, why))
        found.sort(key=lambda m: -m[0])
        self.app.call_from_thread(self.show_similar, found)

    def show_similar(self, found) -> None:
        table = self.query_one("#similar", DataTable)
        table.clear()
        for score, path, pm, why in found[:20]:
            same = [w.split(":")[0] for w in why if ": match" in w]
            table.add_row(*plain(f"{score:.2f}", pm.run_id, pm.pattern or "-",
                                 "same " + ", ".join(same) if same else "-", path.relative_to(self.root)),
                          key=str(path))
        if not found:
            table.add_row(*plain("-", "", "", "no other past post-mortem under learners/", ""), key="-")
        self.similar = found

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The whole lesson of the highlighted row, which its column may cut."""
        if event.data_table.id == "lessons" and event.data_table.row_count:
            row = event.data_table.get_row(event.row_key)
            self.query_one("#status", Static).update(escape(f"{self.counted} | {row[1]} ({row[2]}, {row[4]})"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if not key or key == "-":
            return
        path = Path(key) if Path(key).is_absolute() else self.root / key
        self.app.push_screen(DocumentScreen(path))
