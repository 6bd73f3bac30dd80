"""The lock and the journal of a commit into the knowledge base (kb/commit.py makes the commit).

The whole sequence runs under one lock per repository. Before it touches a file the commit
writes a journal in the git directory (what each path held, in the tree and in the index); any
failure (a hook, gpg, a full disk, ...) puts every path back as the journal says, and a run
killed half-way is put back (or found committed) by the next `commit` when it takes the lock,
or by the next read of the knowledge base (`recover_interrupted`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from postmortem.errors import KBError
from postmortem.files import atomic_write

LOCK_WAIT_S = 120.0
_TXN = "postmortem-commit"          # the journal's folder in the git directory


def git_dir(repo) -> Path:
    """The repository's git directory (a worktree's own: where its journal is kept)."""
    return Path(repo.git_dir)


@contextmanager
def repo_lock(repo, wait_s: float = LOCK_WAIT_S):
    """One `commit` at a time in a repository (flock: released by the kernel when the last
    process holding it dies, so a killed run never leaves it taken)."""
    path = Path(repo.common_dir) / "postmortem.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as err:
        raise KBError(f"cannot write in {path.parent}: {err.strerror}") from None
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise KBError(f"another postmortem commit has held {path} for {wait_s:.0f} s: "
                                  "try again when it is done") from None
                time.sleep(0.02)
        yield fd
    finally:
        os.close(fd)


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes; None when there is no such file."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _index_entries(repo, rels: list[str]) -> dict[str, str | None]:
    """path -> 'mode sha stage' of its index entry (None: not in the index)."""
    out: dict[str, str | None] = {r: None for r in rels}
    for line in repo.git.ls_files("-s", "-z", "--", *rels).split("\0"):
        if line:
            meta, rel = line.split("\t", 1)
            out[rel] = meta
    return out


def _set_index(repo, entries: dict[str, str | None]) -> None:
    zero = "0" * (len(repo.head.commit.hexsha) if repo.head.is_valid() else 40)
    lines = []
    for rel, meta in entries.items():
        if meta is None:
            lines.append(f"0 {zero}\t{rel}")
        else:
            mode, sha, _stage = meta.split()
            lines.append(f"{mode} {sha}\t{rel}")
    _git_stdin(repo, ["update-index", "-z", "--index-info"], "".join(x + "\0" for x in lines))


def run_git(repo, args: list[str], env: dict | None = None, data: str | None = None,
         lock: int | None = None) -> str:
    """Run git in the working tree; a failure is a KBError with git's last line. `lock`:
    the repository lock's descriptor, handed down so that the lock stays taken while this
    git runs, even when its parent is killed (the next run then waits for it to finish)."""
    r = subprocess.run(["git", *args], cwd=repo.working_tree_dir, capture_output=True,
                       input=None if data is None else data.encode("utf-8"),
                       env={**os.environ, **(env or {})}, pass_fds=() if lock is None else (lock,))
    if r.returncode:
        lines = [ln for ln in r.stderr.decode(errors="replace").splitlines() if ln.strip()] or ["failed"]
        raise KBError(f"git {args[0]}: {lines[-1].strip()}")
    return r.stdout.decode(errors="replace")


def _git_stdin(repo, args: list[str], data: str) -> None:
    run_git(repo, args, data=data)


def _wait_index_lock(repo) -> None:
    """A git the killed run started may still be finishing: wait for its index.lock to go.
    The commit's private index: a git killed with its parent leaves a stale lock there,
    gone with the journal. The user's own: another git may be running; refused after 10 s."""
    for lock, wait_s, stale_ok in ((git_dir(repo) / _TXN / "index.lock", 2.0, True),
                                   (git_dir(repo) / "index.lock", 10.0, False)):
        deadline = time.monotonic() + wait_s
        while lock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if lock.exists() and not stale_ok:
            raise KBError(f"{lock} exists: another git is running, or one died; remove it if none runs")


