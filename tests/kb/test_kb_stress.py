"""The knowledge base under stress, on real git repositories: many commits at once, commits
killed at random moments, and names chosen to escape."""

import multiprocessing as mp
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import git
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_kb_commit import IDENTITY, assert_clean_kb, document

from postmortem.document.markdown import parse, render
from postmortem.errors import KBError
from postmortem.files import check_name
from postmortem.kb.commit import commit, open_repo
from postmortem.kb.journal import Journal
from postmortem.kb.lessons import parse_lessons

pytestmark = pytest.mark.slow


def _repo(root: Path):
    repo = git.Repo.init(root, initial_branch="main")
    (root / "notes.txt").write_text("mine\n")
    repo.git.add("notes.txt")
    repo.git.commit("-m", "start")
    return repo


@pytest.fixture
def identity(monkeypatch):
    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)


def _commit_one(args):
    """One process: commit its post-mortem, retrying a refusal once the others are done."""
    root, run_id, amend = args
    text = document(run_id, lesson=f"Lesson of {run_id}: look at the batch first.")
    pm = parse(text)
    refused = []
    for _ in range(20):
        try:
            commit(pm, render(pm), "ada", Path(root), amend=amend)
            return run_id, refused
        except KBError as err:
            refused.append(str(err))
            time.sleep(random.random() * 0.2)
    return None, refused


def test_sixteen_processes_commit_into_one_repository_and_learner(tmp_path, identity):
    root = tmp_path / "kb"
    repo = _repo(root)
    # a post-mortem committed first, amended while the others commit: --amend takes the same lock
    _commit_one((str(root), "r-amended", False))
    jobs = [(str(root), f"r-{i:02d}", False) for i in range(16)] + [(str(root), "r-amended", True)]
    with mp.get_context("spawn").Pool(16) as pool:
        done = pool.map(_commit_one, jobs)
    assert all(run_id for run_id, _ in done), [r for _, r in done if r]
    rows = parse_lessons((root / "learners/ada/lessons.md").read_text())
    assert sorted(r.run_id for r in rows) == sorted({j[1] for j in jobs})
    committed = [c for c in repo.git.ls_files("learners/ada/postmortems").splitlines()]
    assert len(committed) == len(rows) == 17
    assert_clean_kb(root, repo)


def _commit_in_child(root: str, run_id: str) -> None:
    text = document(run_id)
    pm = parse(text)
    commit(pm, render(pm), "ada", Path(root))


def test_commits_killed_at_random_moments_are_recovered_by_the_next(tmp_path, identity):
    """50 commits killed with SIGKILL at a random moment of their run (a git they started
    may finish on its own); the next commit recovers each, and git fsck stays clean."""
    root = tmp_path / "kb"
    repo = _repo(root)
    ctx = mp.get_context("fork")
    # how long one commit takes here, so that the kills fall all over it
    t0 = time.monotonic()
    _commit_in_child(str(root), "warm-up")
    span = time.monotonic() - t0
    rng = random.Random(15)
    outcomes = {"killed before committing": 0, "committed before the kill": 0, "left a journal": 0}
    for trial in range(50):
        run_id = f"k-{trial:02d}"
        child = ctx.Process(target=_commit_in_child, args=(str(root), run_id))
        child.start()
        time.sleep(rng.uniform(0, span * 1.2))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        outcomes["left a journal"] += (Path(repo.git_dir) / "postmortem-commit").exists()
        # the next commit recovers what the killed one left, and goes through
        _commit_in_child(str(root), f"next-{trial:02d}")
        made = (root / f"learners/ada/postmortems/2026-11-22-{run_id}.md").exists()
        outcomes["committed before the kill" if made else "killed before committing"] += 1
        assert not (Path(repo.git_dir) / "postmortem-commit").exists()
        assert_clean_kb(root, repo)
    # both kinds of moments were hit
    assert all(outcomes.values()), outcomes
    print(outcomes)


# --- no name writes outside learners/<name>/ --------------------------------------------

NAMES = st.one_of(
    st.text(max_size=120),
    st.sampled_from(["..", ".", "../../../../alice/lessons", "bob\n", "a|b", "a\x00b", "x" * 300, "",
                     "/etc/passwd", "learners/../../x", "~", "-rf", "a/b", "\u2028", "C:\\x"]),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._+=@-]{0,20}", fullmatch=True))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run_id=NAMES, learner=NAMES)
def test_no_run_id_or_learner_name_writes_outside_its_learner(tmp_path_factory, identity, run_id, learner):
    base = tmp_path_factory.mktemp("names")
    root = base / "kb"
    repo = _repo(root)
    (base / "alice").mkdir()
    outside_before = sorted(p.relative_to(base) for p in base.rglob("*") if root not in p.parents and p != root)
    pm = parse(document())
    pm = pm.model_validate({**pm.model_dump(), "run_id": run_id, "learner": ""})
    try:
        done = commit(pm, render(pm), learner, root)
    except KBError:
        assert repo.git.status("--porcelain", "--untracked-files=all") == ""
        return
    finally:
        outside_after = sorted(p.relative_to(base) for p in base.rglob("*") if root not in p.parents and p != root)
        assert outside_after == outside_before
    mine = f"learners/{learner}/"
    assert all(f.startswith(mine) or f == ".gitattributes" for f in repo.head.commit.stats.files)
    assert done.postmortem.parent.parent == root / "learners" / learner
    assert done.postmortem.resolve().is_relative_to((root / "learners" / learner).resolve())
    rows = parse_lessons(done.lessons.read_text())
    assert len(rows) == 1 and rows[0].run_id == pm.run_id
    assert repo.git.status("--porcelain", "--untracked-files=all") == ""


def test_a_hostile_run_id_in_a_manifest_makes_a_safe_file_name(tmp_path):
    """`new` on a run whose manifest names it `../../x`: the draft lands in the folder asked,
    under a safe name, with the original kept beside it."""
    import json
    import shutil
    import sys
    root = Path(__file__).resolve().parents[2]
    run = tmp_path / "run"
    shutil.copytree(root / "sample_runs" / "long-tail-token", run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["run_id"] = "../../escaped|run\nid"
    (run / "manifest.json").write_text(json.dumps(manifest))
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run([sys.executable, "-m", "postmortem", "new", run, "--learner", "ada"], cwd=work,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    written = sorted(work.iterdir())         # the draft and its figure, under one safe name
    assert [p.suffix for p in written] == [".md", ".png"] and written[0].stem == written[1].stem
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "work"]
    doc = parse(written[0].read_text())
    assert check_name(doc.run_id) == doc.run_id and written[0].name == doc.filename
    # the reader may make the id safe itself; where the document does, it keeps the original
    assert doc.run_name is None or doc.run_name.startswith("../../escaped|run")
    bad = subprocess.run([sys.executable, "-m", "postmortem", "new", run, "--learner", "bob\n"], cwd=work,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "not a plain name" in bad.stderr


def test_open_repo_recovery_is_a_no_op_on_a_clean_repository(tmp_path, identity):
    repo = _repo(tmp_path / "kb")
    assert Journal(open_repo(tmp_path / "kb")).recover() is None
    assert repo.git.status("--porcelain") == ""
