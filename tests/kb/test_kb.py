"""The knowledge base on real git repositories in temp dirs."""

import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest
from worked_example import as_learners

from postmortem.kb.lessons import Lesson, append, parse_lessons

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "learners" / "example" / "postmortems" / "2026-11-22-19-spike-001.md"
IDENTITY = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid",
            "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.invalid"}


@pytest.fixture(autouse=True)
def _example_as_adas(tmp_path_factory, monkeypatch):
    """EXAMPLE is the worked example as ada's draft: commit refuses it as another learner's."""
    monkeypatch.setattr(sys.modules[__name__], "EXAMPLE", as_learners(tmp_path_factory.mktemp("example")))


@pytest.fixture
def kb(tmp_path, monkeypatch):
    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)
    repo = git.Repo.init(tmp_path / "kb", initial_branch="main")
    (tmp_path / "kb" / "notes.txt").write_text("mine\n")
    repo.git.add("notes.txt")
    repo.git.commit("-m", "start")
    return tmp_path / "kb", repo


def pm(*args, cwd):
    env = {**os.environ, **IDENTITY}
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)


@pytest.mark.slow
def test_commit_holds_exactly_the_two_files(kb):
    root, repo = kb
    (root / "notes.txt").write_text("dirty, not to be committed\n")
    (root / "staged.txt").write_text("staged, not to be committed\n")
    repo.git.add("staged.txt")
    r = pm("commit", EXAMPLE, "--learner", "ada", "--run", ROOT / "sample_runs" / "long-tail-token", cwd=root)
    assert r.returncode == 0, r.stderr
    head = repo.head.commit
    # the merge attribute rides in the same commit, the first time, and is announced; the
    # figure the document shows rides beside it
    assert sorted(head.stats.files) == [".gitattributes", "learners/ada/lessons.md",
                                        "learners/ada/postmortems/2026-11-22-19-spike-001.md",
                                        "learners/ada/postmortems/2026-11-22-19-spike-001.png"]
    committed = (head.tree / "learners/ada/postmortems/2026-11-22-19-spike-001.png").data_stream.read()
    assert committed == EXAMPLE.with_suffix(".png").read_bytes()
    assert len(list(repo.iter_commits())) == 2 and ".gitattributes" in r.stdout
    assert "19-spike-001" in head.message and "long-tail-token" in head.message
    # what the user had staged and changed is still there, untouched
    assert "staged.txt" in repo.git.diff("--cached", "--name-only")
    assert (root / "notes.txt").read_text() == "dirty, not to be committed\n"
    lessons = parse_lessons((root / "learners/ada/lessons.md").read_text())
    assert [(l.pattern, l.run_id, l.link) for l in lessons] == [
        ("long-tail-token", "19-spike-001", "postmortems/2026-11-22-19-spike-001.md")]
    assert "learners/*/lessons.md merge=union" in (root / ".gitattributes").read_text()
    # the lesson is found in the browser
    r = pm("lessons", "--pattern", "long-tail-token", "--json", cwd=root)
    data = json.loads(r.stdout)
    assert data["count"] == 1 and data["patterns"][0]["lessons"][0]["learner"] == "ada"


@pytest.mark.slow
def test_refusals(kb, tmp_path):
    root, repo = kb
    run = ROOT / "sample_runs" / "long-tail-token"
    bad_name = pm("commit", EXAMPLE, "--learner", "../x", cwd=root)
    assert bad_name.returncode == 2 and "not a plain name" in bad_name.stderr
    outside = tmp_path / "plain"
    outside.mkdir()
    r = pm("commit", EXAMPLE, "--learner", "ada", cwd=outside)
    assert r.returncode == 2 and "not in a git repository" in r.stderr and "--init" in r.stderr
    r = pm("commit", EXAMPLE, "--learner", "ada", "--init", cwd=outside)
    assert r.returncode == 0, r.stderr
    assert pm("commit", EXAMPLE, "--learner", "ada", cwd=root).returncode == 0
    again = pm("commit", EXAMPLE, "--learner", "ada", cwd=root)
    assert again.returncode == 2 and "--amend" in again.stderr
    same = pm("commit", EXAMPLE, "--learner", "ada", "--amend", cwd=root)
    assert same.returncode == 2 and "nothing to amend" in same.stderr
    changed = tmp_path / "changed.md"
    changed.write_text(EXAMPLE.read_text().replace("swap the batch before", "swap the batch first, before"))
    lost = pm("commit", changed, "--learner", "ada", "--amend", cwd=root)       # its figure left behind
    assert lost.returncode == 1 and (f"Figure: the document shows 2026-11-22-19-spike-001.png, which is not at "
                                     f"{tmp_path / '2026-11-22-19-spike-001.png'}") in lost.stdout
    shutil.copy(EXAMPLE.with_suffix(".png"), tmp_path)
    amended = pm("commit", changed, "--learner", "ada", "--amend", cwd=root)
    assert amended.returncode == 0, amended.stderr
    rows = parse_lessons((root / "learners/ada/lessons.md").read_text())
    assert len(rows) == 1 and "swap the batch first" in rows[0].lesson      # replaced, not doubled
    (root / "learners/ada/lessons.md").write_text("hand edit\n")
    dirty = pm("commit", EXAMPLE, "--learner", "ada", "--amend", cwd=root)
    assert dirty.returncode == 2 and "uncommitted changes" in dirty.stderr
    repo.git.checkout("--", "learners/ada/lessons.md")
    repo.git.checkout(repo.head.commit.hexsha)                                     # detached
    detached = pm("commit", EXAMPLE, "--learner", "ada", cwd=root)
    assert detached.returncode == 2 and "detached" in detached.stderr
    assert run.exists()


