"""The TUI's flows through Textual's Pilot, from a spike to a committed post-mortem: a real
replay of the mini-GPT sample in a child process, a real git repository, the files read back."""

import json
import time
from pathlib import Path

import git
import pytest
from pilots import opened

from postmortem.document.draftstore import draft_path, typed_path
from postmortem.document.markdown import read
from postmortem.tui.app import PostmortemApp
from postmortem.tui.screens.commit import CommitScreen
from postmortem.tui.screens.editor import EditorScreen
from postmortem.tui.screens.lessons import LessonsScreen
from postmortem.tui.screens.replay import ReplayScreen
from postmortem.tui.widgets.hypotheses import HypothesesTable

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_runs" / "long-tail-token"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    for k, v in {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid",
                 "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.invalid"}.items():
        monkeypatch.setenv(k, v)
    r = git.Repo.init(tmp_path / "kb")
    (tmp_path / "kb" / "README.md").write_text("our post-mortems\n")
    r.index.add(["README.md"])
    r.index.commit("start")
    return tmp_path / "kb"


async def until(pilot, predicate, seconds=120.0):
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < seconds, "timed out"
        await pilot.pause(0.2)


async def replayed(app, pilot, arms_off=()):
    await pilot.press("r")
    screen = app.screen
    assert isinstance(screen, ReplayScreen) and screen.missing is None
    for arm in arms_off:
        screen.query_one("#arms").deselect(arm)
    await pilot.press("r")
    assert screen.state == "running"
    await app.workers.wait_for_complete()        # the worker following the child: it has ended
    await pilot.pause()
    return screen


