"""`postmortem tui RUN`: the App owns the configuration, the theme, the help and the palette,
and pushes the dashboard; what the screens share lives in a Session."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from textual.app import App
from textual.binding import Binding

from postmortem.tui import focus
from postmortem.tui.dialogs import HelpScreen
from postmortem.tui.loader import Loader
from postmortem.tui.screens.dashboard import DashboardScreen
from postmortem.tui.session import Session

if TYPE_CHECKING:
    from postmortem.kb.settings import Settings
    from postmortem.run.store import StoredRun


class PostmortemApp(App):
    """The run is read by a loader process (started here when none was handed in), or
    handed in already read as a Session (`Session.read`)."""

    CSS_PATH = Path(__file__).parent / "app.tcss"     # absolute: subclasses elsewhere find it too
    TITLE = "postmortem"
    DASHBOARD = DashboardScreen
    NOTIFICATION_TIMEOUT = 3          # a toast says its word and goes (warnings and errors: 6 s)
    # last in every footer, after the screen's own keys; t and l are everywhere but shown only
    # where they are the workflow (the dashboard shows l; the palette lists both), and act
    # only where nobody types (check_action)
    BINDINGS = [
        Binding("f1", "help", "Help", id="help", tooltip="Explain every panel of this screen"),
        Binding("question_mark", "help('?')", "Help", id="help.question", show=False,
                tooltip="Explain every panel of this screen (f1 where one types)"),
        Binding("ctrl+q", "quit", "Quit", id="quit", tooltip="Leave postmortem"),
        Binding("t", "toggle_theme", "Theme", id="theme", show=False, tooltip="Light or dark theme"),
        Binding("l", "lessons", "Lessons", id="lessons", show=False, tooltip="Lessons across learners, by pattern"),
    ]

    def __init__(self, run: str | None = None, format: str | None = None, kb_root: Path | None = None,
                 device: str = "auto", against: Sequence[str] = (), loader: Loader | None = None,
                 columns: dict[str, str] | None = None, session: Session | None = None,
                 picking: list[StoredRun] | None = None):
        super().__init__()
        self.picking = picking                 # a store's runs: the picker first (screens/picker.py)
        if session is None:
            if run is None:
                raise TypeError("PostmortemApp needs a run to read or a session")
            session = Session(run, format, list(against), dict(columns or {}), device,
                              Path(kb_root) if kb_root else Path.cwd())
        elif kb_root is not None:
            session.kb_root = Path(kb_root)
        self.session = session
        self.loader = loader                   # a tui.loader.Loader already reading the run, or None
        self.dashboard: DashboardScreen | None = None

    def on_mount(self) -> None:
        session = self.session
        self.sub_title = session.run_path
        if self.picking:
            from postmortem.tui.screens.picker import PickerScreen  # a store's runs only
            self.push_screen(PickerScreen(session.run_path, self.picking), self.picked)
            return
        if session.view is None and self.loader is None:
            self.loader = Loader(session.run_path, session.format, session.against, session.columns,
                                 terminal=(self.size.width, self.size.height))
        self.dashboard = self.DASHBOARD(session, self.loader)
        # pushed once Textual's start is over: a screen pushed inside it (a batch of updates)
        # is laid out and drawn, that frame thrown away, and all of it done again after
        self.call_later(self.show_dashboard, self.dashboard)

    def picked(self, run_id: str | None) -> None:
        """The run picked in a store opens as `--run ID` opens it; none picked, the app ends."""
        if run_id is None:
            self.exit()
            return
        self.picking = None
        self.session.columns["run"] = run_id
        self.on_mount()
        self.sub_title = f"{self.session.run_path} --run {run_id}"

    async def show_dashboard(self, dashboard: DashboardScreen) -> None:
        await self.push_screen(dashboard)
        if not gc.isenabled():                  # paused by `postmortem tui` for the start
            self.call_after_refresh(self.resume_collector)

    def resume_collector(self) -> None:
        """After the first frame: what the start made lives as long as the app, so it is set
        aside (gc.freeze) and a collection never walks it again."""
        gc.freeze()
        gc.enable()

    def on_unmount(self) -> None:
        if self.loader is not None:
            self.loader.close()                # the app quit before the child was done

    def check_action(self, action: str, parameters) -> bool | None:
        """t, l and ? are characters: on a screen where a person types they are the text's
        (F1 still helps there)."""
        typed = action in ("toggle_theme", "lessons") or (action == "help" and parameters == ("?",))
        if typed and focus.types_here(self.screen):
            return False
        return True

    def on_descendant_focus(self, event) -> None:
        focus.mark(event.widget, True)

    def on_descendant_blur(self, event) -> None:
        focus.mark(event.widget, False)

    def action_help(self, key: str = "f1") -> None:
        if isinstance(self.screen, HelpScreen):
            return
        from postmortem.tui.help import describe  # on F1: not on the first frame's path
        self.push_screen(HelpScreen(describe(self.screen, self.focused)))

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        """A toast at the top right (app.tcss), over no status line; a warning or an error
        stays twice as long as news."""
        if timeout is None:
            timeout = self.NOTIFICATION_TIMEOUT * (1 if severity == "information" else 2)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

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


def run(path: str, format: str | None = None, device: str = "auto", against: Sequence[str] = (),
        loader: Loader | None = None, columns: dict[str, str] | None = None, settings: Settings | None = None) -> int:
    """Run the app; a run that cannot be read is its one line on stderr and exit code 2, said
    before the app takes the terminal when the loader process says so first (it nearly
    always does: reading is what fails)."""
    said = []

    def slow() -> None:                 # a long read is said on the terminal, then wiped
        if sys.stderr.isatty():
            said.append(sys.stderr.write(f"postmortem: reading {path} ..."))
            sys.stderr.flush()
    why = loader.problem(slow) if loader is not None else None
    if said:
        sys.stderr.write("\r\x1b[K")          # the line erased: an error is then its one line
    picking = None
    if loader is not None and why is not None:
        loader.close()
        from postmortem.tui.screens.picker import runs_to_pick  # reads the settings, the store
        picking = runs_to_pick(path, format, why)          # a store of several runs: pick one
        if picking is None:
            print(f"postmortem: error: {why}", file=sys.stderr)
            return 2
        loader = None
    app = PostmortemApp(path, format, device=device, against=against, loader=loader,
                        columns=columns, picking=picking)
    if settings is not None:             # kb.settings: where post-mortems go, and who writes them
        app.session.use_settings(settings)
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
