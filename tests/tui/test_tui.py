"""The dashboard through Textual's Pilot: real runs, real analysis, state asserted."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pilots import opened

from postmortem.tui.app import PostmortemApp
from postmortem.tui.focus import MARK
from postmortem.tui.session import Session
from postmortem.tui.widgets.decimate import decimate, with_breaks
from postmortem.tui.widgets.metric_panel import MetricPanel

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_dashboard_of_a_sample_run():
    app = PostmortemApp(str(ROOT / "sample_runs" / "long-tail-token"))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        panels = {p.panel for p in app.screen.query(MetricPanel)}
        assert {"loss", "lr", "grad-norm"} <= panels
        assert app.dashboard.incident.step == 250 and app.dashboard.cursor == 250
        assert all(p.marks == [250] for p in app.screen.query(MetricPanel))
        table = app.screen.query_one("#incidents")
        assert table.row_count == 1 and str(table.get_row_at(0)[3]) == "long-tail-token"
        assert [str(c) for c in table.get_row_at(0)[:3]] == ["250", "spike", "x3.96"]   # 1.30 -> 5.16
        analysis = app.session.analysis              # the reader's warnings first, then every check
        assert app.screen.query_one("#checks").row_count == len(analysis.run.warnings) + len(analysis.checks)
        await pilot.press("z")
        assert app.dashboard.zoomed and all(p.window == (150, 300) for p in app.screen.query(MetricPanel))
        await pilot.press("right", "right", "shift+right")
        assert app.dashboard.cursor == 262
        assert "cursor 262" in str(app.screen.query_one("#status").render())
        await pilot.press("z")
        assert not app.dashboard.zoomed and all(p.window is None for p in app.screen.query(MetricPanel))


def slow_hand_over(run: str):
    """A loader process whose whole run arrives a second after the first paint."""
    from postmortem.tui.loader import Loader

    class SlowHandOver(Loader):
        def run(self):
            import time
            time.sleep(1.0)
            return super().run()
    return SlowHandOver(run)


async def painted_not_handed_over(app, pilot):
    while app.dashboard is None or app.dashboard.view is None:    # not the workers: the hand-over is one
        await pilot.pause(0.05)
    assert app.session.log is None


async def handed_over(app, pilot, seconds=60.0):
    """Until the loader process has handed the whole run over (after the first paint)."""
    import time
    start = time.monotonic()
    while app.session.log is None and not app.session.error and time.monotonic() - start < seconds:
        await app.workers.wait_for_complete()
        await pilot.pause()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_loader_process_draws_the_same_dashboard_then_hands_the_run_over():
    from postmortem.tui.loader import Loader
    run = str(ROOT / "sample_runs" / "long-tail-token")
    drawn = {}
    for how in ("read here", "process"):
        # the process is told the terminal's size: it draws the panels' first plots itself
        loader = Loader(run, terminal=(120, 40)) if how == "process" else None
        app = PostmortemApp(run, loader=loader) if loader else PostmortemApp(session=Session.read(run))
        async with app.run_test(size=(120, 40)) as pilot:
            await opened(app, pilot)
            await handed_over(app, pilot)
            assert app.session.log is not None and app.session.log.run_id == "19-spike-001"
            assert app.session.read_s > 0
            panels = list(app.screen.query(MetricPanel))
            if loader is not None:                        # its plots were the ones drawn
                assert all(p.first is not None and p._drawn == p.first.key for p in panels)
            # the plot itself: as the loader drew it, or as the panel drew it with numpy
            drawn[how] = [(p.panel, p.column, p.steps.tolist(), p.values.tolist(), p.marks,
                           p.drawing(p.size.width)) for p in panels]
            rows = [[str(c) for c in app.screen.query_one("#incidents").get_row_at(i)]
                    for i in range(app.screen.query_one("#incidents").row_count)]
            drawn[how].append(rows)
            await pilot.press("e")                        # the editor needs the whole run: here it is
            assert type(app.screen).__name__ == "EditorScreen"
        if loader is not None:
            assert loader.proc.poll() == 0                # done and gone, nothing left running
    assert drawn["process"] == drawn["read here"]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_key_pressed_before_the_run_is_handed_over_acts_once_it_is():
    run = str(ROOT / "sample_runs" / "long-tail-token")
    app = PostmortemApp(run, loader=slow_hand_over(run))
    async with app.run_test(size=(120, 40)) as pilot:
        await painted_not_handed_over(app, pilot)
        await pilot.press("e")
        assert type(app.screen).__name__ != "EditorScreen"
        await handed_over(app, pilot)
        await pilot.pause()
        assert type(app.screen).__name__ == "EditorScreen" and app.dashboard.waiting == []


@pytest.mark.slow
def test_the_loader_process_says_an_unreadable_run_before_the_app_would_start(tmp_path):
    """`postmortem tui` asks the loader before the app takes the terminal: its first word is
    the one line, and a readable run's first word lets the app start at once."""
    from postmortem.tui.loader import Loader
    bad = tmp_path / "junk.bin"
    bad.write_bytes(b"\x00\x01" * 100)
    loader = Loader(str(bad))
    try:
        assert "unknown format" in loader.problem()
    finally:
        loader.close()
    loader = Loader(str(ROOT / "sample_runs" / "long-tail-token"), terminal=(120, 40))
    try:
        assert loader.problem() is None
        kind, view = loader.first()                # the word "read" is not a view: passed over
        assert kind == "view" and view.incidents[0].step == 250
        assert loader.run()[0] == "run"
    finally:
        loader.close()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_run_with_no_incident_still_shows_its_panels():
    app = PostmortemApp(str(ROOT / "sample_runs" / "healthy"))
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        assert app.screen.query(MetricPanel) and app.dashboard.incident is None
        assert "no incident" in str(app.screen.query_one("#status").render())
        assert app.screen.query_one("#incidents").border_title.removeprefix(MARK).startswith("incidents: none")


