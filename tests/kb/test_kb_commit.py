"""`commit` all-or-nothing, on real git repositories in temp dirs: every way a commit can fail
leaves the tree and the index as they were, and the next commit goes through."""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import git
import pytest
from worked_example import as_learners

from postmortem.document.markdown import parse, render
from postmortem.errors import KBError
from postmortem.kb.commit import ATTRIBUTE, commit
from postmortem.kb.lessons import parse_lessons

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "learners" / "example" / "postmortems" / "2026-11-22-19-spike-001.md"
IDENTITY = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.invalid",
            "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.invalid"}


@pytest.fixture(autouse=True)
def _example_as_adas(tmp_path_factory, monkeypatch):
    """EXAMPLE is the worked example as ada's draft: commit refuses it as another learner's."""
    monkeypatch.setattr(sys.modules[__name__], "EXAMPLE", as_learners(tmp_path_factory.mktemp("example")))


def document(run_id: str = "19-spike-001", lesson: str | None = None) -> str:
    text = EXAMPLE.read_text().replace("19-spike-001", run_id)
    if lesson is not None:
        old = parse(text).lesson
        text = text.replace(old, lesson)
    return text


def commit_text(root: Path, text: str, learner: str = "ada", amend: bool = False):
    pm = parse(text)
    return commit(pm, render(pm), learner, root, amend)


def cli(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, **IDENTITY, **(env or {})}, timeout=300)


@pytest.fixture
def kb(tmp_path, monkeypatch):
    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)
    root = tmp_path / "kb"
    repo = git.Repo.init(root, initial_branch="main")
    (root / "notes.txt").write_text("mine\n")
    repo.git.add("notes.txt")
    repo.git.commit("-m", "start")
    return root, repo


def snapshot(root: Path, repo) -> tuple:
    """Everything a refused commit must leave as it was: the files, the index, HEAD, and
    what git status says."""
    files = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if rel.parts[0] == ".git":
            continue
        files[rel.as_posix()] = ("link", os.readlink(p)) if p.is_symlink() else \
            ("dir",) if p.is_dir() else (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
    head = repo.head.commit.hexsha if repo.head.is_valid() else None
    return files, repo.git.ls_files("-s"), head, repo.git.status("--porcelain", "--untracked-files=all")


def assert_clean_kb(root: Path, repo) -> None:
    """Every lesson row links to a committed post-mortem and every committed post-mortem has
    its row; nothing is left uncommitted; git fsck is clean."""
    assert repo.git.status("--porcelain", "--untracked-files=all") == ""
    committed = set(repo.git.ls_files("learners").splitlines())
    for lessons in root.glob("learners/*/lessons.md"):
        rows = parse_lessons(lessons.read_text(), lessons.parent.name)
        links = [f"learners/{r.learner}/{r.link}" for r in rows]
        assert len(links) == len(set(links)), "a row twice"
        assert set(links) <= committed, set(links) - committed
        pms = {c for c in committed if c.startswith(f"learners/{lessons.parent.name}/postmortems/")}
        assert pms == set(links)
    subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=root, check=True, capture_output=True)


# --- a failing step rolls everything back ------------------------------------------------

def _hook(repo, name: str, body: str) -> Path:
    hook = Path(repo.git_dir) / "hooks" / name
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\n" + body + "\n")
    hook.chmod(0o755)
    return hook


@pytest.mark.parametrize("setup", ["pre-commit", "commit-msg", "gpg", "first-commit-hook"])
def test_a_failing_git_commit_changes_nothing_and_the_retry_goes_through(kb, setup):
    root, repo = kb
    if setup == "first-commit-hook":          # the very first post-mortem: .gitattributes too
        pass
    else:
        assert commit_text(root, document("r-0")).sha
    if setup in ("pre-commit", "first-commit-hook"):
        fix = _hook(repo, "pre-commit", "echo 'refused by the pre-commit hook' >&2; exit 1")
    elif setup == "commit-msg":
        fix = _hook(repo, "commit-msg", "echo 'bad message' >&2; exit 1")
    else:
        repo.git.config("commit.gpgsign", "true")
        repo.git.config("gpg.program", "false")
    (root / "notes.txt").write_text("the user's own change\n")     # not ours: stays as it is
    before = snapshot(root, repo)
    with pytest.raises(KBError, match="not committed, nothing changed"):
        commit_text(root, document("r-1"))
    assert snapshot(root, repo) == before
    assert not (Path(repo.git_dir) / "postmortem-commit").exists()
    if setup == "gpg":
        repo.git.config("--unset", "commit.gpgsign")
    else:
        fix.unlink()
    done = commit_text(root, document("r-1"))          # retryable: no "exists (use --amend)"
    assert repo.head.commit.hexsha == done.sha
    (root / "notes.txt").write_text("mine\n")
    assert_clean_kb(root, repo)


