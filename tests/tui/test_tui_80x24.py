"""The TUI at 80x24, as a person reads it: the workflow keys on screen, F1 on every panel (the
charts too), a long row readable whole, tables that keep their meaningful columns, and
notifications that go and cover no status line."""

import time
from pathlib import Path

import pytest
from pilots import opened, screen_lines
from textual.app import App
from textual.widgets import Footer

from postmortem.tui.app import PostmortemApp
from postmortem.tui.dialogs import HelpScreen
from postmortem.tui.help import PANELS, help_key
from postmortem.tui.screens.editor import EditorScreen
from postmortem.tui.widgets.fitted_table import Col, FittedTable
from postmortem.tui.widgets.metric_panel import MetricPanel

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "sample_runs" / "long-tail-token")


def footer_line(app) -> str:
    """The footer's row of the screen, as drawn."""
    footer = app.screen.query_one(Footer)
    return screen_lines(app)[footer.region.y]


@pytest.mark.asyncio
async def test_the_workflow_keys_are_on_screen_at_80x24(tmp_path):
    app = PostmortemApp(SAMPLE, kb_root=tmp_path, device="cpu")
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        await pilot.pause()
        line = footer_line(app)
        for key in ("e Write", "r Replay", "c Causes", "l Lessons", "n/p Incident", "f1 Help", "^q Quit", "^p palette"):
            assert key in line, line
        # whatever has the focus on the dashboard, the keys stay
        await pilot.press("tab", "tab")
        assert "e Write" in footer_line(app) and "l Lessons" in footer_line(app)
        # w writes too; the editor's own workflow fits the same width
        await pilot.press("w")
        assert isinstance(app.screen, EditorScreen)
        await pilot.pause()
        line = footer_line(app)
        for key in ("^g Commit", "^r Replay", "f2 Preview", "esc Back", "f1 Help", "^q Quit"):
            assert key in line, line
        app.screen.query_one("#hypotheses").focus()       # a table with keys of its own
        await pilot.pause()
        assert "^g Commit" in footer_line(app) and "f1 Help" in footer_line(app)


@pytest.mark.asyncio
async def test_f1_explains_every_panel_the_charts_included(tmp_path):
    app = PostmortemApp(SAMPLE, kb_root=tmp_path, device="cpu")
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        charts = list(app.screen.query(MetricPanel))
        assert {c.panel for c in charts} >= {"loss", "lr", "grad-norm"}
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.text
        for chart in charts:                       # every chart drawn has its entry
            assert PANELS[help_key(chart)][0] in text
        for name in ("loss chart", "learning-rate chart", "grad-norm chart", "incidents", "checks"):
            assert name in text
        await pilot.press("escape")
        # a chart takes the focus, and F1 then starts with it
        for _ in range(8):
            if isinstance(app.focused, MetricPanel):
                break
            await pilot.press("tab")
        chart = app.focused
        assert isinstance(chart, MetricPanel)
        await pilot.press("f1")
        assert app.screen.text.startswith(f"[b]{PANELS[help_key(chart)][0]}[/b] (focused)")
        assert "left/right move the cursor" in app.screen.text
        await pilot.press("escape")
        # the editor's panels too
        await pilot.press("e")
        app.screen.query_one("#evidence").focus()        # section 3, not the replay's table
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        assert app.screen.text.startswith("[b]sections 3-7[/b] (focused)")
        for name in ("2. Hypotheses", "usual remedies", "lint line"):
            assert name in app.screen.text


@pytest.mark.asyncio
async def test_the_highlighted_row_reads_whole_at_80_columns(tmp_path):
    app = PostmortemApp(SAMPLE, kb_root=tmp_path, device="cpu")
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        await pilot.pause()
        screen = "\n".join(screen_lines(app))
        # the incidents keep step, kind, rise and the top cause, its name whole
        for header in ("step", "kind", "rise", "top cause"):
            assert header in screen
        assert "long-tail-token" in screen and "x3.96" in screen
        checks = app.screen.query_one("#checks", FittedTable)
        checks.focus()
        long = next(i for i, row in enumerate(checks.rows_text) if len(row[2]) > checks.widths[-1] + 8)
        for _ in range(long):
            await pilot.press("down")
        await pilot.pause()
        assert checks.cursor_row == long
        detail = checks.rows_text[long][2]
        assert str(checks.get_row_at(long)[2]).endswith("…")           # the column cuts it
        shown = " ".join(str(app.screen.query_one("#row-detail").render()).split())
        assert " ".join(detail.split()) in shown                      # the pane under it does not
        pane = app.screen.query_one("#row-detail").region
        assert pane.height >= 2 and pane.bottom <= app.screen.query_one("#status").region.y


class OneTable(App):
    def __init__(self, table):
        super().__init__()
        self.table = table

    def compose(self):
        yield self.table


@pytest.mark.asyncio
async def test_a_fitted_table_keeps_its_text_column_and_wraps_names_at_their_hyphens():
    table = FittedTable(Col("panel", 12, wrap=True), Col("favors", 16, wrap=True), Col("observation", text=True),
                        Col("extra", 20, optional=True, least=30))
    app = OneTable(table)
    async with app.run_test(size=(60, 12)) as pilot:
        table.set_rows([("grad-norm", "schedule-misconfigured, lr-too-high",
                         "grad norm 13.2 at step 250 is 15.6x its rolling mean with a smooth LR", "x" * 20)])
        await pilot.pause()
        labels = [str(c.label) for c in table.ordered_columns]
        assert labels == ["panel", "favors", "observation"]          # the optional one left out
        widths = table.widths
        assert widths[2] == table.room - sum(widths[:2]) - 3 * 2 * table.cell_padding
        favors = str(table.get_row_at(0)[1]).splitlines()
        assert favors == ["schedule-", "misconfigured", "lr-too-high"]      # one name a line
        assert str(table.get_row_at(0)[2]).endswith("…")
        await pilot.resize_terminal(160, 12)                       # wider: laid out again
        await pilot.pause()
        assert [str(c.label) for c in table.ordered_columns][-1] == "extra"
        assert str(table.get_row_at(0)[2]) == table.rows_text[0][2]


@pytest.mark.asyncio
async def test_notifications_go_and_cover_no_status_line(tmp_path):
    app = PostmortemApp(SAMPLE, kb_root=tmp_path, device="cpu")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        editor = app.screen
        editor.notify("a word on the draft")
        editor.notify("something is off", severity="warning")
        await pilot.pause()
        timeouts = sorted(n.timeout for n in app._notifications)
        assert timeouts == [app.NOTIFICATION_TIMEOUT, 2 * app.NOTIFICATION_TIMEOUT] and timeouts[1] <= 6
        toasts = list(editor.query("Toast"))
        assert len(toasts) >= 2
        lines = [editor.query_one(f"#{name}").region for name in ("sections", "lint")]
        lines.append(editor.query_one(Footer).region)
        for toast in toasts:
            assert all(not toast.region.overlaps(line) for line in lines), (toast.region, lines)
        start = time.monotonic()
        while list(editor.query("Toast")) and time.monotonic() - start < 30:
            await pilot.pause(0.5)
        assert not list(editor.query("Toast"))
