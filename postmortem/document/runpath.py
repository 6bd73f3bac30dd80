"""Where a post-mortem's run is. The front matter's `run` is kept relative to the root of the
git repository that holds both the document and the run, so that the document travels with
its repository (a clone, another machine); a run outside that repository is kept absolute,
an MLflow server's URI as it is. It is found again the same way from any working directory.
A run inside a store of several (an MLflow database, a TensorBoard logdir, ...) is the store's
path there, and `run_in_store` its id in the store: it is read again with that id (`read`)."""

from __future__ import annotations

import os
from pathlib import Path

from postmortem.errors import UserError


def repository_of(path: str | Path) -> Path | None:
    """The root of the git working tree holding `path` (where `.git` is), else None."""
    here = Path(os.path.abspath(path))
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def is_uri(run) -> bool:
    """An MLflow server's address (http://host:port): no file, kept and read as it is."""
    # postmortem.run (pandas, ~1.3 s) only when a run is read: kb/ imports this module, and
    # `init`, `lessons` and the commit's path rules go without it
    from postmortem.run.mlflowserver import is_uri  # noqa: PLC0415
    return is_uri(str(run))


def absolute(run: str | Path) -> str:
    """The run's path from the root (a URI as it is): a draft made here is found again from
    any folder, as the TUI offers drafts back from any folder."""
    return str(run) if is_uri(run) else os.path.abspath(run)


def stored(run: str | Path, document: str | Path) -> str:
    """The run's path as the front matter of `document` keeps it: relative to the root of the
    document's repository when the run is inside it, else absolute (a URI as it is)."""
    if is_uri(run):
        return str(run)
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


def locate(run: str | None, document: str | Path) -> tuple[Path | str | None, list[Path]]:
    """(the run's path, or None when it is nowhere; every path looked at). A URI is its own
    place: reading it says whether the server is there."""
    if not run:
        return None, []
    if is_uri(run):
        return run, []
    tried = candidates(run, document)
    return next((p for p in tried if p.exists()), None), tried


def run_id_of(log) -> str:
    """The post-mortem's run id (its file name, its draft's and kept replay's key): the run's
    own id, and for a run picked in a store of several (`--run ID`, the TUI's picker) its id
    there too, unless the run's id says it already: two runs of one store (Lightning's
    version_0 and version_1 of one project, two MLflow runs of one name) never share a file."""
    from postmortem.run.identity import safe_id  # noqa: PLC0415 (postmortem.run: see is_uri)
    own, there = log.run_id, log.source.extras.get("store_run")
    if not there:
        return own
    there = safe_id(there)
    if own == there:
        return own
    if len(there) > 12 and there.isalnum():
        there = there[:8]           # a tracker's 32-hex id: its start tells runs apart (as --run takes it)
    return safe_id(f"{own}-{there}")


class RunGone(UserError):
    """The store the document names no longer holds its run (`run_in_store`), or holds several
    and the document names none: one line naming the store, the id, and the runs it holds."""

    def __init__(self, store, run_id: str | None, held: list[str]):
        shown = ", ".join(held[:8]) + (f" ... and {len(held) - 8} more" if len(held) > 8 else "")
        what = (f"holds no run `{run_id}` (front matter `run_in_store`) any more" if run_id else
                f"holds {len(held)} runs and the document names none of them (front matter `run_in_store: ID`)")
        super().__init__(f"{store}: {what}; it holds: {shown or 'no runs'} (`postmortem runs {store}` lists them)")


def read(where: str | Path, run_in_store: str | None, given: bool = False):
    """The RunLog of the document's run at `where`: its run `run_in_store` when it names one.
    `given`: `where` was named on the command line (--run, --baseline); the id is then used only
    if that path holds several runs (the store moved), not for a run's own folder."""
    from postmortem.run import read_run  # noqa: PLC0415 (see is_uri)
    from postmortem.run.store import NoSuchRun, SeveralRuns  # noqa: PLC0415
    if run_in_store is None or given:
        try:
            return read_run(where)
        except SeveralRuns as err:
            if run_in_store is None:        # said for this document, not as `--run ID` of analyze
                ids = [r.id for r in err.runs]
                raise RunGone(where, None, ids) from None
    try:
        return read_run(where, run=run_in_store)
    except NoSuchRun as err:
        raise RunGone(where, run_in_store, err.held) from None
