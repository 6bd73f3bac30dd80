"""Where a post-mortem's run is. The front matter's `run` is kept relative to the root of the
git repository that holds both the document and the run, so that the document travels with
its repository (a clone, another machine); a run outside that repository is kept absolute.
It is found again the same way from any working directory."""

from __future__ import annotations

import os
from pathlib import Path


def repository_of(path: str | Path) -> Path | None:
    """The root of the git working tree holding `path` (where `.git` is), else None."""
    here = Path(os.path.abspath(path))
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def stored(run: str | Path, document: str | Path) -> str:
    """The run's path as the front matter of `document` keeps it: relative to the root of the
    document's repository when the run is inside it, else absolute."""
    run = Path(os.path.abspath(run))
    root = repository_of(Path(document).parent)
    if root is not None:
        for inside, top in ((run, root), (run.resolve(), root.resolve())):   # as typed, then real
            if inside.is_relative_to(top):
                return inside.relative_to(top).as_posix() or "."
    return str(run)


def candidates(run: str, document: str | Path) -> list[Path]:
    """Where the front matter's `run` may be, in order: an absolute path as it is; a relative
    one from the document's repository root, the document's folder, then the working
    directory (documents written before the path was stored relative to the repository)."""
    if Path(run).is_absolute():
        return [Path(run)]
    bases = [repository_of(Path(document).parent), Path(document).parent, Path.cwd()]
    found = [Path(os.path.abspath(base / run)) for base in bases if base is not None]
    return list(dict.fromkeys(found))


def locate(run: str | None, document: str | Path) -> tuple[Path | None, list[Path]]:
    """(the run's path, or None when it is nowhere; every path looked at)."""
    if not run:
        return None, []
    tried = candidates(run, document)
    return next((p for p in tried if p.exists()), None), tried
