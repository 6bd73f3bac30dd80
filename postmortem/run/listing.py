"""What a store's listing says of each run in it (id, name, start, steps, status), read from the
store's own bookkeeping without reading the run: each format's registry entry says how
(`describe`, in run/storerows.py); a format with none is dated by its file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from postmortem.run import readers, storerows
from postmortem.run.store import StoredRun
from postmortem.run.storerows import CandidateView, rel


def _entry(fmt: str) -> readers.Reader | None:
    try:
        return readers.reader_of(fmt)
    except KeyError:        # a run from elsewhere than the registry (an MLflow server's)
        return None


def describe(cands: Sequence[CandidateView], base: Path, steps: bool = True) -> list[StoredRun]:
    """One listing row per candidate, in the candidates' order; `steps`: each run's steps
    counted too (for a person's listing; picking a run or scanning a store needs none)."""
    folders = [c.root.parent if c.root.is_file() else c.root for c in cands]
    out: list[StoredRun] = []
    for c, folder in zip(cands, folders):
        # a log file alone in its folder is named by the folder (runs/a/metrics.jsonl: a)
        own = folder if folder != base and folders.count(folder) == 1 else c.root
        if own.name == "vis_data" and own.parent != base:
            own = own.parent            # mmengine's <timestamp>/vis_data/: the run is <timestamp>
        out.append(StoredRun(c.run_id or rel(own, base), aliases={rel(c.root, base), c.root.name, own.name}))
    by_format: dict[str, list[int]] = {}
    for i, c in enumerate(cands):
        by_format.setdefault(c.format, []).append(i)
    for fmt, ix in by_format.items():
        entry = _entry(fmt)
        hook = entry.describe if entry is not None and entry.describe is not None else storerows.dated
        for i, row in zip(ix, hook([cands[i] for i in ix], base, [out[i] for i in ix], steps)):
            out[i] = row
    ids = [r.id for r in out]
    for r, c in zip(out, cands):
        entry = _entry(c.format)
        if ids.count(r.id) > 1 and not (entry is not None and entry.shares_file):
            # two stores' version_0: each named by its path in the store (a run whose files are
            # folders, Lightning's versions, by its first)
            r.aliases.add(r.id)
            r.id = rel(c.files[0] if c.files[0].is_dir() else c.root, base)
    return out
