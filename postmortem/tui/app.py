"""`postmortem tui RUN`: the dashboard of a run, its incidents and the checklist walk."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Static

from postmortem.tui.view import PANELS, FirstView, first_view, segment_history, series
from postmortem.tui.widgets.cells import columns, plain
from postmortem.tui.widgets.panel import MetricPanel

HELP = {
    "MetricPanel": "A panel: the metric over steps, the incident in red, the cursor in blue. "
                   "left/right move the cursor (shift: 10x), z zooms to the incident and back.",
    "incidents": "The incidents analyze found; enter picks one, the panels mark it.",
    "checks": "Tree A and tree B: every node pass, fail (and the leaf it points to) or skipped, and why.",
    "hypotheses": "Section 2, ranked by the diagnosis and the replay: shift+up/down reorder, d dismisses "
                  "with a reason (d again restores), a adds one as pattern | panel | observation. "
                  "Under the table: the highlighted one whole, what the run shows for (+) and against (-) "
                  "it, and what would tell it apart.",
    "remedies": "The usual remedies of the pattern you named: enter adds the highlighted one to section 5.",
    "arms": "Each arm replays the same steps from the same checkpoint with one cause taken away; "
            "space toggles an arm, r runs the checked ones, escape cancels.",
    "evidence": "What the replay found, a row as it arrives: the panel, the causes it favors and rules out; "
                "the highlighted row shows whole under the table. Escape takes them to the post-mortem.",
    "lessons": "Every learner's lessons by pattern; type in the filter (pattern:x learner:y text), "
               "enter opens the post-mortem behind a lesson.",
    "similar": "Past post-mortems scored against this incident field by field; enter opens one.",
}


class ErrorScreen(ModalScreen):
    """A run that cannot be read: the one-line reason, not a traceback."""

    BINDINGS = [Binding("escape,q", "app.quit", "Quit", id="error.quit")]

    def __init__(self, message: str):
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        yield Static(f"[b]Cannot read this run[/b]\n\n{self.message}\n\nPress q to quit.", id="error")


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,f1,question_mark", "app.pop_screen", "Close", id="help.close")]

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        yield Static(self.text, id="error")


class PostmortemApp(App):
    """Dashboard: panels, incidents, checks. The run is read and analyzed in a worker."""

    CSS_PATH = Path(__file__).parent / "app.tcss"     # absolute: subclasses elsewhere find it too
    TITLE = "postmortem"
    # left/right move the step cursor wherever the focus is on the dashboard (priority:
    # before a table's horizontal scroll); on other screens they are the widgets' own.
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", tooltip="Leave postmortem"),
        Binding("q", "quit_dashboard", "Quit", id="quit.q", show=False, tooltip="Leave postmortem"),
        Binding("z", "zoom", "Zoom", id="zoom", tooltip="Zoom every panel to the incident window and back"),
        Binding("left", "move(-1)", "Step -", id="cursor.left", show=False, priority=True,
                tooltip="Cursor one step left"),
        Binding("right", "move(1)", "Step +", id="cursor.right", show=False, priority=True,
                tooltip="Cursor one step right"),
        Binding("shift+left", "move(-10)", "Step -10", id="cursor.left10", show=False, priority=True,
                tooltip="Cursor 10 steps left"),
        Binding("shift+right", "move(10)", "Step +10", id="cursor.right10", show=False, priority=True,
                tooltip="Cursor 10 steps right"),
        Binding("n", "incident(1)", "Next incident", id="incident.next", tooltip="Mark the next incident"),
        Binding("p", "incident(-1)", "Prev incident", id="incident.prev", tooltip="Mark the previous incident"),
        Binding("f1,question_mark", "help", "Help", id="help", tooltip="Explain the focused panel"),
        Binding("t", "toggle_theme", "Theme", id="theme", tooltip="Light or dark theme"),
        Binding("l", "lessons", "Lessons", id="lessons", tooltip="Lessons across learners, by pattern"),
        Binding("e", "edit", "Write post-mortem", id="edit",
                tooltip="The seven sections of this incident's post-mortem, saved as you type"),
        Binding("r", "replay", "Replay", id="replay",
                tooltip="Replay the steps around the incident in counterfactual arms"),
    ]

    def __init__(self, run: str, format: str | None = None, kb_root: Path | None = None,
                 device: str = "auto", against: list[str] = (), loader=None):
        super().__init__()
        self.run_path, self.format, self.device = run, format, device
        self.loader = loader                   # a tui.loader.Loader already reading the run, or None
        self.waiting: list = []                # actions asked for before the run was handed over
        self.run_id = ""
        self.against = list(against)           # other runs over the same data (analyze --against)
        self.ghost = None                      # the first one's loss, drawn in gray on the loss panel
        self.kb_root = kb_root or Path.cwd()
        self.runlog = None
        self.analysis = None
        self.current = 0
        self.cursor: int | None = None
        self.zoomed = False
        self.replays: dict = {}     # incident step -> the last replay's result (a ReplayResult)
        self.timings: dict[str, float] = {}    # the file read's seconds, for benchmarks/bench_tui.py
        self.error: str | None = None          # why the run could not be read
        self.largest = 0                       # index of the incident shown first
        self.segment = 0                       # the panels draw the run up to this segment's end
        self.resumed = False                   # more than one segment

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="body"):
            yield Vertical(id="panels")
            with Vertical(id="side"):
                incidents = DataTable(id="incidents", cursor_type="row")
                incidents.border_title = "incidents"
                yield incidents
                checks = DataTable(id="checks", cursor_type="row")
                checks.border_title = "checks (tree A, tree B)"
                yield checks
        yield Static("reading...", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.run_path
        self.load()

    @work(thread=True, exclusive=True)
    def load(self) -> None:
        """Read and analyze off the UI thread (or take what the loader process made); the
        results come back through call_from_thread: the arrays to draw first, then the run."""
        if self.loader is not None:
            # pydantic, to unpickle the analysis: imported while the child still works
            import postmortem.diagnose.models  # noqa: F401
            kind, *rest = self.loader.first()
            if kind == "error":
                return self._unreadable(rest[0])
            self.call_from_thread(self.show, *rest)         # which asks for the run once painted
            return
        from postmortem.diagnose.analyze import analyze
        from postmortem.run import RunReadError, read_run
        try:
            started = time.perf_counter()
            log = read_run(self.run_path, format=self.format)
            read_s = time.perf_counter() - started
            others = [read_run(other) for other in self.against]
            result = analyze(log, against=others)
        except RunReadError as err:
            return self._unreadable(str(err))
        self.call_from_thread(self.have_log, log)
        self.call_from_thread(self.show, first_view(log, result, others, read_s), result)

    def _unreadable(self, message: str) -> None:
        self.error = message
        self.call_from_thread(self.push_screen, ErrorScreen(message))

    def show(self, view: FirstView, result) -> None:
        self.analysis, self.run_id = result, view.run_id
        self.timings["read_s"] = view.read_s
        self.resumed, self.largest, self.segment = view.resumed, view.largest, view.segment
        self.ghost = view.ghost
        panels = self.query_one("#panels")
        for panel, column, steps, values, log_scale in view.panels:
            panels.mount(MetricPanel(panel, column, steps, values, log_scale=log_scale,
                                     ghost=self.ghost if panel == "loss" else None, id=f"panel-{panel}"))
        room = max(0, (self.size.height - 10) // 9 - len(panels.children))   # ~9 rows a panel
        for name, steps, values in view.layers[:room]:
            panels.mount(MetricPanel("grad-norm", name, steps, values, log_scale=True))
        table = self.query_one("#incidents", DataTable)
        # what tells the incidents apart first: at 80 columns step, kind and rise show
        widest = max((len(str(i.step)) for i in result.incidents), default=4)
        columns(table, step=max(4, widest), kind=10, rise=6, **{"top cause": 22}, score=5, metric=10)
        if not result.incidents:       # said where the eye looks for them, not only on the status line
            table.border_title = "incidents: none"
        for inc in result.incidents:
            top = inc.hypotheses[0] if inc.hypotheses else None
            table.add_row(*plain(inc.step, inc.kind, f"x{inc.rise:.2f}" if inc.rise else "-",
                                 top.pattern if top else "-", f"{top.score:.2f}" if top else "-", inc.metric))
        checks = self.query_one("#checks", DataTable)
        columns(checks, node=5, **{"": 4}, detail=90)
        marks = {"pass": "ok", "fail": "FAIL", "skipped": "-"}
        for c in result.checks:
            leaf = f" -> {c.leaf}" if c.status == "fail" and c.leaf else ""
            checks.add_row(*plain(c.id, marks[c.status], f"{c.detail}{leaf}"))
        self.fit_panels()
        self.mark(self.largest)
        if self.runlog is None and self.loader is not None:
            self.call_after_refresh(self.fetch_log)       # after the first paint: it imports pandas

    @work(thread=True, exclusive=True, group="log")
    def fetch_log(self) -> None:
        log = self.loader.log()
        if isinstance(log, str):
            self.call_from_thread(self.notify, f"the run could not be handed over: {log}", severity="error")
            return
        self.call_from_thread(self.have_log, log)

    def have_log(self, log) -> None:
        """The whole run (after the first paint when a loader process read it): the editor,
        the replay and another segment's history need it."""
        self.runlog = log
        inc = self.incident
        if inc is not None and inc.segment != self.segment:     # n/p went to another segment meanwhile
            self.mark(self.current)
        waiting, self.waiting = self.waiting, []
        for action in waiting:
            action()

    def when_read(self, action) -> bool:
        """Whether the whole run is here; if not, `action` (a key pressed in the moment between
        the first paint and the hand-over) runs once it is."""
        if self.runlog is not None:
            return True
        if action not in self.waiting:
            self.waiting.append(action)
            self.notify("reading the run: a moment", timeout=2)
        return False

    def view_segment(self, segment: int) -> None:
        """The panels draw the run as the model lived it up to the end of `segment`: after a
        resume the rewound steps of the earlier segment are left out, so an incident in a
        segment that was later rolled back is drawn with its own history."""
        log = self.runlog
        self.segment = segment
        history = segment_history(log, segment) if self.resumed else log.frame
        for panel in self.query(MetricPanel):
            panel.set_data(*series(history, panel.column))

    def on_resize(self, event) -> None:
        self.fit_panels()

    def fit_panels(self) -> None:
        """Share the height among the panels, none under 9 rows; past that they scroll
        (at 80x24 two panels show at once)."""
        panels = self.query(MetricPanel)
        if not panels:
            return
        room = self.query_one("#panels").size.height or (self.size.height - 3)
        height = max(9, room // len(panels))
        for panel in panels:
            panel.styles.height = height

    # -- state ------------------------------------------------------------------------

    @property
    def incident(self):
        if not self.analysis or not self.analysis.incidents:
            return None
        return self.analysis.incidents[self.current]

    def incident_at(self, step: int | None):
        if not self.analysis:
            return None
        return next((i for i in self.analysis.incidents if i.step == step), None)

    def mark(self, index: int) -> None:
        inc = None
        if self.analysis and self.analysis.incidents:
            self.current = index % len(self.analysis.incidents)
            inc = self.incident
            if inc.segment != self.segment and self.runlog is not None:
                self.view_segment(inc.segment)
            table = self.query_one("#incidents", DataTable)
            if table.cursor_row != self.current:          # n/p: the list follows
                table.move_cursor(row=self.current)
        for panel in self.query(MetricPanel):
            panel.marks = [inc.step] if inc else []
            panel.window = self._window() if self.zoomed else None
            panel.cursor = self.cursor
            panel.redraw()
        self.cursor = inc.step if inc and self.cursor is None else self.cursor
        self.update_status()

    def _window(self) -> tuple[int, int] | None:
        inc = self.incident
        if inc is None:
            return None
        return inc.step - 100, max(inc.step, inc.symptoms.peak_step or inc.step) + 50

    def update_status(self) -> None:
        status = self.query_one("#status", Static)
        if self.analysis is None:
            return
        if not self.analysis.incidents:
            status.update(f"{self.run_id}: no incident (no NaN, no spike, no divergence)")
            return
        inc = self.incident
        values = "  ".join(f"{p.column}={_fmt(p.value_at(self.cursor))}" for p in self.query(MetricPanel)
                           if self.cursor is not None)
        # layout=False: one line of fixed height; a relayout would repaint every panel again
        which = ", the largest" if len(self.analysis.incidents) > 1 and self.current == self.largest else ""
        if self.resumed:
            which += f", segment {self.segment}"
        status.update(f"{inc.kind} at step {inc.step} ({self.current + 1}/{len(self.analysis.incidents)}{which})"
                      f"  cursor {self.cursor}  {values}", layout=False)

    # -- actions ----------------------------------------------------------------------

    def action_zoom(self) -> None:
        self.zoomed = not self.zoomed
        self.mark(self.current)

    def action_move(self, delta: int) -> None:
        if self.cursor is None:
            return
        self.cursor += delta
        for panel in self.query(MetricPanel):
            panel.cursor = self.cursor
            panel.redraw()
        self.update_status()

    def action_incident(self, delta: int) -> None:
        self.cursor = None
        self.mark(self.current + delta)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "incidents":
            self.cursor = None
            self.mark(event.cursor_row)

    def action_help(self) -> None:
        focused = self.focused
        key = type(focused).__name__ if isinstance(focused, MetricPanel) else getattr(focused, "id", None)
        self.push_screen(HelpScreen(HELP.get(key, "q quits, z zooms to the incident, n/p pick the incident, "
                                                  "left/right move the cursor, t switches the theme.")))

    DASHBOARD_ACTIONS = {"zoom", "move", "incident", "edit", "replay", "quit_dashboard"}

    def action_quit_dashboard(self) -> None:
        self.exit()

    def check_action(self, action: str, parameters) -> bool | None:
        """The dashboard's keys act (and show in the footer) on the dashboard only."""
        if action in self.DASHBOARD_ACTIONS and len(self.screen_stack) > 1:
            return False
        return True

    def get_system_commands(self, screen):
        """The palette (ctrl+p) knows the app's own commands besides Textual's."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Zoom to the incident", "Zoom every panel to the incident window and back",
                            self.action_zoom)
        yield SystemCommand("Next incident", "Mark the next incident on every panel",
                            lambda: self.action_incident(1))
        yield SystemCommand("Previous incident", "Mark the previous incident", lambda: self.action_incident(-1))
        yield SystemCommand("Lessons", "Lessons across learners, grouped by pattern", self.action_lessons)
        yield SystemCommand("Replay", "Replay the steps around the incident in counterfactual arms",
                            self.action_replay)
        yield SystemCommand("Write the post-mortem", "The guided editor for the marked incident",
                            self.action_edit)

    def action_edit(self) -> None:
        if not self.when_read(self.action_edit):
            return
        if self.incident is None:
            self.notify("no incident to write about", severity="warning")
            return
        from postmortem.document.draft import draft
        from postmortem.tui.editor import EditorScreen
        import getpass
        pm = draft(self.runlog, getpass.getuser() or "me", self.incident.step, incidents=self.analysis.incidents)
        self.push_screen(EditorScreen(pm, self.kb_root, self.runlog))

    def action_replay(self) -> None:
        if not self.when_read(self.action_replay):
            return
        if self.incident is None:
            self.notify("no incident to replay", severity="warning")
            return
        from postmortem.tui.replay import ReplayScreen
        step = self.incident.step

        def keep(result) -> None:
            if result:
                self.replays[step] = result
                self.notify(f"replay evidence kept: {len(result.evidence)} rows; "
                            f"e writes the post-mortem with it")
        self.push_screen(ReplayScreen(self.runlog, self.incident, self.device), keep)

    def action_lessons(self) -> None:
        if not self.when_read(self.action_lessons):
            return
        from postmortem.tui.lessons import LessonsScreen
        self.push_screen(LessonsScreen(self.kb_root, self.runlog, self.incident))

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme != "textual-light" else "textual-dark"


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if np.isfinite(v) else str(v)


def run(path: str, format: str | None = None, device: str = "auto", against: list[str] = (),
        loader=None) -> int:
    """Run the app; a run that could not be read leaves its one line on stderr and exit code 2."""
    app = PostmortemApp(path, format, device=device, against=against, loader=loader)
    try:
        app.run()
    finally:
        if loader is not None:
            loader.close()
    if app.error:
        print(f"postmortem: error: {app.error}", file=sys.stderr)
        return 2
    return app.return_code or 0


if __name__ == "__main__":  # pragma: no cover
    run(sys.argv[1] if len(sys.argv) > 1 else str(Path.cwd()))
