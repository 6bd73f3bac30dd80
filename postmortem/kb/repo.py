"""`commit`: check the post-mortem, write it and its lesson, and commit exactly those two files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from postmortem.document.model import PostMortem
from postmortem.files import atomic_write
from postmortem.kb.lessons import KBError, Lesson, append, check_learner, replace_row

ATTRIBUTE = "learners/*/lessons.md merge=union"


@dataclass
class Committed:
    postmortem: Path
    lessons: Path
    sha: str
    message: str


def open_repo(start: Path, init: bool = False):
    import git
    try:
        return git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        if init:
            return git.Repo.init(start)
        raise KBError(f"{start} is not in a git repository (postmortem commit --init makes one here)") from None


def _dirty(repo, rel: str) -> bool:
    if not repo.head.is_valid():
        return False
    return bool(repo.git.status("--porcelain", "--", rel).strip())


def ensure_union_merge(repo) -> bool:
    """Lessons files merge by union; the attribute gets a commit of its own if missing."""
    root = Path(repo.working_tree_dir)
    attrs = root / ".gitattributes"
    text = attrs.read_text() if attrs.exists() else ""
    if ATTRIBUTE in text.splitlines():
        return False
    atomic_write(attrs, text + ("" if not text or text.endswith("\n") else "\n") + ATTRIBUTE + "\n")
    repo.git.add("--", ".gitattributes")
    repo.git.commit("-m", "postmortem: lessons files merge by union", "--only", "--", ".gitattributes")
    return True


@dataclass
class Plan:
    """What a commit will write, shown before it is made."""

    root: Path
    postmortem: str         # paths relative to the repository's root
    lessons: str
    message: str


def plan(pm: PostMortem, learner: str, repo) -> Plan:
    check_learner(learner)
    return Plan(Path(repo.working_tree_dir), f"learners/{learner}/postmortems/{pm.filename}",
                f"learners/{learner}/lessons.md",
                f"post-mortem {pm.run_id} ({pm.pattern}): {pm.lesson.strip()}")


def commit(pm: PostMortem, rendered: str, learner: str, start: Path, amend: bool = False,
           init: bool = False) -> Committed:
    check_learner(learner)
    repo = open_repo(start, init)
    if repo.head.is_valid() and repo.head.is_detached:
        raise KBError("HEAD is detached: check out a branch first")
    todo = plan(pm, learner, repo)
    root, rel_pm, rel_lessons, message = todo.root, todo.postmortem, todo.lessons, todo.message
    target = root / rel_pm
    if target.exists() and not amend:
        raise KBError(f"{rel_pm} exists: a post-mortem of {pm.run_id} on {pm.date} (use --amend)")
    for rel in (rel_lessons, rel_pm):
        if _dirty(repo, rel):
            raise KBError(f"{rel} has uncommitted changes: commit or stash them first")
    ensure_union_merge(repo)
    atomic_write(target, rendered)
    lesson = Lesson(pm.date.isoformat(), pm.pattern or "unknown", pm.run_id, pm.lesson.strip(),
                    f"postmortems/{pm.filename}", learner)
    (replace_row if amend else append)(root / rel_lessons, lesson)
    repo.git.add("--", rel_pm, rel_lessons)
    if repo.head.is_valid() and not repo.git.diff("--cached", "--name-only", "HEAD", "--", rel_pm, rel_lessons):
        raise KBError(f"{rel_pm} is already committed as it is: nothing to amend")
    # --only: exactly these two files, whatever else is staged or dirty
    repo.git.commit("-m", message, "--only", "--", rel_pm, rel_lessons)
    return Committed(target, root / rel_lessons, repo.head.commit.hexsha, message)
