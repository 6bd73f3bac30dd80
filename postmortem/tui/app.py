"""`postmortem tui RUN`: the App owns the configuration, the theme, the help and the palette,
and pushes the dashboard; what the screens share lives in a Session."""

from __future__ import annotations

import sys
from pathlib import Path

from textual.app import App
from textual.binding import Binding

from postmortem.tui.dialogs import HelpScreen
from postmortem.tui.screens.dashboard import DashboardScreen
from postmortem.tui.session import Session
from postmortem.tui.widgets.metric_panel import MetricPanel

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


class PostmortemApp(App):
    """The run is read by a loader process (started here when none was handed in), or
    handed in already read as a Session (`Session.read`)."""

    CSS_PATH = Path(__file__).parent / "app.tcss"     # absolute: subclasses elsewhere find it too
    TITLE = "postmortem"
    DASHBOARD = DashboardScreen
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", tooltip="Leave postmortem"),
        Binding("f1,question_mark", "help", "Help", id="help", tooltip="Explain the focused panel"),
        Binding("t", "toggle_theme", "Theme", id="theme", tooltip="Light or dark theme"),
        Binding("l", "lessons", "Lessons", id="lessons", tooltip="Lessons across learners, by pattern"),
    ]

    def __init__(self, run: str | None = None, format: str | None = None, kb_root: Path | None = None,
                 device: str = "auto", against: list[str] = (), loader=None, columns: dict | None = None,
                 session: Session | None = None):
        super().__init__()
        self.session = session or Session(run, format, list(against), dict(columns or {}), device,
                                          Path(kb_root) if kb_root else Path.cwd())
        if session is not None and kb_root is not None:
            session.kb_root = Path(kb_root)
        self.loader = loader                   # a tui.loader.Loader already reading the run, or None
        self.dashboard: DashboardScreen | None = None

    def on_mount(self) -> None:
        session = self.session
        self.sub_title = session.run_path
        if session.view is None and self.loader is None:
            from postmortem.tui.loader import Loader
            self.loader = Loader(session.run_path, session.format, session.against, session.columns)
        self.dashboard = self.DASHBOARD(session, self.loader)
        self.push_screen(self.dashboard)

    def on_unmount(self) -> None:
        if self.loader is not None:
            self.loader.close()                # the app quit before the child was done

    def action_help(self) -> None:
        focused = self.focused
        key = type(focused).__name__ if isinstance(focused, MetricPanel) else getattr(focused, "id", None)
        self.push_screen(HelpScreen(HELP.get(key, "q quits, z zooms to the incident, n/p pick the incident, "
                                                  "left/right move the cursor, t switches the theme.")))

    def action_lessons(self) -> None:
        """From any screen (the commit screen sends the author there): the dashboard's run
        and incident are what the lessons browser compares with."""
        if self.dashboard is not None:
            self.dashboard.action_lessons()

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme != "textual-light" else "textual-dark"

    def get_system_commands(self, screen):
        """The palette (ctrl+p): Textual's commands, and the dashboard's on the dashboard."""
        yield from super().get_system_commands(screen)
        if isinstance(screen, DashboardScreen):
            yield from screen.system_commands()


def run(path: str, format: str | None = None, device: str = "auto", against: list[str] = (),
        loader=None, columns: dict | None = None) -> int:
    """Run the app; a run that could not be read leaves its one line on stderr and exit code 2."""
    app = PostmortemApp(path, format, device=device, against=against, loader=loader, columns=columns)
    try:
        app.run()
    finally:
        if loader is not None:
            loader.close()
    if app.session.error:
        print(f"postmortem: error: {app.session.error}", file=sys.stderr)
        return 2
    return app.return_code or 0


if __name__ == "__main__":  # pragma: no cover
    run(sys.argv[1] if len(sys.argv) > 1 else str(Path.cwd()))
