"""The ranked causes on the dashboard: a pane beside the incidents at 120x40, one key (c, in
the footer) at 80x24, for the incident highlighted in the incidents table."""

from pathlib import Path

import pytest
from pilots import footer_line, opened, screen_lines
from test_tui import spiky_run

from postmortem.tui.app import PostmortemApp
from postmortem.tui.dialogs import CausesScreen
from postmortem.tui.session import Session

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "sample_runs" / "long-tail-token")


def pane_text(app) -> str:
    return " ".join(str(app.screen.query_one("#causes-text").render()).split())


@pytest.mark.asyncio
async def test_the_dashboard_shows_the_causes_ranked_with_their_evidence_at_120x40():
    app = PostmortemApp(session=Session.read(SAMPLE))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.pause()
        pane = app.screen.query_one("#causes")
        assert pane.display and "causes of the spike at step 250" in str(pane.border_title)
        causes = app.session.incident.hypotheses
        top, second = causes[0], causes[1]
        shown = pane_text(app)
        assert f"1. {top.pattern} {top.score:.2f}" in shown and f"2. {second.pattern}" in shown
        for seen in top.supported_by:
            assert f"+ [{seen.panel}] {seen.observation}" in shown
        for seen in second.contradicted_by:
            assert f"- [{seen.panel}] {seen.observation}" in shown
        assert f"to tell {top.pattern} from {second.pattern}: {top.discriminate}" in shown
        # on the screen as a person reads it, not only in the widget
        screen = "\n".join(screen_lines(app))
        assert f"1. {top.pattern}" in screen and "+ [grad-norm]" in screen


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_pane_follows_the_incident_highlighted(tmp_path):
    session = Session.read(str(spiky_run(tmp_path / "metrics.csv")))
    app = PostmortemApp(session=session)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.pause()
        table = app.screen.query_one("#incidents")
        assert table.cursor_row == 1 and "step 600" in str(app.screen.query_one("#causes").border_title)
        table.focus()
        await pilot.press("up")                              # highlighted, not yet marked
        await pilot.pause()
        assert "step 300" in str(app.screen.query_one("#causes").border_title)
        first = session.analysis.incidents[0].hypotheses[0]
        assert f"1. {first.pattern}" in pane_text(app)
        await pilot.press("c")                               # the whole ranking of that incident
        assert isinstance(app.screen, CausesScreen) and "step 300" in app.screen.title_text


@pytest.mark.asyncio
async def test_at_80x24_the_causes_are_one_key_away_named_in_the_footer():
    app = PostmortemApp(session=Session.read(SAMPLE))
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        await pilot.pause()
        assert not app.screen.query_one("#causes").display          # no room: the key instead
        footer = await footer_line(app, pilot)
        assert "c Causes" in footer and "f1 Help" in footer, footer
        await pilot.press("c")
        assert isinstance(app.screen, CausesScreen)
        await pilot.pause()
        shown = "\n".join(screen_lines(app))
        hypotheses = app.session.incident.hypotheses
        assert "1. long-tail-token" in shown and "to tell long-tail-token from" in shown
        assert f"{len(hypotheses)}. {hypotheses[-1].pattern}" in app.screen.text     # every cause
        await pilot.press("escape")
        assert not isinstance(app.screen, CausesScreen)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_an_incident_with_no_convincing_cause_says_so_in_the_pane(real_runs):
    app = PostmortemApp(session=Session.read(str(real_runs / "buildnanogpt-stdout-124m-gnspikes")))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        assert "no convincing cause" in pane_text(app)


@pytest.mark.asyncio
async def test_the_pane_says_why_no_cause_has_support():
    """A log of the loss alone (no LR, grad norm or loss scale): every cause scores 0, and the
    pane says what the analysis says of it (`no_cause`), not the generic words."""
    log = ROOT / "benchmarks" / "accuracy" / "fresh" / "issue-keras-21-epoch-divergence" / "console.log"
    app = PostmortemApp(session=Session.read(str(log)))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.pause()
        why = app.session.incident.no_cause
        assert why and why.startswith("no LR, grad norm or loss scale was logged")
        shown = pane_text(app)
        assert f"no convincing cause: {' '.join(why.split())}" in shown
        assert "none has support in the run" not in shown