@pytest.mark.slow
def test_no_identity_is_refused_before_anything_is_written(kb, tmp_path, monkeypatch):
    root, repo = kb
    for k in IDENTITY:
        monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo.git.config("user.useConfigOnly", "true")
    before = snapshot(root, repo)
    r = cli("commit", EXAMPLE, "--learner", "ada", cwd=root, env={k: "" for k in IDENTITY})
    assert r.returncode == 2 and "who you are" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert snapshot(root, repo) == before


@pytest.mark.slow
@pytest.mark.parametrize("what", ["merge", "cherry-pick"])
def test_a_merge_or_cherry_pick_in_progress_is_refused_and_left_alone(kb, what):
    root, repo = kb
    repo.git.checkout("-b", "other")
    (root / "notes.txt").write_text("theirs\n")
    repo.git.commit("-am", "theirs")
    repo.git.checkout("main")
    (root / "notes.txt").write_text("ours\n")
    repo.git.commit("-am", "ours")
    with pytest.raises(git.GitCommandError):
        repo.git.merge("other") if what == "merge" else repo.git.cherry_pick("other")
    before = snapshot(root, repo)
    r = cli("commit", EXAMPLE, "--learner", "ada", cwd=root)
    assert r.returncode == 2 and f"a {what} is in progress" in r.stderr
    assert snapshot(root, repo) == before


@pytest.mark.slow
def test_bare_repositories_and_odd_paths_are_refused_with_one_line(kb, tmp_path):
    root, repo = kb
    bare = tmp_path / "bare.git"
    git.Repo.init(bare, bare=True)
    r = cli("commit", EXAMPLE, "--learner", "ada", "--repo", bare, cwd=tmp_path)
    assert r.returncode == 2 and "bare repository" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (root / ".gitattributes").mkdir()
    before = snapshot(root, repo)
    r = cli("commit", EXAMPLE, "--learner", "ada", cwd=root)
    assert r.returncode == 2 and ".gitattributes is a folder" in r.stderr
    assert snapshot(root, repo) == before
    (root / ".gitattributes").rmdir()
    (root / "learners").write_text("a file where a folder goes\n")
    r = cli("commit", EXAMPLE, "--learner", "ada", cwd=root)
    assert r.returncode == 2 and "learners is not a folder" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("link", ["learners/ada/lessons.md", "learners/ada", "learners/ada/postmortems"])
def test_nothing_is_written_through_a_symbolic_link(kb, tmp_path, link):
    root, repo = kb
    outside = tmp_path / "alice"
    (outside / "postmortems").mkdir(parents=True)
    (outside / "lessons.md").write_text("alice's lessons\n")
    where = root / link
    where.parent.mkdir(parents=True, exist_ok=True)
    target = {"learners/ada/lessons.md": outside / "lessons.md", "learners/ada": outside,
              "learners/ada/postmortems": outside / "postmortems"}[link]
    where.symlink_to(target)
    before = snapshot(root, repo)
    r = cli("commit", EXAMPLE, "--learner", "ada", cwd=root)
    assert r.returncode == 2 and "symbolic link" in r.stderr
    assert snapshot(root, repo) == before
    assert (outside / "lessons.md").read_text() == "alice's lessons\n"
    assert list((outside / "postmortems").iterdir()) == []


# --- files as the user expects them ----------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_files_get_the_mode_of_the_umask(kb, umask):
    root, repo = kb
    old = os.umask(umask)
    try:
        done = commit_text(root, document("r-mode"))
    finally:
        os.umask(old)
    for path in (done.postmortem, done.lessons, root / ".gitattributes"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path


def test_the_attribute_rides_in_the_first_commit_and_drafts_are_ignored(kb):
    root, repo = kb
    done = commit_text(root, document("r-a"))
    assert sorted(repo.head.commit.stats.files) == [".gitattributes", "learners/ada/lessons.md",
                                                    "learners/ada/postmortems/2026-11-22-r-a.md"]
    assert any(ATTRIBUTE in n for n in done.notes) and any(".postmortem" in n for n in done.notes)
    assert len(list(repo.iter_commits())) == 2
    again = commit_text(root, document("r-b"))
    assert sorted(repo.head.commit.stats.files) == ["learners/ada/lessons.md",
                                                    "learners/ada/postmortems/2026-11-22-r-b.md"]
    assert again.notes == []                        # said once
    draft = root / ".postmortem" / "drafts" / "r-c-250.md"
    draft.parent.mkdir(parents=True)
    draft.write_text("a draft\n")
    assert repo.git.status("--porcelain", "--untracked-files=all") == ""
    repo.git.add("-A")
    assert ".postmortem" not in repo.git.diff("--cached", "--name-only")


def test_lessons_without_a_final_newline_escaped_pipes_and_odd_line_breaks(kb):
    root, repo = kb
    commit_text(root, document("r-1"))
    lessons = root / "learners" / "ada" / "lessons.md"
    lessons.write_text(lessons.read_text().rstrip("\n"))        # a hand edit drops the newline
    repo.git.commit("-qam", "hand edit")
    tricky = "keep a | [post-mortem](x.md) | in a lesson, a \\ too, and\x85no\u2028break"
    commit_text(root, document("r-2", lesson="fine"))
    pm = parse(document("r-3"))
    pm.lesson = tricky
    commit(pm, render(pm), "ada", root)
    rows = parse_lessons(lessons.read_text())
    assert [r.run_id for r in rows] == ["r-1", "r-2", "r-3"]
    assert rows[0].link == "postmortems/2026-11-22-r-1.md"
    assert rows[2].lesson == "keep a | [post-mortem](x.md) | in a lesson, a \\ too, and no break"
    assert rows[2].link == "postmortems/2026-11-22-r-3.md"
    assert_clean_kb(root, repo)


def test_amend_replaces_the_row_under_the_same_lock(kb):
    root, repo = kb
    commit_text(root, document("r-1"))
    commit_text(root, document("r-2"))
    done = commit_text(root, document("r-1", lesson="A better lesson."), amend=True)
    rows = parse_lessons(done.lessons.read_text())
    assert [(r.run_id, r.lesson) for r in rows] == [("r-2", rows[0].lesson), ("r-1", "A better lesson.")]
    with pytest.raises(KBError, match="nothing to amend"):
        commit_text(root, document("r-1", lesson="A better lesson."), amend=True)
    assert_clean_kb(root, repo)


# --- read-only and full file systems (a tmpfs in a user and mount namespace) --------------

def _namespace_ok() -> bool:
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt 2>/dev/null "
                        "|| mount -t tmpfs -o size=1m tmpfs \"$0\"", "/tmp"], capture_output=True)
    return r.returncode == 0