@pytest.mark.slow
@pytest.mark.asyncio
async def test_an_app_whose_run_cannot_be_read_leaves_with_exit_code_2(tmp_path):
    """No app under a modal with a status stuck on "reading...": it leaves, and `run` says the
    one line (a loader started by the app itself, as `python -m postmortem.tui.app` does)."""
    bad = tmp_path / "junk.bin"
    bad.write_bytes(b"\x00\x01" * 100)
    app = PostmortemApp(str(bad))
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        await pilot.pause()
    assert app.return_code == 2 and "unknown format" in app.session.error


def in_a_terminal(cmd: list[str], seconds: float = 60.0) -> tuple[int, bytes]:
    """Run `cmd` in a pseudo-terminal of 100x30: (exit code, all it wrote)."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(cmd[0], cmd)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    out, start = b"", time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:                         # the child ended
                    break
                if not chunk:
                    break
                out += chunk
        else:
            os.kill(pid, 9)
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), out


@pytest.mark.slow
def test_postmortem_tui_on_an_unreadable_run_is_one_line_and_exit_2_before_the_app(tmp_path):
    bad = tmp_path / "junk.bin"
    bad.write_bytes(b"\x00\x01" * 100)
    for run in (bad, tmp_path / "no-such-run"):
        code, out = in_a_terminal([str(Path(sys.executable).parent / "postmortem"), "tui", str(run)])
        # what stays on the terminal: a "reading ..." said while it waited is erased (\r, erase line)
        lines = [line for line in out.decode().split("\r\x1b[K")[-1].splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"postmortem: error: {run}"), (code, out)
        assert b"\x1b[?1049h" not in out                 # the terminal's other screen never taken


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_readers_warnings_are_on_the_dashboard(tmp_path):
    """A torn last line (the run still being written, or cut): the reader's warning is a row of
    the checks table, said in its title, and whole under the tables when highlighted."""
    import json
    rows = [json.dumps({"step": s, "loss": 2.0 - s / 1e4}) for s in range(300)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(rows) + '\n{"step": 300, "lo')
    app = PostmortemApp(str(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        warnings = app.session.analysis.run.warnings
        assert any("cut" in w or "torn" in w or "last line" in w for w in warnings), warnings
        checks = app.screen.query_one("#checks")
        assert f"checks: {len(warnings)} warning" in str(checks.border_title)
        read = [row for row in checks.rows_text if row[0] == "read"]
        assert [row[2] for row in read] == warnings and all(row[1] == "warn" for row in read)
        checks.focus()
        await pilot.pause()
        assert warnings[0] in " ".join(str(app.screen.query_one("#row-detail").render()).split())


def test_decimation_keeps_every_spike_point():
    import numpy as np
    steps = np.arange(1_000_000)
    values = np.sin(steps / 1000.0)
    values[123_457] = 50.0
    values[777_777] = np.nan
    idx = decimate(steps, values, 100, keep=np.array([500_000]))
    assert len(idx) < 1000
    assert {123_457, 777_777, 500_000} <= set(idx.tolist())


def test_a_hole_in_the_log_lifts_the_pen():
    import numpy as np
    # pasted snippets: steps 6900..6940, then 11446..11448 (bloom-tr8-104B's chronicles)
    steps = np.array([6900, 6910, 6920, 6930, 6940, 11446, 11447, 11448])
    values = np.array([6.4, 6.6, 7.3, 9.1, 10.2, 3.1, np.inf, 7.7])
    s, v = with_breaks(steps, values, typical=float(np.median(np.diff(steps))), width=60)
    assert np.isnan(s).sum() == 1 and s[5] != s[5] and s[4] == 6940 and s[6] == 11446
    assert np.isnan(v[5]) and np.isnan(v[7]) and v[8] == 7.7      # a non-finite value: a break too
    # a dense run, decimated to a few points a column, is one line
    dense = np.arange(1_000_000)
    idx = decimate(dense, np.sin(dense / 1000.0), 100)
    s, v = with_breaks(dense[idx], np.sin(dense[idx] / 1000.0), typical=1.0, width=100)
    assert not np.isnan(s).any()


@pytest.mark.asyncio
async def test_the_collector_paused_for_the_start_runs_again_after_the_first_frame():
    import gc
    session = Session.read(str(ROOT / "sample_runs" / "long-tail-token"))
    gc.disable()                       # as `postmortem tui` does before importing Textual
    try:
        app = PostmortemApp(session=session)
        async with app.run_test(size=(120, 40)) as pilot:
            await opened(app, pilot)
            await pilot.pause()
            assert gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


@pytest.mark.asyncio
async def test_the_first_frame_holds_every_panel_drawn_for_its_width():
    from textual.app import App
    session = Session.read(str(ROOT / "sample_runs" / "long-tail-token"))
    app = PostmortemApp(session=session)
    at_first_frame = []

    def first_frame(screen, renderable):
        if renderable is not None and not at_first_frame and isinstance(screen, app.DASHBOARD):
            at_first_frame.extend((p.panel, p._drawn, p.size.width) for p in screen.query(MetricPanel))
        return App._display(app, screen, renderable)
    app._display = first_frame
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
    assert {panel for panel, _, _ in at_first_frame} >= {"loss", "lr", "grad-norm"}
    assert all(drawn is not None and drawn[0] == width > 0 for _, drawn, width in at_first_frame)


@pytest.mark.parametrize("columns,rows", [(80, 24), (90, 20), (100, 30), (120, 40), (133, 41),
                                          (160, 50), (200, 60), (80, 60)])
@pytest.mark.slow
def test_the_loader_foresees_the_width_of_every_panel(columns, rows):
    """tui.view.panel_width, which the loader draws the first plots for, is the width the
    dashboard's layout gives each panel (a miss would cost the first frame numpy's import)."""
    import asyncio

    from postmortem.tui.view import panel_width, shown_panels
    session = Session.read(str(ROOT / "sample_runs" / "long-tail-token"))

    async def widths():
        app = PostmortemApp(session=session)
        async with app.run_test(size=(columns, rows)) as pilot:
            await pilot.pause()
            return [p.size.width for p in app.screen.query(MetricPanel)]
    shown = asyncio.run(widths())
    assert len(shown) == len(shown_panels(session.view, rows)) >= 3
    assert set(shown) == {panel_width(columns, rows, len(shown))}


@pytest.mark.slow
@pytest.mark.parametrize("sample", ["long-tail-token", "healthy"])      # an incident, and none
def test_the_app_paints_its_first_frame_before_importing_numpy(tmp_path, sample):
    code = f"""
