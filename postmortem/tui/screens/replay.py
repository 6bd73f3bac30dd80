"""The replay panel: pick the arms, run them in a child process, watch each step and the
evidence arrive (a thread worker follows the child and posts messages), cancel with Escape. Dismissed with the replay's result (a ReplayResult), or None."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, ProgressBar, SelectionList, Static

from postmortem.replay.arms import ARMS, NAMES
from postmortem.replay.models import EvidenceArrived, Failed, Finished, Progress, ReplayResult
from postmortem.replay.worker import ReplayProcess, what_is_missing
from postmortem.tui.messages import ReplayEnd, ReplayEvidence, ReplayFinished, ReplayProgress
from postmortem.tui.session import Session
from postmortem.tui.widgets.fitted_table import Col, FittedTable

if TYPE_CHECKING:
    from postmortem.diagnose.models import Evidence, Incident

PanelState = Literal["missing", "ready", "running"] | ReplayEnd
"""Where the panel stands: nothing to replay, ready, running, or how the last replay ended."""


class ReplayScreen(Screen):
    BINDINGS = [
        Binding("escape", "cancel_or_back", "Cancel / back", id="replay.back",
                tooltip="Cancel a running replay; otherwise back, with the evidence"),
        Binding("r", "start", "Run replay", id="replay.run", tooltip="Replay the checked arms"),
    ]

    def __init__(self, session: Session, incident: Incident):
        super().__init__()
        if session.log is None:
            raise ValueError("the replay panel opens once the run is handed over")
        self.session, self.incident = session, incident
        self.runlog, self.device = session.log, session.device
        self.missing = what_is_missing(self.runlog)
        self.process: ReplayProcess | None = None
        self.result: ReplayResult | None = None
        self.state: PanelState = "missing" if self.missing else "ready"
        self.evidence: list[Evidence] = []      # the rows as they arrive

    def compose(self) -> ComposeResult:
        inc = self.incident
        yield Header()
        yield Static(escape(f"replay of {self.runlog.run_id}: {inc.shown_kind} at step {inc.step}"), id="replay-title")
        if self.missing:
            yield Static(escape(f"This run cannot be replayed: {self.missing}"), id="replay-missing")
        else:
            with Horizontal(id="replay-top"):
                arms = SelectionList[str](*[(f"{a.name}: {a.tells_apart}", a.name, True) for a in ARMS],
                                          id="arms")
                arms.border_title = "arms (space toggles, r runs)"
                yield arms
                with Vertical(id="replay-progress"):
                    yield Static("press r to replay the checked arms", id="replay-status")
                    yield ProgressBar(id="replay-bar", show_eta=False)
                    yield Static("", id="replay-ranking")
            # the observation takes the rest of the width; under the table it shows whole
            table = FittedTable(Col("panel", 14, wrap=True), Col("favors", 16, wrap=True),
                                Col("rules out", 16, wrap=True), Col("observation", text=True), id="evidence")
            table.border_title = "evidence"
            yield table
            yield Static("", id="evidence-detail")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.title = "postmortem replay"
        if not self.missing:
            self.query_one("#replay-bar").display = False       # shown once a replay runs

    @property
    def arms(self) -> tuple[str, ...]:
        chosen = self.query_one("#arms", SelectionList).selected
        return tuple(a for a in NAMES if a in chosen or a == "faithful")   # faithful always first

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The highlighted row whole, wrapped: its observation column cuts most of them."""
        if event.data_table.id == "evidence" and 0 <= event.cursor_row < len(self.evidence):
            self._detail(self.evidence[event.cursor_row])

    def _detail(self, row) -> None:
        sides = "".join(f"; {name} {', '.join(seen)}" for name, seen in
                        (("favors", row.favors), ("rules out", row.rules_out)) if seen)
        detail = self.query_one("#evidence-detail", Static)
        detail.update(escape(f"[{row.panel}] {row.observation}{sides}"))
        detail.display = True

    def action_start(self) -> None:
        if self.state in ("missing", "running"):
            return
        self.evidence, self.result = [], None
        self.query_one("#evidence", FittedTable).set_rows([])
        self.query_one("#evidence-detail", Static).display = False
        self.query_one("#replay-ranking", Static).update("")
        self._status("starting the replay process (importing torch and the run's code)...")
        bar = self.query_one("#replay-bar", ProgressBar)
        bar.update(total=None, progress=0)
        bar.display = True
        self.process = ReplayProcess(self.runlog, self.incident, self.arms, self.device).start()
        self.state = "running"
        self.follow(self.process)

    @work(thread=True, exclusive=True, group="replay")
    def follow(self, process: ReplayProcess) -> None:
        """The child's messages as they come, posted to the screen (no polling)."""
        for said in process.follow():
            if isinstance(said, Progress):
                self.post_message(ReplayProgress(said))
            elif isinstance(said, EvidenceArrived):
                self.post_message(ReplayEvidence(said))
            else:
                self.post_message(ReplayFinished(said))

    def on_replay_progress(self, message: ReplayProgress) -> None:
        if self.state != "running":
            return
        said = message.progress
        self.query_one("#replay-bar", ProgressBar).update(total=said.total, progress=said.done)
        self._status(f"{said.arm}: step {said.step} ({said.done}/{said.total})")

    def on_replay_evidence(self, message: ReplayEvidence) -> None:
        row = message.evidence
        self.evidence.append(row)
        table = self.query_one("#evidence", FittedTable)
        table.add((row.panel, ", ".join(row.favors), ", ".join(row.rules_out), row.observation))
        if table.cursor_row == len(self.evidence) - 1:      # the first row: no highlight event yet
            self._detail(row)

    def on_replay_finished(self, message: ReplayFinished) -> None:
        if self.state != "running":        # cancelled by escape already
            return
        self.state, end = message.state, message.end
        if isinstance(end, Finished):
            result = self.result = end.result
            ranking = "  ".join(f"{h.rank}. {h.pattern} {h.score:.2f}" for h in result.hypotheses[:4])
            self._status(f"done on {result.device}: {'faithful' if result.faithful else 'NOT faithful'} "
                         f"(max diff {result.faithful_max_diff:.3g}); escape takes the evidence back")
            self.query_one("#replay-ranking", Static).update(escape(f"re-ranked: {ranking}"))
        elif isinstance(end, Failed):
            self._stop_bar()
            self._status(f"[b]replay failed[/b]: {escape(end.message)}", markup=True)
        else:
            self._stop_bar()
            self._status("cancelled")

    def _stop_bar(self) -> None:
        """No bar runs on after the replay stopped (one still waiting for its first step would
        go on sweeping): it goes, and the status line says where the replay stood."""
        self.query_one("#replay-bar", ProgressBar).display = False

    def _status(self, text: str, markup: bool = False) -> None:
        self.query_one("#replay-status", Static).update(text if markup else escape(text))

    def action_cancel_or_back(self) -> None:
        if self.state == "running" and self.process is not None:
            self.process.cancel()          # the child stops between two steps, or is killed
            self.state = "cancelled"
            self._stop_bar()
            bar = self.query_one("#replay-bar", ProgressBar)
            at = f" at {int(bar.progress)}/{int(bar.total)} steps of the arm" if bar.total else ""
            self._status(f"cancelled{at}; r replays again, escape goes back")
            return
        if self.result is not None:        # kept for the editor, whichever screen asked
            self.session.replays[self.incident.step] = self.result
        self.dismiss(self.result)

    def on_unmount(self) -> None:
        if self.process is not None and self.process.running:
            self.process.cancel(grace=0.5)