NS = pytest.mark.skipif(not _namespace_ok(), reason="no user and mount namespaces here")

_SCRIPT = r"""
set -e
mount -t tmpfs -o size={size} tmpfs "$MNT"
cp -a "$SRC" "$MNT/kb"
cd "$MNT/kb"
{prepare}
git status --porcelain --untracked-files=all > "$OUT/before.status"; git ls-files -s > "$OUT/before.index"
set +e
"$PY" -m postmortem commit "$DOC" --learner ada > "$OUT/stdout" 2> "$OUT/stderr"
echo $? > "$OUT/rc"
set -e
git status --porcelain --untracked-files=all > "$OUT/after.status"; git ls-files -s > "$OUT/after.index"
find . -path ./.git -prune -o -type f -print | sort > "$OUT/after.files"
{after}
git fsck --no-progress > "$OUT/fsck" 2>&1 && echo ok >> "$OUT/fsck"
"""


def _in_namespace(kb, tmp_path, size: str, prepare: str, after: str = "") -> dict:
    root, _ = kb
    out, mnt = tmp_path / "out", tmp_path / "mnt"
    out.mkdir()
    mnt.mkdir()
    env = {**os.environ, **IDENTITY, "MNT": str(mnt), "SRC": str(root), "OUT": str(out),
           "PY": sys.executable, "DOC": str(EXAMPLE), "PYTHONPATH": os.pathsep.join(sys.path)}
    script = _SCRIPT.format(size=size, prepare=prepare, after=after)
    subprocess.run(["unshare", "-rm", "sh", "-c", script], env=env, check=True, timeout=300)
    return {p.name: p.read_text() for p in out.iterdir()}


@pytest.mark.slow
@NS
def test_a_full_disk_refuses_with_one_line_and_changes_nothing(kb, tmp_path):
    # the tmpfs full but one page: the journal fits, the post-mortem does not
    r = _in_namespace(kb, tmp_path, "1m", 'dd if=/dev/zero of="$MNT/spare" bs=4k count=1 2>/dev/null; '
                      'dd if=/dev/zero of="$MNT/fill" bs=4k 2>/dev/null || true; rm "$MNT/spare"',
                      after='rm -f "$MNT/fill"; "$PY" -m postmortem commit "$DOC" --learner ada > "$OUT/retry" 2>&1; '
                            'echo $? >> "$OUT/retry"')
    assert r["rc"].strip() == "2", r["stderr"]
    assert "No space left on device" in r["stderr"] and len(r["stderr"].strip().splitlines()) == 1
    assert r["before.index"] == r["after.index"] and r["before.status"] == r["after.status"]
    assert "learners" not in r["after.files"]
    assert r["retry"].strip().endswith("0"), r["retry"]         # the space back, it goes through
    assert r["fsck"].strip().endswith("ok")


@pytest.mark.slow
@NS
def test_a_read_only_file_system_refuses_with_one_line_and_changes_nothing(kb, tmp_path):
    r = _in_namespace(kb, tmp_path, "8m", 'mount -o remount,ro "$MNT"')
    assert r["rc"].strip() == "2", r["stderr"]
    assert "Read-only file system" in r["stderr"] and len(r["stderr"].strip().splitlines()) == 1
    assert r["before.status"] == r["after.status"] and r["before.index"] == r["after.index"]
    assert "learners" not in r["after.files"]