import asyncio, sys
from textual.app import App
from postmortem.tui.app import PostmortemApp
from postmortem.tui.loader import Loader
from postmortem.tui.widgets.metric_panel import MetricPanel

run = {str(ROOT / "sample_runs" / sample)!r}
app = PostmortemApp(run, loader=Loader(run, terminal=(120, 40)))
seen = {{}}

def display(screen, renderable):
    # the first frame with panels laid out (a frame of another widget's update can come
    # while panels just mounted have no size yet: they are not on the screen then)
    shown = [p for p in screen.query(MetricPanel) if p.size.width > 0]
    if renderable is not None and not seen and shown:
        seen["numpy"] = "numpy" in sys.modules
        seen["drawn"] = [p._drawn is not None for p in shown]
    return App._display(app, screen, renderable)
app._display = display

async def main():
    async with app.run_test(size=(120, 40)) as pilot:
        while not seen:
            await pilot.pause(0.02)
asyncio.run(main())
print(seen)
"""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    for opening in ("first", "second"):              # the run read, then its view kept
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        seen = eval(out.stdout.strip().splitlines()[-1])
        assert seen["numpy"] is False and len(seen["drawn"]) >= 3 and all(seen["drawn"]), (opening, seen)


@pytest.mark.slow
def test_the_loader_imports_this_postmortem_whatever_folder_it_starts_in(tmp_path, monkeypatch):
    """A `postmortem` package in the working directory (another version's checkout) is not
    the one the loader process imports."""
    from postmortem.tui.loader import Loader
    (tmp_path / "postmortem").mkdir()
    (tmp_path / "postmortem" / "__init__.py").write_text("raise ImportError('the wrong postmortem')\n")
    monkeypatch.chdir(tmp_path)
    loader = Loader(str(ROOT / "sample_runs" / "long-tail-token"), terminal=(120, 40))
    try:
        kind, view = loader.first()
        assert kind == "view", view
        assert view.incidents[0].step == 250 and set(view.drawings) >= {"loss", "lr", "grad_norm"}
    finally:
        loader.close()


@pytest.mark.slow
def test_the_dashboard_imports_no_torch():
    code = ("import sys; from postmortem.tui.app import PostmortemApp; "
            "assert 'torch' not in sys.modules, 'torch'")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.slow
@pytest.mark.asyncio
async def test_lessons_browser_filters_opens_and_finds_similar_incidents():
    from postmortem.tui.screens.document import DocumentScreen
    from postmortem.tui.screens.lessons import LessonsScreen
    app = PostmortemApp(str(ROOT / "sample_runs" / "long-tail-token"), kb_root=ROOT)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("l")
        screen = app.screen
        assert isinstance(screen, LessonsScreen)
        table = screen.query_one("#lessons")
        assert table.row_count >= 1 and str(table.get_row_at(0)[4]) == "19-spike-001"
        assert str(table.get_row_at(0)[0]).startswith("long-tail-token (")
        await pilot.click("#filter")
        await pilot.press(*"pattern:long learner:example batch")
        assert table.row_count >= 1
        await pilot.press(*" nowhere")
        assert table.row_count == 0 and "no lessons match" in str(screen.query_one("#status").render())
        # the past incidents like this one: the example is this run's own incident, so it is
        # left out; the browser says there is nothing else rather than matching it with itself
        await app.workers.wait_for_complete()              # the scoring worker
        await pilot.pause()
        similar = screen.query_one("#similar")
        assert similar.row_count == 1 and "no other past post-mortem" in str(similar.get_row_at(0)[3])
        # enter on a lesson opens its post-mortem
        await pilot.press(*["backspace"] * len(" nowhere"))
        table.focus()
        await pilot.press("enter")
        assert isinstance(app.screen, DocumentScreen)
        assert app.screen.path.name == "2026-11-22-19-spike-001.md"
        # a terminal shows no PNG: the preview names the figure and where it is
        shown = app.screen.query_one("#document").source
        assert f"**[figure: {app.screen.path.with_suffix('.png')}]**" in shown and "![" not in shown
        await pilot.press("escape", "escape")
        assert not isinstance(app.screen, (LessonsScreen, DocumentScreen))


@pytest.mark.slow
@pytest.mark.asyncio
async def test_similar_past_incidents_rank_the_same_pattern_first():
    from postmortem.tui.screens.lessons import LessonsScreen
    # another long-tail run would match; here the fp16 run is scored against the example
    app = PostmortemApp(str(ROOT / "sample_runs" / "fp16-overflow"), kb_root=ROOT)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("l")
        screen = app.screen
        await app.workers.wait_for_complete()              # the scoring worker
        await pilot.pause()
        assert isinstance(screen, LessonsScreen) and len(screen.similar) == 1
        score, path, pm, why = screen.similar[0]
        assert pm.run_id == "19-spike-001" and 0 <= score < 1
        assert any(w.startswith("pattern: differs") for w in why)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_command_palette_knows_the_apps_commands():
    app = PostmortemApp(str(ROOT / "sample_runs" / "long-tail-token"))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        titles = {c.title: c for c in app.get_system_commands(app.screen)}
        assert {"Zoom to the incident", "Next incident", "Lessons"} <= set(titles)
        titles["Zoom to the incident"].callback()
        assert app.dashboard.zoomed


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_editor_lints_live_and_autosaves_a_draft(tmp_path):
    from postmortem.document.draftstore import draft_path
    from postmortem.document.markdown import read
    from postmortem.tui.screens.editor import EditorScreen
    app = PostmortemApp(str(ROOT / "sample_runs" / "long-tail-token"), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        editor = app.screen
        assert isinstance(editor, EditorScreen)
        assert "4 Root cause x" in str(editor.query_one("#sections").render())
        assert "problem(s)" in str(editor.query_one("#lint").render())
        example = read(ROOT / "learners" / "example" / "postmortems" / "2026-11-22-19-spike-001.md")
        # left/right belong to the text here, not to the dashboard's step cursor
        editor.query_one("#lesson").focus()
        await pilot.press("a", "b", "left", "X")
        assert editor.query_one("#lesson").text == "aXb" and app.dashboard.cursor == 250
        editor.query_one("#root_cause").text = example.root_cause
        editor.query_one("#lesson").text = example.lesson
        editor.query_one("#remediation").text = "\n".join(example.remediation)
        editor.query_one("#verification").text = "seed: 1234\nepsilon: 0.0\nthrough step: 249\nexpect: step 250 loss < 2.0"
        editor.query_one("#evidence").text = "\n".join(
            f"{e.panel} | {e.observation} | {', '.join(e.favors)} | {', '.join(e.rules_out)}" for e in example.evidence)
        await pilot.pause()
        editor.settle()                         # the debounced save and lint, now
        assert str(editor.query_one("#lint").render()).startswith("complete: ready to commit"), editor.problems
        assert " x" not in str(editor.query_one("#sections").render())
        saved = read(draft_path(tmp_path, editor.pm))
        assert saved.lesson == example.lesson and len(saved.evidence) == 5
    # reopening the same run and incident offers the draft back
    app2 = PostmortemApp(str(ROOT / "sample_runs" / "long-tail-token"), kb_root=tmp_path)
    async with app2.run_test(size=(120, 40)) as pilot:
        await opened(app2, pilot)
        await pilot.press("e")
        assert app2.screen.restored and app2.screen.query_one("#lesson").text == example.lesson


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_first_draft_in_a_repository_is_ignored_by_git(tmp_path):
    """A draft written before any commit must not be swept up by the user's `git add -A`."""
    import git

    from postmortem.document.draftstore import draft_path
    repo = git.Repo.init(tmp_path)
    app = PostmortemApp(str(ROOT / "sample_runs" / "long-tail-token"), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        editor = app.screen
        editor.query_one("#lesson").text = "a lesson typed before any commit"
        await pilot.pause()
        editor.settle()
        assert draft_path(tmp_path, editor.pm).exists()
    assert ".postmortem/" in (tmp_path / ".git" / "info" / "exclude").read_text()
    repo.git.add(A=True)
    assert not [p for p in repo.git.diff("--cached", "--name-only").splitlines() if p.startswith(".postmortem")]


def spiky_run(path: Path) -> Path:
    """A canonical CSV with a small spike at step 300 and a large one at step 600."""
    import numpy as np
    rng = np.random.default_rng(0)
    steps = np.arange(900)
    loss = 3.0 + 0.02 * rng.standard_normal(len(steps))
    loss[300], loss[600] = 3.6, 6.0
    path.write_text("step,loss\n" + "".join(f"{s},{v:.5f}\n" for s, v in zip(steps, loss)))
    return path


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_dashboard_opens_on_the_largest_incident(tmp_path):
    app = PostmortemApp(str(spiky_run(tmp_path / "metrics.csv")))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        assert [i.step for i in app.session.analysis.incidents] == [300, 600]   # listed by step
        assert app.dashboard.incident.step == 600 and app.screen.query_one("#incidents").cursor_row == 1
        assert "(2/2, the largest)" in str(app.screen.query_one("#status").render())
        await pilot.press("p")
        assert app.dashboard.incident.step == 300 and "largest" not in str(app.screen.query_one("#status").render())
        assert app.screen.query_one("#incidents").cursor_row == 0               # the list follows n/p


def rolled_back_run(tmp_path):
    """Spike at 500, rolled back to 400 and resumed (a second segment, its own spike at 800)."""
    import numpy as np
    rng = np.random.default_rng(2)
    first, second = np.arange(600), np.arange(400, 901)
    loss1 = 3.0 + 0.02 * rng.standard_normal(len(first))
    loss2 = 3.0 + 0.02 * rng.standard_normal(len(second))
    loss1[500], loss2[800 - 400] = 9.0, 4.5
    rows = [*zip(first, loss1), *zip(second, loss2)]
    run = tmp_path / "metrics.csv"
    run.write_text("step,loss\n" + "".join(f"{s},{v:.5f}\n" for s, v in rows))
    return run


@pytest.mark.slow
@pytest.mark.asyncio
async def test_an_incident_in_a_rolled_back_segment_is_drawn_with_its_own_history(tmp_path):
    """Spike at 500, rolled back to 400 and resumed (a second segment, its own spike at 800):
    each incident is drawn over the steps the model lived up to it."""
    import numpy as np
    app = PostmortemApp(str(rolled_back_run(tmp_path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        loss = app.screen.query_one("#panel-loss", MetricPanel)
        assert app.dashboard.incident.step == 500 and app.dashboard.incident.segment == 0
        assert loss.steps.max() == 599 and loss.value_at(500) == (9.0, 500)
        assert "drawn: segment 1/2, steps 0-599" in str(app.screen.query_one("#status").render())
        await pilot.press("n")
        assert app.dashboard.incident.step == 800 and app.dashboard.segment == 1
        assert loss.steps.max() == 900 and loss.value_at(800) == (4.5, 800)
        assert loss.value_at(500)[0] < 3.2                   # the rolled-back spike is not this history
        assert len(np.unique(loss.steps)) == len(loss.steps) == 901


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_segment_drawn_is_said_and_the_others_are_a_key_away(tmp_path):
    """A resumed run: the status line says which segment the panels draw and its steps, and
    [ ] draw the run up to another segment's end, every panel over the same steps."""
    app = PostmortemApp(session=Session.read(str(rolled_back_run(tmp_path))))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        status = lambda: str(app.screen.query_one("#status").render())     # noqa: E731
        loss = app.screen.query_one("#panel-loss", MetricPanel)
        assert "drawn: segment 1/2, steps 0-599 ([ ] others)" in status()
        await pilot.press("right_square_bracket")
        assert app.dashboard.segment == 1 and loss.steps.max() == 900
        assert "drawn: segment 2/2, steps 0-900" in status() and app.dashboard.incident.step == 500
        assert {p.drawing(p.size.width).xlim for p in app.screen.query(MetricPanel)} == {(0, 900)}
        await pilot.press("right_square_bracket")                           # the last: it stays
        assert app.dashboard.segment == 1
        await pilot.press("left_square_bracket")
        assert app.dashboard.segment == 0 and loss.steps.max() == 599 and "segment 1/2" in status()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_another_segments_incident_picked_before_the_hand_over_is_drawn_once_it_is(tmp_path):
    run = str(rolled_back_run(tmp_path))
    app = PostmortemApp(run, loader=slow_hand_over(run))
    async with app.run_test(size=(120, 40)) as pilot:
        await painted_not_handed_over(app, pilot)
        loss = app.screen.query_one("#panel-loss", MetricPanel)
        assert app.dashboard.segment == 0 and loss.steps.max() == 599      # the loader's arrays of segment 0
        await pilot.press("n")
        assert app.dashboard.incident.step == 800 and app.dashboard.segment == 0     # its history is not here yet
        await handed_over(app, pilot)
        await pilot.pause()
        assert app.dashboard.segment == 1 and loss.steps.max() == 900 and loss.value_at(800) == (4.5, 800)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_dashboard_weighs_a_run_over_the_same_data(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    spiky_run(tmp_path / "a" / "metrics.csv")
    spiky_run(tmp_path / "b" / "metrics.csv")
    app = PostmortemApp(str(tmp_path / "a"), against=[str(tmp_path / "b")])
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        top = app.session.incident.hypotheses[0]
        assert top.pattern == "long-tail-token"
        assert any(o.observation.startswith("b spikes at step 600 too") for o in top.supported_by)
        loss = app.screen.query_one("#panel-loss", MetricPanel)                 # b's loss drawn in gray
        assert loss.ghost[0] == "b" and "gray: b" in loss.border_title and len(loss.ghost[1]) == 900
        await pilot.press("z")
        drawn = loss.drawing(loss.size.width)
        ghost_steps = [x for x in drawn.ghost[0] if x == x]           # NaN: where the pen lifts
        steps = [x for x in drawn.line[0] if x == x]
        assert 600 in ghost_steps and max(ghost_steps) <= max(steps)   # zoomed alike


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_status_line_says_nan_at_a_nan_step_and_where_a_value_was_logged(tmp_path):
    """fp16-overflow's loss is NaN from step 250 to 261: at the incident the status line says
    NaN (not step 262's loss), the loss panel lifts its pen there; between two logged steps of
    a sparse log a value says the step it was logged at."""
    import json
    app = PostmortemApp(session=Session.read(str(ROOT / "sample_runs" / "fp16-overflow")))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        status = str(app.screen.query_one("#status").render())
        assert "nan at step 250" in status and "cursor 250  loss=NaN" in status, status
        loss = app.screen.query_one("#panel-loss", MetricPanel)
        assert loss.value_at(255)[1] == 255 and loss.value_at(255)[0] != loss.value_at(255)[0]
        assert loss.value_at(262)[0] == loss.value_at(262)[0]
    rows = [{"step": s, "loss": 2.0 - s / 1e4 if s != 700 else float("nan")} for s in range(0, 1500, 100)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    app = PostmortemApp(session=Session.read(str(tmp_path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        assert "cursor 700  loss=NaN" in str(app.screen.query_one("#status").render())
        await pilot.press("left")
        assert "cursor 699  loss=1.94@600" in str(app.screen.query_one("#status").render())


@pytest.mark.asyncio
async def test_a_run_whose_loss_was_not_found_is_not_called_clean(tmp_path):
    lines = ["step,objective"] + [f"{s},{2 - s / 1000}" for s in range(300)]
    (tmp_path / "m.csv").write_text("\n".join(lines) + "\n")
    app = PostmortemApp(session=Session.read(str(tmp_path / "m.csv")))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        status = str(app.screen.query_one("#status").render())
        assert "no loss was read" in status and "no NaN, no spike" not in status, status


@pytest.mark.asyncio
async def test_an_incident_with_no_convincing_cause_shows_none(real_runs):
    """Two grad-norm spikes that no hypothesis supports (analyze: "no convincing cause"): the
    incidents table names no top cause, and the highlighted row says so."""
    app = PostmortemApp(session=Session.read(str(real_runs / "buildnanogpt-stdout-124m-gnspikes")))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        table = app.screen.query_one("#incidents")
        assert table.row_count == 2
        assert [str(table.get_row_at(i)[3]) for i in range(2)] == ["-", "-"]
        assert "no convincing cause" in str(app.screen.query_one("#row-detail").render())


@pytest.mark.slow
@pytest.mark.asyncio
async def test_zoomed_every_panel_spans_the_incident_window_logged_there_or_not(tmp_path):
    """A metric logged once, far from the incident: zoomed, its panel spans the same steps as
    the loss panel (not an axis of plotext's own choosing)."""
    import json
    rows = [{"step": s, "loss": 2.0 - s / 1e4 + (3.0 if s == 500 else 0)} for s in range(1000)]
    rows[0]["lr"], rows[0]["grad_norm"] = 0.1, 1.0              # a linear and a log-scale panel
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    app = PostmortemApp(session=Session.read(str(tmp_path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("z")
        await pilot.pause()
        panels = {p.panel: p.drawing(p.size.width) for p in app.screen.query(MetricPanel)}
        assert set(panels) == {"loss", "lr", "grad-norm"}
        assert panels["lr"].line is None and panels["grad-norm"].line is None     # nothing in the window
        assert panels["loss"].xlim == panels["lr"].xlim == panels["grad-norm"].xlim == (400, 550)
        assert panels["loss"].yticks is not None                 # a log scale's own values, not log10
        assert panels["loss"].xticks == panels["lr"].xticks and min(panels["lr"].xticks) == 400
        assert ("500" in str(app.screen.query_one("#status").render()))
        await pilot.press("z")
        unzoomed = {p.panel: p.drawing(p.size.width) for p in app.screen.query(MetricPanel)}
        # unzoomed too, every panel spans the run's steps, the metric logged once included
        assert {d.xlim for d in unzoomed.values()} == {(0, 999)} and unzoomed["loss"].yticks is not None
        assert unzoomed["lr"].xticks == unzoomed["loss"].xticks


def test_the_preview_shows_the_front_matter_as_a_yaml_block():
    """Markdown runs front-matter lines together into one paragraph; the preview fences them."""
    from markdown_it import MarkdownIt

    from postmortem.document.draft import draft
    from postmortem.document.markdown import render
    from postmortem.run import read_run
    from postmortem.tui.screens.editor import previewed
    text = render(draft(read_run(str(ROOT / "sample_runs" / "long-tail-token")), "ada"))
    tokens = MarkdownIt().parse(previewed(text))
    fence = tokens[0]
    assert fence.type == "fence" and fence.info == "yaml"
    assert {"learner: ada", "pattern: long-tail-token", "spike_step: 250"} <= set(fence.content.splitlines())
    headings = [t for t in tokens if t.type == "heading_open"]
    assert len(headings) >= 7                              # the seven sections follow, as written
    assert previewed("no front matter") == "no front matter"


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_cursor_and_the_zoom_stay_within_the_steps_logged():
    app = PostmortemApp(session=Session.read(str(ROOT / "sample_runs" / "long-tail-token")))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        for _ in range(20):
            await pilot.press("shift+right")
        assert app.dashboard.cursor == 399                      # the last step, not 450
        for _ in range(50):
            await pilot.press("shift+left")
        assert app.dashboard.cursor == 0
    app = PostmortemApp(session=Session.read(str(ROOT / "sample_runs" / "bad-init")))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        assert app.dashboard.incident.step == 0
        await pilot.press("z")
        lo, hi = app.screen.query_one("#panel-loss", MetricPanel).window
        assert lo == 0 and hi > 0                              # no axis of negative steps


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_run_with_no_incident_has_a_cursor_to_read_values_with():
    app = PostmortemApp(session=Session.read(str(ROOT / "sample_runs" / "healthy")))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        status = lambda: str(app.screen.query_one("#status").render())   # noqa: E731
        assert "no incident (no NaN, no spike, no divergence)" in status() and "cursor 399  loss=" in status()
        await pilot.press("left", "left")
        assert app.dashboard.cursor == 397 and "cursor 397  loss=" in status()


@pytest.mark.asyncio
async def test_the_commit_screen_offers_git_init_only_where_there_is_no_repository(tmp_path):
    import git
    from textual.app import App
    from worked_example import as_learners

    from postmortem.document.markdown import read
    from postmortem.tui.screens.commit import CommitScreen
    pm = read(as_learners(tmp_path / "draft"))
    for where, repository in (("plain", False), ("repo", True)):
        folder = tmp_path / where
        folder.mkdir()
        if repository:
            git.Repo.init(folder)
        app = App()
        async with app.run_test(size=(120, 40)) as pilot:
            screen = CommitScreen(pm, [], folder)
            await app.push_screen(screen)
            await pilot.pause()
            keys = {b.key for _, b, enabled, _ in screen.active_bindings.values() if enabled}
            assert ("f3" in keys) is (not repository), (where, keys)
            if not repository:      # the screen names its own key, not the command line's flags
                said = str(screen.query_one("#commit-plan").render())
                assert "not in a git repository" in said and "f3 makes one there" in said, said
                assert "postmortem" not in said.replace(str(folder), ""), said
                await pilot.press("f3")
                await pilot.pause()
                assert (folder / ".git").is_dir() and screen.ready
                assert "f3" not in {b.key for _, b, enabled, _ in screen.active_bindings.values() if enabled}
