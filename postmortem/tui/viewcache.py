"""The first view of each run opened before, kept so that opening it again paints at once.

The loader process sends a kept view before it has imported pandas, then reads and analyzes
the run as ever and sends the fresh view too when it differs: the cache only makes the first
frame early, it never decides what the dashboard ends up showing. A view is kept with the
size and modification time of every file it came from (and of the folders holding them, so
a file added to the run is seen) and with a fingerprint of postmortem's own code; any of
them changed, it is not used. Only the standard library (and postmortem.files) is imported here.

A kept file is read back by an unpickler that builds nothing but the view's own dataclasses
and arrays (`_ViewOnly`): a file put in the cache folder by someone else cannot run code.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import pickle
import time
from pathlib import Path

import postmortem
from postmortem.files import atomic_write, cache_home

KEPT = 64                      # views kept; the least recently opened go first
LARGEST = 8 << 20              # bytes: a bigger view (a long run's full series) is not kept
ALL = 128 << 20                # bytes of all the views kept together, at most
_PACKAGE = Path(postmortem.__file__).parent


def folder() -> Path:
    """$XDG_CACHE_HOME/postmortem/views, else ~/.cache/postmortem/views."""
    return cache_home() / "views"


def _entry(run: str, format: str | None, against: list[str], columns: dict) -> Path:
    what = json.dumps([os.path.abspath(run), format, [os.path.abspath(a) for a in against],
                       sorted(columns.items())])
    return folder() / (hashlib.sha256(what.encode()).hexdigest()[:32] + ".pickle")


@functools.cache          # looked up, then kept: one walk of the package a process
def code_fingerprint() -> str:
    """postmortem's version and the size and time of each of its modules: a view made by
    other code (an upgrade, an edit in a checkout) is made again."""
    stats = [postmortem.__version__]
    for root, dirs, files in os.walk(_PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".tcss", ".md")):
                st = os.stat(os.path.join(root, name))
                stats.append(f"{os.path.relpath(os.path.join(root, name), _PACKAGE)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(stats).encode()).hexdigest()


def _stamps(paths) -> list[tuple[str, int, int]]:
    out = []
    for path in sorted(set(paths)):
        try:
            st = os.stat(path)
        except OSError:
            out.append((path, -1, -1))             # gone: differs from any stamp of a file
            continue
        out.append((path, st.st_size, st.st_mtime_ns))
    return out


def sources(run: str, files: list[str]) -> list[str]:
    """What a run's view depends on: the files read, the folders between them and the run
    (a tfevents file added deep in the tree), and the run folder's own files (a manifest)."""
    paths = {os.path.abspath(run)}
    top = Path(run).resolve()
    for name in files:
        path = Path(name).resolve()
        paths.add(str(path))
        for parent in path.parents:
            if parent == top or top not in parent.parents:
                break
            paths.add(str(parent))
    if top.is_dir():
        paths.update(str(p) for p in top.iterdir() if p.is_file())
    return sorted(paths)


class _ViewOnly(pickle.Unpickler):
    """Pickle's reader limited to what a view is made of: the dataclasses of tui/view.py and
    array.array (with its reconstructor); any other global (os.system, builtins.eval, a
    class with a __reduce__ of its own) is refused before anything is called."""

    def find_class(self, module: str, name: str):
        if module == "array" and name in ("array", "_array_reconstructor"):
            return super().find_class(module, name)
        if module == "postmortem.tui.view":
            import dataclasses

            from postmortem.tui import view
            found = getattr(view, name, None)
            if isinstance(found, type) and dataclasses.is_dataclass(found):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a view")


def load(data: bytes):
    """A kept entry back from its bytes, through _ViewOnly."""
    return _ViewOnly(io.BytesIO(data)).load()


def lookup(run: str, format: str | None, against: list[str], columns: dict):
    """The view kept for these options when nothing it came from has changed, else None;
    a damaged or foreign entry is None too."""
    path = _entry(run, format, against, columns)
    try:
        with open(path, "rb") as f:
            kept = load(f.read())
        if kept["code"] != code_fingerprint() or kept["stamps"] != _stamps(s for s, *_ in kept["stamps"]):
            return None
        os.utime(path)                             # recently opened: kept longer
        return kept["view"]
    except Exception:                              # absent, truncated, another version's
        return None


def keep(run: str, format: str | None, against: list[str], columns: dict, view,
         files: list[str]) -> None:
    """Keep `view` (made from `files`) for the next opening; never raises: a cache that
    cannot be written (a read-only home) only costs the next opening its head start."""
    try:
        stamps = _stamps(files)
        data = pickle.dumps({"code": code_fingerprint(), "stamps": stamps, "view": view}, protocol=5)
        if len(data) > LARGEST:
            return
        _prune(atomic_write(_entry(run, format, against, columns), data).parent)
    except Exception:
        pass


def _prune(where: Path) -> None:
    """The most recently opened views stay, at most KEPT of them and ALL bytes together; a
    half-written one (a loader killed as it wrote) goes after an hour."""
    entries = sorted(((p, p.stat()) for p in where.glob("*.pickle")), key=lambda e: e[1].st_mtime, reverse=True)
    total = 0
    for i, (old, st) in enumerate(entries):
        total += st.st_size
        if i >= KEPT or total > ALL:
            old.unlink(missing_ok=True)
    for tmp in where.glob("*.tmp"):
        if time.time() - tmp.stat().st_mtime > 3600:
            tmp.unlink(missing_ok=True)
