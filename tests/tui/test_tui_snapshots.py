"""SVG snapshots of the dashboard, the editor, the replay panel and the lessons browser
(pytest-textual-snapshot; Textual is pinned in the dev extra so the drawing is stable).
After a deliberate change of the look: `pytest tests/tui/test_tui_snapshots.py --snapshot-update`,
then look at the SVGs before committing them."""

from pathlib import Path

import pytest
from pilots import opened

from postmortem.tui.app import PostmortemApp

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "sample_runs/long-tail-token"     # relative: the path is in the title bar


@pytest.fixture(autouse=True)
def in_the_checkout(monkeypatch):
    monkeypatch.chdir(ROOT)


def app(tmp_path, run=SAMPLE):
    a = PostmortemApp(run, kb_root=tmp_path, device="cpu")
    a.theme = "textual-dark"
    return a


async def loaded(pilot):
    await opened(pilot.app, pilot)
    await settled(pilot)


async def settled(pilot):
    """Until every table has measured its new rows: a DataTable sizes its columns on its
    own idle, which can come after the app's (Textual is pinned, so this attribute holds)."""
    from textual.widgets import DataTable
    for _ in range(100):
        await pilot.pause(0.02)
        if not any(t._require_update_dimensions or t._new_rows for t in pilot.app.screen.query(DataTable)):
            break
    await pilot.pause()


async def still_cursor(pilot):
    """The focused section's cursor drawn, whatever the time: no blink, and no line kept from
    a moment the blink had hidden it (a TextArea caches its lines by the blink's phase)."""
    for area in pilot.app.screen.query("TextArea"):
        area.cursor_blink = False
        area.notify_style_update()
        area.refresh()
    await pilot.pause()


def test_dashboard_120x40(snap_compare, tmp_path):
    async def zoomed(pilot):
        await loaded(pilot)
        await pilot.press("z", "right", "right")
        await settled(pilot)
    assert snap_compare(app(tmp_path), terminal_size=(120, 40), run_before=zoomed)


def test_dashboard_80x24(snap_compare, tmp_path):
    assert snap_compare(app(tmp_path), terminal_size=(80, 24), run_before=loaded)


def test_dashboard_light_theme(snap_compare, tmp_path):
    async def light(pilot):
        await loaded(pilot)
        await pilot.press("t")
        await settled(pilot)
    assert snap_compare(app(tmp_path), terminal_size=(120, 40), run_before=light)


def test_editor(snap_compare, tmp_path):
    async def edit(pilot):
        await loaded(pilot)
        await pilot.press("e")
        await still_cursor(pilot)
        pilot.app.screen.settle()       # the debounced lint, now
        await settled(pilot)
    assert snap_compare(app(tmp_path), terminal_size=(120, 40), run_before=edit)


def test_editor_80x24(snap_compare, tmp_path):
    """The editor at 80x24: the workflow keys in the footer, the status lines clear."""
    async def edit(pilot):
        await loaded(pilot)
        await pilot.press("e")
        await still_cursor(pilot)
        pilot.app.screen.settle()
        await settled(pilot)
    assert snap_compare(app(tmp_path), terminal_size=(80, 24), run_before=edit)


def test_replay_panel_before_a_run(snap_compare, tmp_path):
    async def replay(pilot):
        await loaded(pilot)
        await pilot.press("r")
        await settled(pilot)
    assert snap_compare(app(tmp_path), terminal_size=(120, 40), run_before=replay)


def test_replay_panel_after_a_replay(snap_compare, tmp_path, made_here, monkeypatch):
    """On the sample made on this machine: its replay is bit for bit on any CPU, where the
    committed one's differs in the last bits from one CPU's kernels to another's."""
    monkeypatch.chdir(made_here("long-tail-token").parent)

    async def replay(pilot):
        await loaded(pilot)
        await pilot.press("r")
        screen = pilot.app.screen
        screen.query_one("#arms").deselect("restored-moments")
        await pilot.press("r")
        await pilot.app.workers.wait_for_complete()     # the worker following the child
        await pilot.pause()
        assert screen.state == "done"
        await settled(pilot)
    assert snap_compare(app(tmp_path, "long-tail-token"), terminal_size=(120, 40), run_before=replay)


def test_lessons_browser(snap_compare, tmp_path):
    async def lessons(pilot):
        await loaded(pilot)
        pilot.app.session.kb_root = ROOT
        await pilot.press("l")
        await pilot.app.workers.wait_for_complete()  # the past incidents are scored in a thread
        await settled(pilot)
    assert snap_compare(app(tmp_path), terminal_size=(120, 40), run_before=lessons)