@pytest.mark.asyncio
async def test_from_the_spike_to_a_committed_postmortem(repo):
    app = PostmortemApp(str(SAMPLE), kb_root=repo)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        # the replay: real arms in a child process, the evidence arriving row by row
        screen = await replayed(app, pilot, arms_off=("fp32", "restored-moments"))
        assert screen.state == "done", str(screen.query_one("#replay-status").render())
        assert screen.query_one("#evidence").row_count == len(screen.evidence) >= 4
        kinds = [m.kind for m in screen.process.messages]
        last_step = len(kinds) - 1 - kinds[::-1].index("progress")
        assert kinds.index("evidence") < last_step          # rows arrive while arms still run
        swap = next(e for e in screen.evidence if e.observation.startswith("swap-batch arm"))
        assert "is gone" in swap.observation and "long-tail-token" in swap.favors
        assert screen.result.hypotheses[0].pattern == "long-tail-token"
        assert not any(e.observation.startswith("fp32 arm") for e in screen.evidence)
        # the column cuts an observation; the highlighted row shows whole under the table
        detail = lambda: str(screen.query_one("#evidence-detail").render())        # noqa: E731
        assert screen.evidence[0].observation in " ".join(detail().split())
        table = screen.query_one("#evidence")
        table.focus()
        row = next(i for i, e in enumerate(screen.evidence) if e is swap)
        for _ in range(row):
            await pilot.press("down")
        assert table.cursor_row == row
        assert "rules out" in detail() and swap.observation in " ".join(detail().split())
        await pilot.press("escape")
        assert app.session.replays[250].faithful is True
        # the editor opens with the replay's evidence in section 3 and the ranking in section 2
        await pilot.press("e")
        editor = app.screen
        assert isinstance(editor, EditorScreen)
        pm = editor.collect()
        assert any("swap-batch arm" in e.observation for e in pm.evidence)
        assert pm.hypotheses[0].pattern == "long-tail-token" and pm.pattern == "long-tail-token"
        assert "rare pieces" in (pm.symptoms.unusual_tokens or "")
        # under section 2, the highlighted hypothesis with the replay's rows for and against it
        hypothesis = str(editor.query_one("#hypothesis-detail").render())
        assert hypothesis.startswith("long-tail-token") and f"+ [batch] {swap.observation}" in hypothesis
        # section 2: move a hypothesis down and back, dismiss one with a reason
        table = editor.query_one("#hypotheses", HypothesesTable)
        table.focus()
        await pilot.press("down", "shift+down")
        assert [h.pattern for h in table.hypotheses][1:3] == [pm.hypotheses[2].pattern, pm.hypotheses[1].pattern]
        await pilot.press("shift+up")
        assert [h.pattern for h in table.hypotheses] == [h.pattern for h in pm.hypotheses]
        target = table.hypotheses[1].pattern
        await pilot.press("ctrl+d")
        await pilot.press(*"ruled out by the swap", "enter")
        assert table.hypotheses[1].dismissed == "ruled out by the swap"
        # section 5: the pattern's usual remedies, enter adds one
        remedies = editor.query_one("#remedies")
        assert remedies.option_count >= 3
        remedies.focus()
        await pilot.press("enter")
        first = str(remedies.get_option_at_index(0).prompt)
        assert editor.query_one("#remediation").text == first
        editor.query_one("#root_cause").text = ("Half of the batch of step 250 was junk of long-tail tokens "
                                                "that the model had almost never seen.")
        editor.query_one("#verification").text = ("seed: 1234\nepsilon: 0.0\nthrough step: 249\n"
                                                  "expect: step 250 loss < 2.0")
        editor.query_one("#lesson").text = "A spike on one batch with a smooth LR: look at the batch first."
        await app.workers.wait_for_complete()   # the figure, drawn with the replay's arms
        await pilot.pause()
        editor.settle()                         # the debounced save and lint, now
        assert editor.pm.figure == draft_path(repo, editor.pm).with_suffix(".png").name
        assert not editor.problems, editor.problems
        assert "7 Lesson ok" in str(editor.query_one("#sections").render())
        saved = read(draft_path(repo, editor.pm))
        assert saved.hypotheses[1].pattern == target and saved.hypotheses[1].dismissed
        # the preview shows the whole document
        await pilot.press("f2")
        assert editor.query_one("#preview").display
        # commit: the files and the message, then git
        await pilot.press("ctrl+g")
        commit = app.screen
        # nobody named (kb.settings): the screen asks who writes, never takes the OS user
        assert isinstance(commit, CommitScreen) and not commit.ready and commit.pm.learner == ""
        assert "who is writing?" in str(commit.query_one("#commit-plan").render())
        commit.query_one("#learner").value = "ada"
        await pilot.pause()
        assert commit.ready
        plan = str(commit.query_one("#commit-plan").render())
        assert "learners/" in plan and "lessons.md" in plan
        await pilot.press("enter")
        assert commit.committed is not None
        # what was asked is kept for the next time, from any folder
        from postmortem.kb.settings import read_config
        assert read_config() == {"kb": str(repo), "learner": "ada"}
        head = git.Repo(repo).head.commit
        assert head.message.startswith("post-mortem 19-spike-001 (long-tail-token)")
        # the merge attribute rides in the same commit, announced before and after
        assert set(head.stats.files) == {f"learners/ada/postmortems/{commit.pm.filename}",
                                         f"learners/ada/postmortems/{commit.pm.figure_filename}",
                                         "learners/ada/lessons.md", ".gitattributes"}
        assert "(the figure)" in plan
        assert "merge=union" in plan and "merge=union" in str(commit.query_one("#commit-plan").render())
        written = read(repo / "learners" / "ada" / "postmortems" / commit.pm.filename)
        assert written.lesson.startswith("A spike on one batch") and written.hypotheses[1].dismissed
        assert written.figure == commit.pm.figure_filename
        assert not draft_path(repo, editor.pm).exists()           # committed: the draft is gone
        assert not draft_path(repo, editor.pm).with_suffix(".png").exists()
        # the lesson is in the browser
        await pilot.press("l")
        lessons = app.screen
        assert isinstance(lessons, LessonsScreen)
        rows = [lessons.query_one("#lessons").get_row_at(i) for i in range(lessons.query_one("#lessons").row_count)]
        assert any(str(r[2]) == "ada" and str(r[1]).startswith("A spike on one batch") for r in rows)


