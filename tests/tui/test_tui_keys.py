"""Keys that cannot surprise: a sentence typed wherever the focus is on a screen where a person
types runs no command; the focused panel says so in its title; the lesson stays one line."""

from pathlib import Path

import pytest
from pilots import opened, screen_lines
from textual.keys import key_to_character

from postmortem.tui.app import PostmortemApp
from postmortem.tui.focus import MARK
from postmortem.tui.screens.editor import EditorScreen
from postmortem.tui.screens.lessons import LessonsScreen
from postmortem.tui.session import Session

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "sample_runs" / "long-tail-token")
SENTENCE = "quiz: we crawl to pay, d n? []"      # every character bound anywhere in the app


def focusables(screen) -> list:
    return [w for w in screen.focus_chain if w.focusable]


def letters_bound(screen) -> list[str]:
    """The keys of a printable character (a letter, ?, [ ...) that would act on `screen` now."""
    return sorted(b.key for _, b, enabled, _ in screen.active_bindings.values()
                  if enabled and (key_to_character(b.key) or "").isprintable() and key_to_character(b.key))


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_sentence_typed_anywhere_in_the_editor_runs_no_command(tmp_path):
    app = PostmortemApp(session=Session.read(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        editor = app.screen
        assert isinstance(editor, EditorScreen)
        table = editor.query_one("#hypotheses")
        before = [(h.pattern, h.dismissed) for h in table.hypotheses]
        theme = app.theme
        widgets = focusables(editor)
        assert {"hypotheses", "remedies", "lesson", "pattern"} <= {w.id for w in widgets}
        for widget in widgets:
            widget.focus()
            await pilot.pause()
            assert letters_bound(editor) == [], (widget.id, letters_bound(editor))
            if widget.id not in ("hypotheses", "remedies", "lesson", "pattern"):
                continue                    # typed into: the other text areas and inputs alike
            await pilot.press(*SENTENCE)
            await pilot.pause()
            assert app.screen is editor, (widget.id, app.screen)              # no lessons, no dialog
            assert app.theme == theme and [(h.pattern, h.dismissed) for h in table.hypotheses] == before
        # the hypotheses keep their own keys, as ctrl keys
        table.focus()
        await pilot.press("ctrl+d")
        await pilot.press(*"the LR is smooth", "enter")
        assert table.hypotheses[table.cursor_row].dismissed == "the LR is smooth"


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_lessons_screen_takes_letters_as_text(tmp_path):
    app = PostmortemApp(session=Session.read(SAMPLE), kb_root=ROOT)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("l")
        lessons = app.screen
        assert isinstance(lessons, LessonsScreen)
        lessons.query_one("#lessons").focus()                   # a table, on a screen where one types
        await pilot.pause()
        assert letters_bound(lessons) == []
        await pilot.press(*"look")
        assert app.screen is lessons and len(app.screen_stack) == 3     # no second lessons screen
        assert lessons.query_one("#filter").value == "look"            # the typing went to the filter


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_focused_panel_says_so_in_its_title(tmp_path):
    app = PostmortemApp(session=Session.read(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.pause()
        # the panels came in the first frame (a session read): the focus still starts here
        assert app.focused.id == "incidents" and app.focused.border_title == f"{MARK}incidents"
        seen = []
        for _ in range(len(focusables(app.screen))):
            await pilot.press("tab")
            await pilot.pause()
            focused = app.focused
            titled = [w for w in app.screen.query("*") if str(w.border_title or "").startswith(MARK)]
            assert titled == [focused], (focused, titled)               # the focused one, and only it
            seen.append(str(focused.border_title))
            assert str(focused.border_title)[:16] in "\n".join(screen_lines(app))     # drawn
        assert any("loss" in t for t in seen) and any("incidents" in t for t in seen)
        await pilot.press("e")
        await pilot.pause()
        assert str(app.focused.border_title) == f"{MARK}4. Root cause"      # the first empty section


@pytest.mark.slow
@pytest.mark.asyncio
async def test_enter_in_the_lesson_moves_on_and_the_lesson_stays_one_line(tmp_path):
    app = PostmortemApp(session=Session.read(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        editor = app.screen
        lesson = editor.query_one("#lesson")
        lesson.focus()
        await pilot.press(*"Look at the batch", "enter")
        assert app.focused is not lesson and lesson.text == "Look at the batch"
        lesson.focus()
        lesson.move_cursor(lesson.document.end)
        from textual import events
        lesson.post_message(events.Paste(" first,\nthen the LR."))
        await pilot.pause()
        assert lesson.text == "Look at the batch first, then the LR."
        editor.settle()
        assert not [p for p in editor.problems if "Lesson" in str(p)], editor.problems
