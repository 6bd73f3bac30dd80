"""The run picker: `postmortem tui STORE` on a store of several runs (an MLflow database or
server, lightning_logs/, a TensorBoard logdir, wandb/, a work dir) lists them, newest first;
enter opens the one highlighted on the dashboard, as `--run ID` would."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from postmortem.errors import UserError

if TYPE_CHECKING:
    from postmortem.run.store import StoredRun


def runs_to_pick(path: str, format: str | None, why: str) -> list[StoredRun] | None:
    """The runs of `path` when reading it failed because it holds several (run/store.py's
    listing, newest first); None when it failed for any other reason."""
    if "--run ID" not in why:
        return None
    from postmortem.run import mlflowserver
    from postmortem.run.store import newest_first
    try:
        if mlflowserver.is_uri(path):
            runs = mlflowserver.server_runs(path)
        else:
            from postmortem.run import listing
            from postmortem.run.discover import runs_in
            runs = listing.describe(runs_in(Path(path), format), Path(path))
    except UserError:
        return None
    return newest_first(runs) if len(runs) > 1 else None


class PickerScreen(Screen):
    """One row a run (id, name, start, steps, status); dismissed with the id picked, or None."""

    DEFAULT_CSS = """
    PickerScreen #runs { height: 1fr; border: round $primary; }
    PickerScreen #hint { height: 1; color: $text-muted; padding: 0 1; }
    """
    BINDINGS = [
        Binding("enter", "open", "Open", id="picker.open", tooltip="Open the highlighted run on the dashboard"),
        Binding("escape", "leave", "Quit", id="picker.leave", tooltip="Leave without opening a run"),
    ]

    def __init__(self, store: str, runs: list[StoredRun]):
        super().__init__()
        self.store, self.runs = store, runs

    def compose(self) -> ComposeResult:
        table: DataTable[str] = DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        table.border_title = f"{self.store}: {len(self.runs)} runs (enter opens one)"
        yield table
        yield Static(f"the same from the shell: postmortem tui {self.store} --run ID", id="hint")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("id", "name", "start", "steps", "status")
        for r in self.runs:
            table.add_row(r.id, r.name or "-", r.start_text(), "?" if r.steps is None else str(r.steps),
                          r.status or "-", key=r.id)
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(event.row_key.value)

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count:
            self.dismiss(self.runs[table.cursor_row].id)

    def action_leave(self) -> None:
        self.dismiss(None)