@pytest.mark.asyncio
async def test_the_commit_screen_lists_the_problems_by_section(tmp_path):
    app = PostmortemApp(str(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        await pilot.pause(0.2)
        await pilot.press("ctrl+g")
        commit = app.screen
        assert isinstance(commit, CommitScreen)
        text = str(commit.query_one("#commit-problems").render())
        assert "Not ready to commit" in text and "4. Root cause" in text and "7. Lesson" in text
        assert not (tmp_path / "learners").exists()


@pytest.mark.asyncio
async def test_a_run_without_replay_says_what_is_missing(tmp_path):
    run = tmp_path / "metrics.jsonl"
    lines = [f'{{"step": {s}, "loss": {3.0 - s / 1000 + (4.0 if s == 300 else 0)}}}' for s in range(400)]
    run.write_text("\n".join(lines) + "\n")
    app = PostmortemApp(str(run), kb_root=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        assert app.dashboard.incident is not None
        await pilot.press("r")
        screen = app.screen
        assert isinstance(screen, ReplayScreen) and "manifest.json" in screen.missing
        assert "Recorder" in str(screen.query_one("#replay-missing").render())
        await pilot.press("r")                      # nothing to start
        assert screen.process is None
        await pilot.press("escape")
        assert not isinstance(app.screen, ReplayScreen)


@pytest.mark.asyncio
async def test_a_replay_that_crashes_in_the_runs_code_shows_it_and_the_app_goes_on(tmp_path):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)
    (run / "broken_replay.py").write_text(
        "def make_replay(manifest, run_dir=None, device='cpu'):\n"
        "    raise RuntimeError('CUDA out of memory in my_model.py line 12')\n")
    manifest = (run / "manifest.json").read_text()
    (run / "manifest.json").write_text(manifest.replace("postmortem.minigpt.replay:make_replay",
                                                        "broken_replay:make_replay"))
    app = PostmortemApp(str(run), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        screen = await replayed(app, pilot)
        assert screen.state == "failed"
        status = str(screen.query_one("#replay-status").render())
        assert "replay failed" in status and "CUDA out of memory in my_model.py line 12" in status
        await pilot.press("escape")
        assert not isinstance(app.screen, ReplayScreen)
        await pilot.press("z")                          # the dashboard still answers
        assert app.dashboard.zoomed


@pytest.mark.asyncio
async def test_escape_cancels_a_running_replay():
    app = PostmortemApp(str(ROOT / "sample_runs" / "optimizer-reset"))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("r")
        screen = app.screen
        await pilot.press("r")
        await until(pilot, lambda: any(m.kind == "progress" for m in screen.process.messages) or
                    screen.state != "running", 90)
        assert screen.state == "running"
        await pilot.press("escape")
        assert screen.state == "cancelled" and not screen.process.running
        assert not screen.query_one("#replay-bar").display     # no bar goes on sweeping
        assert str(screen.query_one("#replay-status").render()).startswith("cancelled")
        assert isinstance(app.screen, ReplayScreen)        # the first escape cancels, the next goes back
        await pilot.press("escape")
        assert not isinstance(app.screen, ReplayScreen)


@pytest.mark.asyncio
async def test_a_section_opens_in_the_users_editor(tmp_path, monkeypatch):
    script = tmp_path / "fake-editor"
    script.write_text("#!/bin/sh\nprintf 'written in my editor\\n' >> \"$1\"\n")
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(script))
    monkeypatch.delenv("VISUAL", raising=False)
    app = PostmortemApp(str(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        editor = app.screen
        editor.query_one("#root_cause").text = "first words"
        editor.query_one("#root_cause").focus()
        await pilot.press("ctrl+o")
        assert editor.query_one("#root_cause").text == "first wordswritten in my editor"


@pytest.mark.asyncio
async def test_the_highlighted_hypothesis_shows_what_the_run_says_for_and_against_it(tmp_path):
    app = PostmortemApp(str(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        editor = app.screen
        detail = lambda: str(editor.query_one("#hypothesis-detail").render())     # noqa: E731
        diagnosed = {h.pattern: h for h in app.session.incident_at(250).hypotheses}
        top = diagnosed["long-tail-token"]
        assert detail().startswith("long-tail-token [grad-norm]")
        assert f"+ [loss] {top.supported_by[1].observation}" in detail()
        assert f"tells it apart: {top.discriminate}" in detail()
        table = editor.query_one("#hypotheses", HypothesesTable)
        table.focus()
        row = next(i for i, h in enumerate(table.hypotheses) if h.pattern == "lr-discontinuity")
        for _ in range(row):
            await pilot.press("down")
        against = diagnosed["lr-discontinuity"].contradicted_by
        assert detail().startswith("lr-discontinuity [lr]")
        assert f"- [lr] {against[1].observation}" in detail()
        assert detail().count(against[0].observation) == 1       # the table's own, not again


@pytest.mark.asyncio
async def test_typing_that_does_not_parse_yet_survives_a_reopen(tmp_path):
    half = {"evidence": "the batch of step 250 looks odd, check its tokens",      # no | yet
            "verification": "seed: 1234\nexpect: loss goes back down soon"}       # not an expectation yet
    app = PostmortemApp(str(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        editor = app.screen
        for name, text in half.items():
            editor.query_one(f"#{name}").text = text
        await pilot.pause()
        editor.settle()                         # the debounced save and lint, now
        saved = read(draft_path(tmp_path, editor.pm))
        assert saved.evidence == [] and saved.verification.seed == 1234     # the document: what parses
    app = PostmortemApp(str(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        assert app.screen.restored
        for name, text in half.items():           # the inputs: every word as typed
            assert app.screen.query_one(f"#{name}").text == text


@pytest.mark.asyncio
async def test_a_restored_draft_can_be_set_aside_to_start_over(tmp_path):
    app = PostmortemApp(str(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        app.screen.query_one("#lesson").text = "a lesson I want back"
        await app.workers.wait_for_complete()       # the figure, drawn beside the draft
        await pilot.pause()
        app.screen.settle()                         # the debounced save and lint, now
        path = app.screen.path
        drawn = path.with_suffix(".png").stat().st_mtime_ns
        assert read(path).figure == path.with_suffix(".png").name
    app = PostmortemApp(str(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        editor = app.screen
        assert editor.restored and editor.query_one("#lesson").text == "a lesson I want back"
        await app.workers.wait_for_complete()
        # the restored draft keeps its figure (it may hold a replay's arms): not drawn again
        assert path.with_suffix(".png").stat().st_mtime_ns == drawn and editor.pm.figure
        await pilot.press("f8", "n")                          # no: nothing changes
        assert editor.query_one("#lesson").text == "a lesson I want back" and path.exists()
        await pilot.press("f8", "y")
        assert app.screen is editor and editor.query_one("#lesson").text == ""
        assert editor.query_one("#root_cause").text == "" and not editor.restored
        await app.workers.wait_for_complete()       # started over: the figure drawn again, shown
        await pilot.pause()
        assert editor.pm.figure == path.with_suffix(".png").name
        backup = path.with_name(path.name + ".bak")
        assert read(backup).lesson == "a lesson I want back"  # set aside, not deleted
        assert "a lesson I want back" in path.with_suffix(".typed.json.bak").read_text()
        editor.query_one("#lesson").text = "a new lesson"
        await pilot.pause()
        editor.settle()                         # the debounced save and lint, now
        assert read(path).lesson == "a new lesson"


@pytest.mark.asyncio
async def test_the_commit_screen_keeps_the_run_relative_to_the_knowledge_base(repo, tmp_path):
    """A run inside the knowledge base's repository is committed as a path from its root (the
    post-mortem travels with a clone), as `postmortem commit` does."""
    import shutil

    from textual.app import App
    from worked_example import as_learners
    run = repo / "runs" / "long-tail-token"
    shutil.copytree(SAMPLE, run)
    pm = read(as_learners(tmp_path / "draft")).model_copy(update={"run": str(run)})
    app = App()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = CommitScreen(pm, [], repo)
        await app.push_screen(screen)
        screen.query_one("#learner").value = "ada"
        await pilot.pause()
        screen.commit()
        assert screen.committed is not None, str(screen.query_one("#commit-plan").render())
    assert read(screen.committed.postmortem).run == "runs/long-tail-token"


@pytest.mark.asyncio
async def test_a_replay_taken_back_into_the_editor_keeps_every_line_typed_in_its_place(tmp_path):
    from postmortem.diagnose.models import Evidence
    from postmortem.replay.models import ReplayResult
    mine = "the fp16 loss scale was too high at 262144 and overflowed at step 250"
    app = PostmortemApp(str(SAMPLE), kb_root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("e")
        editor = app.screen
        row = editor.query_one("#evidence").text.splitlines()[0]
        editor.query_one("#evidence").text = f"{mine}\n{row}"
        editor.query_one("#verification").text = "seed: 0 / epsilon: zero"
        await pilot.pause()
        editor.settle()
        await pilot.press("escape")
        inc = app.session.incident_at(250)
        rows = [Evidence("batch", "the batch swapped: no spike", favors=["long-tail-token"]),
                Evidence("loss", "faithful to the run", rules_out=["bad-init"])]
        app.session.replays[250] = ReplayResult(
            run_id=app.session.log.run_id, incident_step=250, checkpoint=200, device="cpu",
            faithful_max_diff=0.0, faithful=True, arms={}, probes={}, evidence=rows,
            hypotheses=list(inc.hypotheses))
        await pilot.press("e")                    # reopened: the kept replay merged in on mount
        editor = app.screen
        await pilot.pause()
        shown = editor.query_one("#evidence").text.splitlines()
        assert shown[:2] == [mine, row] and len(shown) == 4
        assert editor.query_one("#verification").text == "seed: 0 / epsilon: zero"
        editor.settle()
        typed = json.loads(typed_path(draft_path(tmp_path, editor.pm)).read_text())
        assert typed["evidence"].splitlines()[0] == mine
        assert mine in draft_path(tmp_path, editor.pm).read_text()
        assert f"line 1 of section 3 could not be read: {mine}" in [p.problem for p in editor.problems]
