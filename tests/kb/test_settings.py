"""One knowledge base wherever you stand (issue 26): --kb/--learner, POSTMORTEM_KB and
POSTMORTEM_LEARNER, and the config file `postmortem init` writes, the same for every command;
post-mortems never go into postmortem's own checkout unless it is named."""

import os
import subprocess
import sys
from pathlib import Path

import git
import pytest
from worked_example import as_learners

from postmortem.errors import UserError
from postmortem.kb import settings

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_runs" / "long-tail-token"
IDENTITY = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid",
            "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.invalid"}


def pm(*args, cwd, **env):
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **IDENTITY, **env}, timeout=300)


def test_each_setting_comes_from_the_first_of_flag_variable_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    none = settings.resolve()
    assert (none.kb, none.learner, none.chosen) == (tmp_path, None, False)
    settings.remember(kb=tmp_path / "from-config", learner="cora")
    assert settings.config_path() == Path(os.environ["XDG_CONFIG_HOME"]) / "postmortem" / "config.toml"
    s = settings.resolve()
    assert (s.kb, s.learner, s.chosen) == (tmp_path / "from-config", "cora", True)
    monkeypatch.setenv("POSTMORTEM_KB", str(tmp_path / "from-env"))
    monkeypatch.setenv("POSTMORTEM_LEARNER", "vera")
    s = settings.resolve()
    assert (s.kb, s.learner, s.kb_from, s.learner_from) == (tmp_path / "from-env", "vera", "POSTMORTEM_KB",
                                                            "POSTMORTEM_LEARNER")
    s = settings.resolve("flag-kb", "fay")
    assert (s.kb, s.learner, s.kb_from) == (tmp_path / "flag-kb", "fay", "--kb")
    # remember keeps what the file held
    settings.remember(learner="dora")
    assert settings.read_config() == {"kb": str(tmp_path / "from-config"), "learner": "dora"}
    # drafts live with the knowledge base when one is named, else in the user's state folder
    assert settings.drafts_home(s) == tmp_path / "flag-kb"
    monkeypatch.delenv("POSTMORTEM_KB")
    settings.config_path().unlink()
    assert settings.drafts_home(settings.resolve()) == Path(os.environ["XDG_STATE_HOME"]) / "postmortem"


