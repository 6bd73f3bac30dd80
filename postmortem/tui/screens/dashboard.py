"""The dashboard: a run's panels, its incidents and the checklist walk. Drawn from the loader
process's first view (arrays and rows); the whole run and its analysis follow, after the
first paint, for the editor, the replay, the lessons and another segment's history."""

from __future__ import annotations

from rich.markup import escape
from textual import work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from postmortem.numbers import number
from postmortem.tui import focus
from postmortem.tui.dialogs import CausesScreen
from postmortem.tui.messages import RunFailed, RunHandedOver, RunRead
from postmortem.tui.session import Session
from postmortem.tui.view import PANEL_ROWS, FirstView, first_cursor, logged_steps, segment_history, series, shown_panels
from postmortem.tui.widgets.causes import CausesPane, heading, ranking
from postmortem.tui.widgets.fitted_table import Col, FittedTable
from postmortem.tui.widgets.metric_panel import MetricPanel


def incident_rows(view: FirstView) -> list[tuple]:
    """The incidents table's rows: step, kind, rise, top cause, score, metric."""
    return [(inc.step, inc.kind, f"x{inc.rise:.2f}" if inc.rise else "-", inc.top or "-",
             f"{inc.score:.2f}" if inc.score is not None else "-", inc.metric) for inc in view.incidents]


def incident_detail(row) -> str:
    step, kind, rise, top, score, metric = row
    cause = f"top cause {top} (score {score})" if top != "-" else "no convincing cause"
    return f"{kind} of {metric} at step {step}: rise {rise}, {cause}; enter marks it"


CAUSES_ROWS = 34        # a terminal at least this tall shows the causes pane; a shorter one has c


def check_rows(view: FirstView) -> list[tuple[str, str, str]]:
    """The checks table's rows: what the reader noticed first (a cut last line, ...), then
    tree A and tree B."""
    marks = {"pass": "ok", "fail": "FAIL", "skipped": "-"}
    return [("read", "warn", w) for w in view.warnings] + [
        (c.id, marks[c.status], f"{c.detail} -> {c.leaf}" if c.status == "fail" and c.leaf else c.detail)
        for c in view.checks]


def checks_title(view: FirstView) -> str:
    said = len(view.warnings)
    return f"checks: {said} warning{'s' if said > 1 else ''}, tree A, B" if said else "checks (tree A, tree B)"


