"""The numbers of a post-mortem are checked against its run by default (issue 26): `check` and
`commit` find the run the front matter names, as `verify` does, with no --run, from another
folder, into a knowledge base that is a repository of its own."""

import os
import subprocess
import sys
from pathlib import Path

import git
import pytest
from worked_example import as_learners

ROOT = Path(__file__).resolve().parents[2]
IDENTITY = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid",
            "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.invalid"}


def pm(*args, cwd, **env):
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **IDENTITY, **env}, timeout=300)


@pytest.fixture
def places(tmp_path):
    """(the draft, outside any repository; the knowledge base, a repository of its own; the
    folder the commands are typed in, neither of them)."""
    kb = tmp_path / "kb"
    git.Repo.init(kb, initial_branch="main")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return as_learners(tmp_path / "drafts"), kb, elsewhere


@pytest.mark.slow
def test_a_number_the_run_contradicts_fails_check_and_is_not_committed(places):
    draft, kb, elsewhere = places
    assert "| lr | 0.001301 |" in draft.read_text()
    draft.write_text(draft.read_text().replace("| lr | 0.001301 |", "| lr | 0.01 |"))
    r = pm("check", draft, cwd=elsewhere)
    assert r.returncode == 1 and r.stdout.splitlines() == ["Symptoms: lr is 0.01 but the run says 0.001301"], r.stdout
    r = pm("commit", draft, cwd=elsewhere, POSTMORTEM_KB=str(kb))
    assert r.returncode == 1 and "lr is 0.01 but the run says 0.001301" in r.stdout
    assert "not committed: 1 problem(s)" in r.stderr
    assert not (kb / "learners").exists() and not git.Repo(kb).head.is_valid()


@pytest.mark.slow
def test_a_true_draft_is_committed_with_its_numbers_checked(places):
    draft, kb, elsewhere = places
    r = pm("check", draft, cwd=elsewhere)
    assert r.returncode == 0 and r.stdout.strip() == (
        f"{draft}: complete and true to the run {ROOT / 'sample_runs' / 'long-tail-token'}"), r.stdout
    r = pm("commit", draft, "--kb", kb, cwd=elsewhere)              # the draft's own learner, ada
    assert r.returncode == 0, r.stderr
    committed = kb / "learners" / "ada" / "postmortems" / draft.name
    assert "\nnumbers:" not in committed.read_text()
    assert [c.message.split(" (")[0] for c in git.Repo(kb).iter_commits()] == ["post-mortem 19-spike-001"]


@pytest.mark.slow
def test_a_run_that_is_nowhere_is_said_and_commit_needs_no_run_check(places):
    draft, kb, elsewhere = places
    gone = elsewhere / "gone-run"
    draft.write_text(draft.read_text().replace(f"run: {ROOT}/sample_runs/long-tail-token", f"run: {gone}"))
    r = pm("check", draft, cwd=elsewhere)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        f"Symptoms: numbers not checked: front matter `run: {gone}` is not at {gone}; --run RUN names it, "
        "or --no-run-check goes without the comparison"]
    r = pm("commit", draft, "--kb", kb, cwd=elsewhere)
    assert r.returncode == 1 and "numbers not checked" in r.stdout and not (kb / "learners").exists()
    # --run names the run where it is now
    assert pm("check", draft, "--run", ROOT / "sample_runs" / "long-tail-token", cwd=elsewhere).returncode == 0
    r = pm("check", draft, "--no-run-check", cwd=elsewhere)
    assert r.returncode == 0 and "numbers not checked against the run (--no-run-check)" in r.stdout
    r = pm("commit", draft, "--kb", kb, "--no-run-check", cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    text = (kb / "learners" / "ada" / "postmortems" / draft.name).read_text()
    assert "\nnumbers: not checked against the run\n" in text.split("\n---\n")[0]
    # --run and --no-run-check say opposite things: refused in one line
    r = pm("check", draft, "--no-run-check", "--run", gone, cwd=elsewhere)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr


def test_a_document_naming_no_run_is_told_how_to_name_one(places):
    draft, kb, elsewhere = places
    draft.write_text(draft.read_text().replace(f"run: {ROOT}/sample_runs/long-tail-token\n", ""))
    r = pm("check", draft, "--json", cwd=elsewhere)
    import json
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["run"] is None and out["problems"] == [{
        "section": "Symptoms", "problem": "numbers not checked: the document names no run (front matter `run`); "
                                          "--run RUN names it, or --no-run-check goes without the comparison"}]