class Journal:
    """What a commit is about to change, written before it changes anything."""

    def __init__(self, repo):
        self.repo = repo
        self.dir = git_dir(repo) / _TXN
        self.root = Path(repo.working_tree_dir)

    def begin(self, writes: dict[str, bytes], message: str) -> None:
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir()
        paths = {}
        for i, (rel, data) in enumerate(writes.items()):
            path = self.root / rel
            backup = None
            if path.exists():
                backup = f"backup-{i}"
                try:         # a hard link costs no space: the write renames a new file over it
                    os.link(path, self.dir / backup)
                except OSError:
                    shutil.copy2(path, self.dir / backup)
            created = []
            parent = path.parent
            while parent != self.root and not parent.exists():
                created.append(str(parent.relative_to(self.root)))
                parent = parent.parent
            paths[rel] = {"backup": backup, "before": _sha(read_bytes(path)), "written": _sha(data),
                          "dirs": created}
        head = self.repo.head.commit.hexsha if self.repo.head.is_valid() else None
        record = {"head": head, "message": message, "paths": paths,
                  "index": _index_entries(self.repo, list(writes))}
        atomic_write(self.dir / "journal.json", json.dumps(record, indent=1))

    def sync_index(self, rels: list[str] | None = None) -> None:
        """The user's index entries of the committed files, as committed."""
        if rels is None:
            rels = json.loads((self.dir / "journal.json").read_text(encoding="utf-8"))["paths"]
        rels = list(rels)
        tree = dict.fromkeys(rels)
        for line in self.repo.git.ls_tree("-z", "HEAD", "--", *rels).split("\0"):
            if line:
                meta, rel = line.split("\t", 1)
                mode, _kind, sha = meta.split()
                tree[rel] = f"{mode} {sha} 0"
        now = _index_entries(self.repo, rels)
        changed = {rel: meta for rel, meta in tree.items() if now.get(rel) != meta}
        if changed:
            _set_index(self.repo, changed)

    def end(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def recover(self) -> str | None:
        """Leave no trace of an unfinished commit: a commit that got made is kept, anything
        else is put back as it was. Returns what was done, or None when there was nothing."""
        if not self.dir.exists():
            return None
        try:
            record = json.loads((self.dir / "journal.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.end()            # killed while writing the journal: nothing was touched yet
            return None
        _wait_index_lock(self.repo)
        if self._committed(record):
            self.sync_index(list(record["paths"]))
            self.end()
            return "an interrupted commit had been made; the index is updated for it"
        restore_index = {}
        for rel, p in record["paths"].items():
            path = self.root / rel
            for tmp in path.parent.glob(f".{path.name[:200]}.*.tmp"):     # a write cut short
                tmp.unlink(missing_ok=True)
            now = _sha(read_bytes(path))
            # only what this commit wrote goes back: a later edit by the user stays
            if now == p["written"] or now == p["before"]:
                backup = self.dir / p["backup"] if p["backup"] else None
                if backup is not None and backup.exists():
                    os.replace(backup, path)
                elif backup is None and (path.exists() or path.is_symlink()):
                    path.unlink()
                for d in p["dirs"]:
                    try:
                        (self.root / d).rmdir()
                    except OSError:
                        pass
                restore_index[rel] = record["index"][rel]
        # the user's index is only written once the commit is made; an older journal's
        # entries are put back only where they differ
        in_index = _index_entries(self.repo, list(restore_index)) if restore_index else {}
        changed = {rel: meta for rel, meta in restore_index.items() if in_index.get(rel) != meta}
        if changed:
            _set_index(self.repo, changed)
        self.end()
        return "an interrupted commit was rolled back"

    def _committed(self, record) -> bool:
        if not self.repo.head.is_valid():
            return False
        head = self.repo.head.commit
        if head.hexsha == record["head"]:
            return False
        for c in self.repo.iter_commits(head.hexsha, max_count=50):
            parents = [p.hexsha for p in c.parents]
            if c.message.strip() == record["message"].strip() and parents == ([record["head"]] if record["head"] else []):
                return True
            if c.hexsha == record["head"]:
                break
        return False


def recover_interrupted(repo) -> str | None:
    """What a commit killed half-way left (its journal in the git directory) put back, or found
    committed, as the next commit would do it; nothing while a commit runs (it holds the lock)
    or when the recovery cannot be made now (the next commit makes it)."""
    if not (git_dir(repo) / _TXN).exists():
        return None
    try:
        with repo_lock(repo, wait_s=0):
            return Journal(repo).recover()
    except (KBError, OSError):
        return None
