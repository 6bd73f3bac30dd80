"""`commit`: the post-mortem, its lesson row and (the first time) the merge attribute, in one
git commit or not at all; and the way into the knowledge base's repository (`open_repo`,
`kb_root`).

The whole sequence runs under the repository's lock and its journal (kb/journal.py): any
failure puts every path back, and a run killed half-way is settled by the next one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from postmortem.document.model import PostMortem, one_line
from postmortem.document.runpath import stored
from postmortem.errors import KBError
from postmortem.files import NameRefused, atomic_write, check_name
from postmortem.kb.journal import Journal, git_dir, read_bytes, recover_interrupted, repo_lock, run_git
from postmortem.kb.lessons import Lesson, check_learner, with_row

ATTRIBUTE = "learners/*/lessons.md merge=union"
DRAFTS = "/.postmortem/"
_IN_PROGRESS = {"MERGE_HEAD": "a merge", "CHERRY_PICK_HEAD": "a cherry-pick", "REVERT_HEAD": "a revert",
                "rebase-merge": "a rebase", "rebase-apply": "a rebase or git am"}


@dataclass
class Committed:
    postmortem: Path
    lessons: Path
    sha: str
    message: str
    notes: list[str] = field(default_factory=list)     # what else was done, said once
    figure: Path | None = None                          # the PNG committed beside the post-mortem


def kb_root(start: Path) -> Path:
    """The repository's root when `start` is inside one (where learners/ lives), else `start`.
    Every read of the knowledge base comes through here: a commit killed half-way is settled
    first (recover_interrupted), so that nothing uncommitted is shown."""
    try:
        repo = open_repo(start)
    except KBError:
        return Path(start)
    recover_interrupted(repo)
    return Path(repo.working_tree_dir)


def open_repo(start: Path, init: bool = False):
    import git  # noqa: PLC0415 (GitPython: 0.16 s, paid when a repository is opened, not at start-up)
    start = Path(start)
    try:
        repo = git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        if not init:
            raise KBError(f"{start} is not in a git repository (`postmortem init --kb {start}` or "
                          "`postmortem commit --init` makes one there)") from None
        try:
            repo = git.Repo.init(start)
        except (OSError, git.GitCommandError) as err:
            raise KBError(f"cannot make a git repository in {start}: {_why(err)}") from None
    if repo.bare or repo.working_tree_dir is None:
        raise KBError(f"{repo.git_dir} is a bare repository: commit into a clone with a working tree")
    return repo


def _why(err: BaseException) -> str:
    import git  # noqa: PLC0415 (GitPython: 0.16 s, paid when a repository is opened, not at start-up)
    if isinstance(err, git.GitCommandError):
        lines = [ln for ln in (err.stderr or str(err)).strip().splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else str(err)
        return "git: " + last.removeprefix("stderr: ").strip("' ")
    if isinstance(err, OSError):
        return err.strerror or str(err)
    if isinstance(err, KBError):
        return str(err)
    return f"{type(err).__name__}: {err}"


@dataclass
class Plan:
    """What a commit will write, shown before it is made."""

    root: Path
    postmortem: str         # paths relative to the repository's root
    lessons: str
    message: str
    attributes: bool = False    # .gitattributes gets the merge attribute in the same commit
    figure: str | None = None   # the figure beside the post-mortem


def _message(pm: PostMortem) -> str:
    return f"post-mortem {pm.run_id} ({pm.pattern}): {one_line(pm.lesson)}"


def plan(pm: PostMortem, learner: str, repo, figure: bool = False) -> Plan:
    check_learner(learner)
    try:
        check_name(pm.run_id, "run id")
    except NameRefused as err:
        raise KBError(str(err)) from None
    root = Path(repo.working_tree_dir)
    folder = f"learners/{learner}/postmortems"
    return Plan(root, f"{folder}/{pm.filename}", f"learners/{learner}/lessons.md", _message(pm),
                not _has_attribute(root), f"{folder}/{pm.figure_filename}" if figure else None)


def _has_attribute(root: Path) -> bool:
    attrs = root / ".gitattributes"
    try:
        return ATTRIBUTE in attrs.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False


# --- the commit --------------------------------------------------------------------------

def _refuse_state(repo) -> None:
    gd = git_dir(repo)
    if repo.head.is_valid() and repo.head.is_detached:
        raise KBError("HEAD is detached: check out a branch first")
    for name, what in _IN_PROGRESS.items():
        if (gd / name).exists():
            raise KBError(f"{what} is in progress in {repo.working_tree_dir}: finish or abort it first")
    import git  # noqa: PLC0415 (GitPython: 0.16 s, paid when a repository is opened, not at start-up)
    for var in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        try:
            repo.git.var(var)
        except git.GitCommandError:
            raise KBError("git does not know who you are: set user.name and user.email "
                          "(git config --global user.email you@example.com)") from None


def _check_path(root: Path, rel: str) -> Path:
    """`root/rel`, refused when it, or a folder on the way, is a symbolic link or not what
    it should be: nothing is written through a link (it may lead out of the repository)."""
    path = root
    parts = Path(rel).parts
    for i, part in enumerate(parts):
        path = path / part
        if path.is_symlink():
            where = os.path.realpath(path)
            raise KBError(f"{rel}: {path.relative_to(root)} is a symbolic link (to {where}): "
                          "refusing to write through it")
        last = i == len(parts) - 1
        if path.exists() and (path.is_dir() if last else not path.is_dir()):
            raise KBError(f"{rel}: {path.relative_to(root)} is {'a folder' if last else 'not a folder'}")
    return path


def _dirty(repo, rels: list[str]) -> list[str]:
    out = repo.git.status("--porcelain", "-z", "--untracked-files=all", "--", *rels)
    return [entry[3:] for entry in out.split("\0") if len(entry) > 3]


def ignore_drafts(repo) -> bool:
    """The editor's drafts (.postmortem/) are ignored through .git/info/exclude, the user's
    own ignore list that is never committed. True when the line was added."""
    exclude = Path(repo.common_dir) / "info" / "exclude"
    try:
        text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        if any(line.strip() in (DRAFTS, DRAFTS.strip("/"), DRAFTS.lstrip("/")) for line in text.splitlines()):
            return False
        atomic_write(exclude, text + ("" if not text or text.endswith("\n") else "\n")
                     + "# postmortem: the editor's drafts\n" + DRAFTS + "\n")
    except (OSError, UnicodeDecodeError):
        return False          # not worth refusing a commit over
    return True


def ignore_drafts_at(root: Path) -> bool:
    """The same, from the editor's first draft on: drafts are ignored before any commit.
    Quiet outside a repository (True when the line was added)."""
    try:
        return ignore_drafts(open_repo(root))
    except KBError:
        return False


def run_as_committed(pm: PostMortem, learner: str, start: Path, run: Path | str | None) -> str | None:
    """The front matter's `run` for the post-mortem's place in the knowledge base (both front
    ends commit it so): relative to that repository when the run is inside it, else absolute
    (document.runpath.stored). `run`: where the run was found; None keeps it as written, and
    verify says where it looked."""
    if run is None:
        return pm.run
    return stored(run, kb_root(start) / "learners" / learner / "postmortems" / pm.filename)


def commit(pm: PostMortem, rendered: str, learner: str, start: Path, amend: bool = False,
           init: bool = False, figure: bytes | None = None) -> Committed:
    """Write `rendered` as the learner's post-mortem, add or replace its lesson row, and
    commit exactly those files (and .gitattributes the first time, and `figure`, the PNG
    the document shows, as pm.figure_filename beside it), or change nothing."""
    check_learner(learner)
    if figure is not None and pm.figure != pm.figure_filename:
        raise ValueError(f"the document shows {pm.figure!r}; it is committed as {pm.figure_filename!r}")
    repo = open_repo(start, init)
    notes = []
    with repo_lock(repo) as lock:
        done = Journal(repo).recover()
        if done:
            notes.append(done)
        _refuse_state(repo)
        todo = plan(pm, learner, repo, figure is not None)
        root = todo.root
        target = _check_path(root, todo.postmortem)
        figure_path = _check_path(root, todo.figure) if todo.figure else None
        lessons_path = _check_path(root, todo.lessons)
        attrs_path = _check_path(root, ".gitattributes")
        if target.exists() and not amend:
            raise KBError(f"{todo.postmortem} exists: a post-mortem of {pm.run_id} on {pm.date} (use --amend)")
        _refuse_dirty(repo, todo)
        writes = _writes(todo, pm, rendered, learner, amend, figure, lessons_path, attrs_path)
        if amend and all(read_bytes(root / rel) == data for rel, data in writes.items()):
            raise KBError(f"{todo.postmortem} is already committed as it is: nothing to amend")
        sha = _write_and_commit(repo, todo, writes, lock, notes)
        if todo.attributes:
            notes.append(f"added `{ATTRIBUTE}` to .gitattributes in this commit (lessons files merge by union)")
    if ignore_drafts(repo):
        notes.append(f"the editor's drafts ({DRAFTS.strip('/')}/) are ignored through .git/info/exclude")
    return Committed(target, lessons_path, sha, todo.message, notes, figure_path)


def _refuse_dirty(repo, todo: Plan) -> None:
    """A file the commit writes that has uncommitted changes is refused, never overwritten."""
    rels = [todo.postmortem, todo.lessons] + ([".gitattributes"] if todo.attributes else []) \
        + ([todo.figure] if todo.figure else [])
    dirty = _dirty(repo, rels)
    if dirty:
        raise KBError(f"{dirty[0]} has uncommitted changes: commit or stash them first")


def _writes(todo: Plan, pm: PostMortem, rendered: str, learner: str, amend: bool, figure: bytes | None,
            lessons_path: Path, attrs_path: Path) -> dict[str, bytes]:
    """Path (relative to the repository) -> the bytes the commit writes there: the post-mortem,
    the lessons file with its row, the figure, and .gitattributes the first time."""
    lesson = Lesson(pm.date.isoformat(), pm.pattern or "unknown", pm.run_id, one_line(pm.lesson),
                    f"postmortems/{pm.filename}", learner)
    try:
        old_lessons = lessons_path.read_text(encoding="utf-8") if lessons_path.exists() else ""
        old_attrs = attrs_path.read_text(encoding="utf-8") if attrs_path.exists() else ""
    except (OSError, UnicodeDecodeError) as err:
        raise KBError(f"cannot read {todo.lessons}: {getattr(err, 'strerror', None) or err}") from None
    writes = {todo.postmortem: rendered.encode("utf-8"),
              todo.lessons: with_row(old_lessons, lesson, learner, replace=amend).encode("utf-8")}
    if todo.figure and figure is not None:
        writes[todo.figure] = figure
    if todo.attributes:
        writes[".gitattributes"] = (old_attrs + ("" if not old_attrs or old_attrs.endswith("\n") else "\n")
                                    + ATTRIBUTE + "\n").encode("utf-8")
    return writes


def _write_and_commit(repo, todo: Plan, writes: dict[str, bytes], lock: int, notes: list[str]) -> str:
    """The files written and committed under the journal, or every one put back; the commit's
    sha. The user's index is brought up to date after (else said in `notes`: the next run does it)."""
    journal = Journal(repo)
    try:
        journal.begin(writes, todo.message)
    except OSError as err:
        journal.end()
        raise KBError(f"cannot write in {journal.dir.parent}: {err.strerror}") from None
    try:
        for rel, data in writes.items():
            atomic_write(todo.root / rel, data)
        # A private index (HEAD + these files): the commit holds exactly them, the
        # user's own index is never touched until the commit is made, and the hooks
        # see what is committed.
        private = {"GIT_INDEX_FILE": str(journal.dir / "index")}
        if repo.head.is_valid():
            run_git(repo, ["read-tree", "HEAD"], private, lock=lock)
        run_git(repo, ["add", "--", *writes], private, lock=lock)
        run_git(repo, ["commit", "-q", "-m", todo.message], private, lock=lock)
    except BaseException as err:
        try:
            journal.recover()
        except Exception as again:        # say both: the tree may need a hand
            raise KBError(f"not committed: {_why(err)}; and the rollback failed: {_why(again)} "
                          f"(the journal is in {journal.dir})") from None
        if isinstance(err, (KeyboardInterrupt, SystemExit)):
            raise
        raise KBError(f"not committed, nothing changed: {_why(err)}") from None
    sha = repo.head.commit.hexsha
    try:
        journal.sync_index()
    except (OSError, KBError) as err:        # the commit stands; the next run syncs
        notes.append(f"committed, but the index was not updated ({_why(err)}): the next commit does it")
    else:
        journal.end()
    return sha