@pytest.mark.slow
def test_a_broken_document_is_not_committed(kb, tmp_path):
    root, repo = kb
    broken = tmp_path / "b.md"
    broken.write_text(EXAMPLE.read_text().replace("suspecting the optimizer.", "suspecting\nthe optimizer."))
    before = repo.head.commit.hexsha
    r = pm("commit", broken, "--learner", "ada", cwd=root)
    assert r.returncode == 1 and "Lesson: more than one line" in r.stdout
    assert repo.head.commit.hexsha == before and not (root / "learners").exists()


def _append_many(args):
    path, i = args
    for k in range(25):
        append(Path(path), Lesson("2026-11-22", "bad-data", f"run-{i}-{k}", f"lesson {i}.{k} " + "x" * 300, "p.md"))


@pytest.mark.slow
def test_concurrent_appends_never_interleave_or_get_lost(tmp_path):
    path = tmp_path / "learners" / "ada" / "lessons.md"
    with mp.get_context("spawn").Pool(8) as pool:
        pool.map(_append_many, [(str(path), i) for i in range(8)])
    text = path.read_text()
    rows = parse_lessons(text)
    assert len(rows) == 8 * 25 and len({r.run_id for r in rows}) == 200
    assert text.count("| date | pattern |") == 1
    body = [ln for ln in text.splitlines() if ln.startswith("| 2026")]
    assert len(body) == 200                      # every line whole


@pytest.mark.slow
def test_two_branches_append_lessons_and_merge_cleanly(kb):
    root, repo = kb
    assert pm("commit", EXAMPLE, "--learner", "ada", cwd=root).returncode == 0
    lessons = root / "learners/ada/lessons.md"
    repo.git.checkout("-b", "left")
    append(lessons, Lesson("2026-11-23", "fp16-overflow", "run-left", "left lesson", "postmortems/l.md"))
    repo.git.commit("-am", "left")
    repo.git.checkout("main")
    repo.git.checkout("-b", "right")
    append(lessons, Lesson("2026-11-23", "numerics", "run-right", "right lesson", "postmortems/r.md"))
    repo.git.commit("-am", "right")
    repo.git.merge("left", "-m", "merge")        # raises on a conflict
    ids = [r.run_id for r in parse_lessons(lessons.read_text())]
    assert sorted(ids) == ["19-spike-001", "run-left", "run-right"]


@pytest.mark.slow
def test_lessons_filters_and_similar(kb):
    root, _ = kb
    assert pm("commit", EXAMPLE, "--learner", "ada", cwd=root).returncode == 0
    append(root / "learners/bob/lessons.md", Lesson("2026-11-23", "numerics", "n-1", "log(0) in a hand-written loss", "postmortems/n.md"))
    out = pm("lessons", cwd=root).stdout
    assert out.index("long-tail-token (1)") >= 0 and "numerics (1)" in out
    assert "log(0)" in pm("lessons", "--search", "LOG(0)", cwd=root).stdout
    assert "19-spike-001" not in pm("lessons", "--learner", "bob", cwd=root).stdout
    # the same incident in another run (a copy under another id) finds the post-mortem first
    twin = root.parent / "twin"
    shutil.copytree(ROOT / "sample_runs" / "long-tail-token", twin)
    manifest = json.loads((twin / "manifest.json").read_text())
    (twin / "manifest.json").write_text(json.dumps({**manifest, "run_id": "19-spike-twin"}))
    r = pm("similar", twin, "--json", cwd=root)
    matches = json.loads(r.stdout)
    assert matches[0]["run_id"] == "19-spike-001" and matches[0]["score"] > 0.8
    assert any(w.startswith("pattern: match") for w in matches[0]["why"])
    other = json.loads(pm("similar", ROOT / "sample_runs" / "lr-discontinuity", "--json", cwd=root).stdout)
    assert other[0]["score"] < matches[0]["score"]
    # the run written up is not like itself: its own post-mortem is left out, as on the lessons screen
    own = json.loads(pm("similar", ROOT / "sample_runs" / "long-tail-token", "--json", cwd=root).stdout)
    assert "19-spike-001" not in [m["run_id"] for m in own]


@pytest.mark.slow
def test_similar_with_nothing_to_list_says_why_and_where_it_looked(kb, tmp_path):
    """A user who has just committed the run's post-mortem asks for similar ones: told that
    its own is left out, with the folder read, not that there is no post-mortem at all."""
    root, _ = kb
    empty = pm("similar", ROOT / "sample_runs" / "long-tail-token", "--kb", root, cwd=tmp_path)
    assert empty.returncode == 0 and empty.stdout.strip() == f"no post-mortem under {root / 'learners'} yet"
    assert pm("commit", EXAMPLE, "--learner", "ada", cwd=root).returncode == 0
    only_own = pm("similar", ROOT / "sample_runs" / "long-tail-token", "--kb", root, cwd=tmp_path).stdout
    assert only_own.startswith(f"no other post-mortem under {root / 'learners'} (this incident's own is left out: ")
    assert "learners/ada/postmortems/2026-11-22-19-spike-001.md" in only_own, only_own
