"""The TUI handed a store of several runs: the picker lists them, enter opens the one picked on
the dashboard, as `--run ID` would; escape leaves."""

import pytest
from pilots import opened
from test_stores_frameworks import tb_write

from postmortem.tui.app import PostmortemApp
from postmortem.tui.screens.picker import PickerScreen, runs_to_pick


@pytest.fixture
def logdir(tmp_path):
    root = tmp_path / "tb_logs"
    for k, name in enumerate(("calm", "spiky")):
        points = [(s, "train/loss", 3.0 * 0.99 ** s) for s in range(300)]
        if name == "spiky":
            points[150] = (150, "train/loss", 40.0)
        tb_write(root / name, points)
        event = next((root / name).iterdir())           # named for the day it started
        event.rename(event.with_name(f"events.out.tfevents.{1_700_000_000 + 86400 * k}.host.1.0"))
    return root


def test_runs_to_pick_only_for_a_store_of_several(logdir):
    runs = runs_to_pick(str(logdir), None, f"{logdir}: holds 2 ... --run ID ...")
    assert [r.id for r in runs] == ["spiky", "calm"]                    # newest first
    assert runs_to_pick(str(logdir), None, "no such file or directory") is None
    assert runs_to_pick(str(logdir / "calm"), None, "--run ID") is None   # one run: nothing to pick


@pytest.mark.slow        # the dashboard's loader process
@pytest.mark.asyncio
async def test_the_picker_opens_the_run_picked(logdir):
    app = PostmortemApp(str(logdir), picking=runs_to_pick(str(logdir), None, "--run ID"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        table = app.screen.query_one("#runs")
        assert table.row_count == 2 and table.get_row_at(0)[0] == "spiky"
        await pilot.press("down", "enter")                    # the second row: calm
        await opened(app, pilot)
        assert app.session.error is None and app.session.columns["run"] == "calm"
        assert app.session.log.source.path.endswith("calm") and not isinstance(app.screen, PickerScreen)


@pytest.mark.asyncio
async def test_escape_leaves_without_a_run(logdir):
    app = PostmortemApp(str(logdir), picking=runs_to_pick(str(logdir), None, "--run ID"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
    assert app.session.log is None and app.return_code in (None, 0)