class DashboardScreen(Screen):
    # The footer shows the workflow, in the order it is done, and fits 80 columns: write,
    # replay, causes, lessons, the incident picked, then the App's help and quit. Every other
    # key is in the palette (ctrl+p) and in F1. left/right move the step cursor wherever the
    # focus is on the dashboard (priority: before a table's horizontal scroll).
    BINDINGS = [
        Binding("e,w", "edit", "Write", id="edit",
                tooltip="Write this incident's post-mortem: the seven sections, saved as you type"),
        Binding("r", "replay", "Replay", id="replay",
                tooltip="Replay the steps around the incident in counterfactual arms"),
        Binding("c", "causes", "Causes", id="causes",
                tooltip="The highlighted incident's causes ranked, with the evidence for and against"),
        Binding("l", "app.lessons", "Lessons", id="lessons", tooltip="Lessons across learners, by pattern"),
        # z is said by F1 on every chart and in the palette: the footer keeps c at 80 columns
        Binding("z", "zoom", "Zoom", id="zoom", show=False,
                tooltip="Zoom every panel to the incident window and back"),
        Binding("n", "incident(1)", "Incident", id="incident.next", key_display="n/p",
                tooltip="Mark the next incident (p: the previous one)"),
        Binding("p", "incident(-1)", "Prev incident", id="incident.prev", show=False,
                tooltip="Mark the previous incident"),
        Binding("q", "app.quit", "Quit", id="quit.q", show=False, tooltip="Leave postmortem"),
        Binding("left", "move(-1)", "Step -", id="cursor.left", show=False, priority=True,
                tooltip="Cursor one step left"),
        Binding("right", "move(1)", "Step +", id="cursor.right", show=False, priority=True,
                tooltip="Cursor one step right"),
        Binding("shift+left", "move(-10)", "Step -10", id="cursor.left10", show=False, priority=True,
                tooltip="Cursor 10 steps left"),
        Binding("shift+right", "move(10)", "Step +10", id="cursor.right10", show=False, priority=True,
                tooltip="Cursor 10 steps right"),
        Binding("left_square_bracket", "segment(-1)", "Segment -", id="segment.prev", key_display="[",
                show=False, tooltip="Draw the run up to the end of the segment before (a resume's)"),
        Binding("right_square_bracket", "segment(1)", "Segment +", id="segment.next", key_display="]",
                show=False, tooltip="Draw the run up to the end of the next segment"),
    ]

    # the focus starts on the incidents whether the panels came in the first frame or after
    AUTO_FOCUS = "#incidents"

    def __init__(self, session: Session, loader=None):
        super().__init__()
        self.session = session
        self.loader = loader                   # a tui.loader.Loader reading the run, or None: read
        self.view: FirstView | None = None     # what was painted first
        self.waiting: list = []                # actions asked for before the run was handed over
        self.cursor: int | None = None
        self.zoomed = False
        self.segment = 0                       # the panels draw the run up to this segment's end
        self.span: tuple[int, int] | None = None   # the steps they draw: every panel's x axis
        self.failed: str | None = None         # the loader's one line, when it failed at once

    def compose(self) -> ComposeResult:
        # a view already here (kept from the last opening) is drawn in the first frame
        view = self.session.view or self.ready_view()
        panels = self.panels_of(view) if view else []
        status = "reading..."
        if view is not None:
            self.view, self.segment, self.session.current = view, view.segment, view.largest
            self.span = logged_steps(view)
            self.cursor = first_cursor(view)
            status = self.status_text(panels)
        yield Header(show_clock=False)
        with Horizontal(id="body"):
            yield Vertical(*panels, id="panels")
            with Vertical(id="side"):
                # the kind and rise tell the incidents apart first; score and metric when room is
                incidents = FittedTable(Col("step", 8), Col("kind", 10), Col("rise", 7),
                                        Col("top cause", text=True, wrap=True, least=9),
                                        Col("score", 5, optional=True), Col("metric", 10, optional=True),
                                        id="incidents")
                incidents.border_title = "incidents"
                yield incidents
                causes = CausesPane(id="causes")
                causes.display = self.app.size.height >= CAUSES_ROWS
                yield causes
                checks = FittedTable(Col("node", 5), Col("", 4), Col("detail", text=True), id="checks")
                checks.border_title = checks_title(view) if view is not None else "checks (tree A, tree B)"
                yield checks
                # the highlighted row whole, wrapped (the first frame already holds it)
                rows = incident_rows(view) if view is not None else []
                yield Static(escape(incident_detail(rows[view.largest])) if view is not None and rows else "",
                             id="row-detail")
        yield Static(status, id="status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        if self.session.view is not None:            # handed a session already read, or ready
            self.show(self.session.view, composed=True)
        elif self.failed is not None:
            self.post_message(RunFailed(self.failed))
        else:
            self.load()

    def ready_view(self) -> FirstView | None:
        """The loader's first view when it has already sent it (a view kept from the last
        opening of the run comes at once), else None: it is waited for off the UI thread."""
        if self.loader is None or not self.loader.ready():
            return None
        kind, *rest = self.loader.first()
        if kind != "view":
            self.failed = rest[0]
            return None
        self.session.view = rest[0]
        return rest[0]

    # -- the run: first view, then the whole of it ----------------------------------------

    @work(thread=True, exclusive=True)
    def load(self) -> None:
        """Wait for the loader process's first view, off the UI thread."""
        kind, *rest = self.loader.first()
        self.post_message(RunRead(rest[0]) if kind == "view" else RunFailed(rest[0]))

    def on_run_read(self, message: RunRead) -> None:
        self.session.view = message.view
        self.show(message.view)

    def on_run_failed(self, message: RunFailed) -> None:
        if message.painted:
            self.notify(f"the run could not be handed over: {message.message}", severity="error")
            return
        # nothing was painted: the app leaves, and `postmortem tui` says the one line (exit 2)
        self.session.error = message.message
        self.app.exit(return_code=2)

    def panels_of(self, view: FirstView) -> list[MetricPanel]:
        """The run's panels, then as many per-layer grad norms as the height has room for;
        each with the plot the loader drew for it, if any."""
        named = len(view.panels)           # the run's own panels have ids, the layers' do not
        return [MetricPanel(panel, column, steps, values, log_scale=log_scale, ghost=gray,
                            first=view.drawings.get(column), id=f"panel-{panel}" if i < named else None)
                for i, (panel, column, steps, values, log_scale, gray)
                in enumerate(shown_panels(view, self.app.size.height))]

    def show(self, view: FirstView, composed: bool = False, fetch: bool = True):
        """Paint `view` (its panels mounted unless `composed`); then fetch the whole run, unless
        told not to (it is here). Returns the panels' mounting, to await, or None."""
        self.view = view
        self.segment = view.segment
        self.span = logged_steps(view)
        mounting = None if composed else self.query_one("#panels").mount(*self.panels_of(view))
        table = self.query_one("#incidents", FittedTable)
        # none said where the eye looks for them, not only on the status line
        focus.title(table, "incidents" if view.incidents else "incidents: none")
        table.set_rows(incident_rows(view))
        checks = self.query_one("#checks", FittedTable)
        focus.title(checks, checks_title(view))
        checks.set_rows(check_rows(view))
        self.fit_panels()
        self.session.current = view.largest
        self.mark(view.largest)
        if fetch and self.session.log is None:
            self.call_next(self.fetch_after_paint, mounting)
        return mounting

    async def fetch_after_paint(self, mounting=None) -> None:
        """The whole run fetched once the frame holding the panels is drawn: its unpickling
        imports pandas, and a thread doing that holds the interpreter while the frame is made."""
        if mounting is not None:
            await mounting
        self.call_after_refresh(self.fetch_run)

    @work(thread=True, exclusive=True, group="log")
    def fetch_run(self) -> None:
        kind, *rest = self.loader.run()
        self.post_message(RunHandedOver(*rest) if kind == "run" else RunFailed(rest[0], painted=True))

    async def on_run_handed_over(self, message: RunHandedOver) -> None:
        if message.view is not None:          # what was painted was kept from before, and is stale
            self.session.view = message.view
            await self.query_one("#panels").remove_children()
            # the fresh panels are in before the run is handed over, and both before the keys
            # that waited for the run act
            mounting = self.show(message.view, fetch=False)
            if mounting is not None:
                await mounting
        self.have_run(message.log, message.analysis)

    def have_run(self, log, analysis) -> None:
        """The whole run and its analysis (after the first paint): the editor, the replay
        and another segment's history need them."""
        self.session.log, self.session.analysis = log, analysis
        if self.incident is not None and self.incident.segment != self.segment:   # n/p went there meanwhile
            self.mark(self.session.current)
        waiting, self.waiting = self.waiting, []
        for action in waiting:
            action()

    def when_read(self, action) -> bool:
        """Whether the whole run is here; if not, `action` (a key pressed in the moment between
        the first paint and the hand-over) runs once it is."""
        if self.session.log is not None:
            return True
        if action not in self.waiting:
            self.waiting.append(action)
            self.notify("reading the run: a moment", timeout=2)
        return False

    def view_segment(self, segment: int) -> None:
        """The panels draw the run as the model lived it up to the end of `segment`: after a
        resume the rewound steps of the earlier segment are left out, so an incident in a
        segment that was later rolled back is drawn with its own history."""
        log, view = self.session.log, self.view
        if log is None or view is None:      # asked for only once the run is handed over
            return
        self.segment = segment
        history = segment_history(log, segment) if view.resumed else log.frame
        spans = []
        for panel in self.query(MetricPanel):
            panel.set_data(*series(log, history, panel.column))
            if panel.id and len(panel.steps):       # the run's own panels (as logged_steps)
                spans.append((int(panel.steps[0]), int(panel.steps[-1])))
        self.span = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None

    def on_resize(self, event) -> None:
        self.query_one("#causes").display = self.app.size.height >= CAUSES_ROWS
        self.fit_panels()

    def fit_panels(self) -> None:
        """Share the height among the panels, none under 9 rows; past that they scroll
        (at 80x24 two panels show at once)."""
        panels = self.query(MetricPanel)
        if not panels:
            return
        room = self.query_one("#panels").size.height or (self.size.height - 3)
        height = max(PANEL_ROWS, room // len(panels))
        for panel in panels:
            panel.styles.height = height

    # -- the incident marked --------------------------------------------------------------

    @property
    def incident(self):
        """The row of the incident marked (what the dashboard draws of it), or None."""
        if self.view is None or not self.view.incidents:
            return None
        return self.view.incidents[self.session.current]

    def mark(self, index: int, follow: bool = True) -> None:
        """Mark incident `index` on every panel; `follow`: draw its segment's history (not
        when the user has just moved to another segment)."""
        inc = None
        if self.view is not None and self.view.incidents:
            self.session.current = index % len(self.view.incidents)
            inc = self.incident
            if follow and inc.segment != self.segment and self.session.log is not None:
                self.view_segment(inc.segment)
            table = self.query_one("#incidents", FittedTable)
            if table.cursor_row != self.session.current:          # n/p: the list follows
                table.point_at(self.session.current)
        self.show_causes(self.session.current)
        if self.cursor is None:           # on the incident (drawn with it), else the last step
            self.cursor = inc.step if inc is not None else first_cursor(self.view) if self.view is not None else None
        for panel in self.query(MetricPanel):
            panel.marks = [inc.step] if inc else []
            panel.window = self._window() if self.zoomed else None
            panel.span = self.span
            panel.cursor = self.cursor
            panel.redraw()
        self.update_status()

    def _window(self) -> tuple[int, int] | None:
        """The zoom: 100 steps before the incident to 50 after its peak, within the steps logged."""
        inc = self.incident
        if inc is None:
            return None
        lo, hi = inc.step - 100, max(inc.step, inc.peak_step or inc.step) + 50
        first, last = self.span or (lo, hi)
        return max(lo, first), max(min(hi, last), max(lo, first) + 1)


    def update_status(self) -> None:
        if self.view is not None:
            status, text = self.query_one("#status", Static), self.status_text(self.query(MetricPanel))
            if str(status.content) != text:      # the same: nothing to repaint
                # layout=False: one line of fixed height; a relayout would repaint every panel again
                status.update(text, layout=False)

    def status_text(self, panels) -> str:
        """The incident marked, the cursor and each panel's value there."""
        view = self.view
        if view is None:                 # nothing painted yet
            return "reading..."
        values = "  ".join(f"{p.column}={_at(p.value_at(self.cursor), self.cursor)}" for p in panels
                           if self.cursor is not None)
        at = f"  cursor {self.cursor}  {values}" if self.cursor is not None else ""
        drawn = f"  {self.segment_text()}" if view.resumed else ""
        if not view.incidents:
            if not any(column == "loss" for _, column, *_ in view.panels):     # nothing judged it
                return (f"{view.run_id}: no incident in what was read, but no loss was read "
                        f"(--loss COLUMN names it){drawn}{at}")
            return f"{view.run_id}: no incident (no NaN, no spike, no divergence){drawn}{at}"
        inc, current = self.incident, self.session.current
        which = ", the largest" if len(view.incidents) > 1 and current == view.largest else ""
        return (f"{inc.kind} at step {inc.step} ({current + 1}/{len(view.incidents)}{which}){drawn}"
                f"  cursor {self.cursor}  {values}")

    def segment_text(self) -> str:
        """Which segment of a resumed or appended run the panels draw, and the keys to the others."""
        segments = self.view.segments if self.view is not None else []
        ids = [s for s, _, _ in segments]
        if self.segment not in ids:
            return f"segment {self.segment}"
        first, last = self.span or segments[ids.index(self.segment)][1:]
        return f"drawn: segment {ids.index(self.segment) + 1}/{len(ids)}, steps {first}-{last} ([ ] others)"

    # -- actions ----------------------------------------------------------------------------

    def action_zoom(self) -> None:
        self.zoomed = not self.zoomed
        self.mark(self.session.current)

    def action_segment(self, delta: int) -> None:
        """Draw the run up to the end of another segment (a resumed or appended run's)."""
        ids = [s for s, _, _ in self.view.segments] if self.view is not None else []
        if len(ids) < 2:
            self.notify("the run has one segment", timeout=2)
            return
        if not self.when_read(lambda: self.action_segment(delta)):
            return
        index = min(max(ids.index(self.segment) + delta if self.segment in ids else 0, 0), len(ids) - 1)
        if ids[index] == self.segment:
            self.notify(f"segment {index + 1}/{len(ids)} is the {'first' if delta < 0 else 'last'}", timeout=2)
            return
        self.view_segment(ids[index])
        if self.span is not None and self.cursor is not None:
            self.cursor = min(max(self.cursor, self.span[0]), self.span[1])
        self.mark(self.session.current, follow=False)

    def action_move(self, delta: int) -> None:
        if self.cursor is None:
            return
        first, last = self.span or (self.cursor + delta, self.cursor + delta)
        self.cursor = min(max(self.cursor + delta, first), last)
        for panel in self.query(MetricPanel):
            panel.cursor = self.cursor
            panel.redraw()
        self.update_status()

    def action_incident(self, delta: int) -> None:
        self.cursor = None
        self.mark(self.session.current + delta)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        table = event.data_table
        if isinstance(table, FittedTable) and (
                table.has_focus or (table.id == "incidents" and not isinstance(self.focused, FittedTable))):
            self.show_row(table)
        if table.id == "incidents":
            self.show_causes(event.cursor_row)

    def highlighted(self):
        """The incidents table's highlighted row (an IncidentRow), or None."""
        if self.view is None or not self.view.incidents:
            return None
        row = self.query_one("#incidents", DataTable).cursor_row
        return self.view.incidents[row if 0 <= row < len(self.view.incidents) else self.session.current]

    def show_causes(self, index: int) -> None:
        if self.view is not None and self.view.incidents and 0 <= index < len(self.view.incidents):
            self.query_one("#causes", CausesPane).show(self.view.incidents[index])
        else:
            self.query_one("#causes", CausesPane).show(None)

    def action_causes(self) -> None:
        """Every cause of the highlighted incident, ranked, on its own screen."""
        row = self.highlighted()
        self.app.push_screen(CausesScreen(heading(row), escape(ranking(row))))

    def on_descendant_focus(self, event) -> None:
        if isinstance(event.widget, FittedTable):
            self.show_row(event.widget)

    def show_row(self, table: FittedTable) -> None:
        """The highlighted incident or check whole, under the tables: their columns cut it."""
        row = table.row_text(table.cursor_row)
        if row is None:
            return
        if table.id == "incidents":
            text = incident_detail(row)
        else:
            node, mark, detail = row
            text = f"{node} {mark}: {detail}"
        shown = self.query_one("#row-detail", Static)
        if str(shown.content) != escape(text):       # the same text: no relayout, no repaint
            shown.update(escape(text))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "incidents":
            self.cursor = None
            self.mark(event.cursor_row)

    def system_commands(self):
        """The palette (ctrl+p) knows the dashboard's own commands besides Textual's."""
        yield SystemCommand("Zoom to the incident", "Zoom every panel to the incident window and back",
                            self.action_zoom)
        yield SystemCommand("Next incident", "Mark the next incident on every panel",
                            lambda: self.action_incident(1))
        yield SystemCommand("Previous incident", "Mark the previous incident", lambda: self.action_incident(-1))
        yield SystemCommand("Causes", "The highlighted incident's causes ranked, with their evidence",
                            self.action_causes)
        yield SystemCommand("Lessons", "Lessons across learners, grouped by pattern", self.action_lessons)
        yield SystemCommand("Next segment", "Draw the run up to the end of the next segment (a resume's)",
                            lambda: self.action_segment(1))
        yield SystemCommand("Previous segment", "Draw the run up to the end of the segment before",
                            lambda: self.action_segment(-1))
        yield SystemCommand("Replay", "Replay the steps around the incident in counterfactual arms",
                            self.action_replay)
        yield SystemCommand("Write the post-mortem", "The guided editor for the marked incident",
                            self.action_edit)

    def action_edit(self) -> None:
        if not self.when_read(self.action_edit):
            return
        session = self.session
        if session.log is None or session.analysis is None or session.incident is None:
            self.notify("no incident to write about", severity="warning")
            return
        from postmortem.document.draft import draft
        from postmortem.tui.screens.editor import EditorScreen
        # the learner of kb.settings, never the OS user: nobody named, the commit screen asks
        pm = draft(session.log, session.learner or "", session.incident.step,
                   incidents=session.analysis.incidents)
        self.app.push_screen(EditorScreen(pm, session))

    def action_replay(self) -> None:
        if not self.when_read(self.action_replay):
            return
        if self.session.incident is None:
            self.notify("no incident to replay", severity="warning")
            return
        from postmortem.tui.screens.replay import ReplayScreen

        def kept(result) -> None:
            if result:
                self.notify(f"replay evidence kept: {len(result.evidence)} rows; "
                            f"e writes the post-mortem with it")
        self.app.push_screen(ReplayScreen(self.session, self.session.incident), kept)

    def action_lessons(self) -> None:
        if not self.when_read(self.action_lessons):
            return
        from postmortem.tui.screens.lessons import LessonsScreen
        self.app.push_screen(LessonsScreen(self.session.kb_root, self.session.log, self.session.incident))


def _at(logged: tuple[float, int] | None, cursor: int) -> str:
    """A panel's value at the cursor, as the document and the editor write numbers; when
    nothing was logged at the cursor's step, the last value before it and its step."""
    if logged is None:
        return "-"
    value, step = logged
    return number(value) if step == cursor else f"{number(value)}@{step}"