@pytest.mark.slow
def test_a_broken_config_file_or_learner_is_one_line(tmp_path):
    path = settings.config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('kb = "/x"\nlearner = [1]\n')
    with pytest.raises(UserError, match="`learner` is not text"):
        settings.resolve()
    path.write_text("kb = \n")
    r = pm("lessons", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "config.toml: not TOML" in r.stderr
    path.unlink()
    r = pm("new", SAMPLE, cwd=tmp_path, POSTMORTEM_LEARNER="../x")
    assert r.returncode == 2 and "(POSTMORTEM_LEARNER)" in r.stderr and r.stderr.count("\n") == 1
    r = pm("new", SAMPLE, cwd=tmp_path)
    assert r.returncode == 2 and "who is writing? --learner NAME, or once for all: postmortem init" in r.stderr


@pytest.mark.slow
def test_init_once_then_new_check_commit_lessons_from_any_folder(tmp_path):
    kb, work, other = tmp_path / "post-mortems", tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    r = pm("init", "--kb", kb, "--learner", "ada", cwd=work)
    assert r.returncode == 0, r.stderr
    assert f"knowledge base: {kb}" in r.stdout and "learner: ada" in r.stdout
    assert git.Repo(kb).working_tree_dir == str(kb)                   # made a repository
    draft = as_learners(work / "drafts")
    r = pm("commit", draft, cwd=other)                                # no --kb, --learner, --run
    assert r.returncode == 0, r.stdout + r.stderr
    assert (kb / "learners" / "ada" / "postmortems" / draft.name).is_file()
    assert not (other / "learners").exists() and not (work / "learners").exists()
    r = pm("lessons", "--json", cwd=work)
    assert '"count": 1' in r.stdout
    # new takes the learner from the config file
    r = pm("new", SAMPLE, "-o", "mine.md", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "\nlearner: ada\n" in (work / "mine.md").read_text()


@pytest.mark.slow
def test_nothing_is_committed_into_postmortems_own_checkout_unless_named(tmp_path):
    draft = as_learners(tmp_path / "drafts")
    r = pm("commit", draft, cwd=ROOT / "docs")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "is postmortem's own checkout, not a knowledge base: `postmortem init --kb DIR`" in r.stderr
    assert not (ROOT / "learners" / "ada").exists()
    r = pm("init", "--kb", ROOT / "learners", cwd=tmp_path)
    assert r.returncode == 2 and "inside postmortem's own checkout" in r.stderr
    assert not settings.config_path().exists()


@pytest.mark.slow
def test_init_without_options_says_where_a_commit_would_go_as_commit_does_it(tmp_path):
    """`postmortem init` in the checkout, the README's first folder, does not promise the
    repository you stand in, which `commit` refuses; nor one where there is none."""
    said = {where: pm("init", cwd=folder) for where, folder in
            (("checkout", ROOT / "docs"), ("nowhere", tmp_path))}
    assert all(r.returncode == 0 for r in said.values()), said
    assert "you stand in postmortem's own checkout, where `commit` writes nothing: `postmortem init --kb DIR`" \
        in said["checkout"].stdout
    assert "you stand in no git repository, so `commit` has nowhere to write" in said["nowhere"].stdout
    git.Repo.init(tmp_path / "mine")
    assert "post-mortems go to the git repository you stand in" in pm("init", cwd=tmp_path / "mine").stdout


# --- the dashboard: the same knowledge base, drafts offered back from any folder --------------

@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_dashboard_keeps_drafts_with_the_knowledge_base_and_offers_them_back_anywhere(
        tmp_path, monkeypatch):
    from pilots import opened

    from postmortem.tui.app import PostmortemApp
    from postmortem.tui.screens.editor import EditorScreen
    kb = tmp_path / "kb"
    git.Repo.init(kb)
    settings.remember(kb=kb, learner="ada")
    mine = "A spike on one batch with a smooth LR: look at the batch first."
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        app = PostmortemApp(str(SAMPLE))
        app.session.use_settings(settings.resolve())
        async with app.run_test(size=(120, 40)) as pilot:
            await opened(app, pilot)
            await pilot.press("e")
            await pilot.pause(0.2)
            editor = app.screen
            assert isinstance(editor, EditorScreen) and editor.pm.learner == "ada"
            assert editor.store.path == kb / ".postmortem" / "drafts" / "19-spike-001-250.md"
            if folder == "one":
                assert not editor.restored
                editor.query_one("#lesson").text = mine
                await app.workers.wait_for_complete()
                editor.settle()
            else:                                  # reopened from another folder: offered back
                assert editor.restored and editor.pm.lesson == mine
    assert not (tmp_path / "one" / ".postmortem").exists() and not (tmp_path / "two" / ".postmortem").exists()


@pytest.mark.asyncio
async def test_the_commit_screen_asks_before_postmortems_own_checkout(tmp_path):
    from textual.app import App

    from postmortem.document.markdown import read
    from postmortem.tui.screens.commit import CommitScreen
    pm = read(as_learners(tmp_path / "draft"))
    app = App()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = CommitScreen(pm, [], ROOT)
        await app.push_screen(screen)
        await pilot.pause()
        plan = str(screen.query_one("#commit-plan").render())
        assert not screen.ready and "is postmortem's own checkout, not a knowledge base" in plan
        screen.commit()
        assert screen.committed is None and not (ROOT / "learners" / "ada").exists()
        # the folder typed instead, made a repository with f3, takes the commit
        screen.query_one("#kb").value = str(tmp_path / "mine")
        await pilot.pause()
        await pilot.press("f3")
        await pilot.pause()
        assert screen.ready, str(screen.query_one("#commit-plan").render())
        screen.commit()
        assert screen.committed is not None
        assert screen.committed.postmortem == tmp_path / "mine" / "learners" / "ada" / "postmortems" / pm.filename
    assert settings.read_config() == {"kb": str(tmp_path / "mine"), "learner": "ada"}   # kept for next time


def test_a_replay_is_kept_with_the_knowledge_base_and_offered_back_in_a_later_session(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from postmortem.diagnose.models import Evidence
    from postmortem.replay.models import ReplayResult
    from postmortem.tui.session import Session
    kb = tmp_path / "kb"
    git.Repo.init(kb)
    settings.remember(kb=kb, learner="ada")
    result = ReplayResult(run_id="19-spike-001", incident_step=250, checkpoint=200, device="cpu",
                          faithful_max_diff=0.0, faithful=True, arms={}, probes={}, hypotheses=[],
                          evidence=[Evidence("batch", "the spike goes with the batch", favors=["long-tail-token"])])
    monkeypatch.chdir(tmp_path)
    first = Session(str(SAMPLE))
    first.use_settings(settings.resolve())
    first.log = SimpleNamespace(run_id="19-spike-001", source=SimpleNamespace(extras={}))
    first.replays[250] = result
    assert (kb / ".postmortem" / "replays" / "19-spike-001-250.json").is_file()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    later = Session(str(SAMPLE))
    later.use_settings(settings.resolve())
    assert later.replay_of(250) is None                      # the run not read yet: no id to look up
    later.log = SimpleNamespace(run_id="19-spike-001", source=SimpleNamespace(extras={}))
    assert later.replay_of(250) == result and later.replay_of(300) is None
