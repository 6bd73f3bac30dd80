"""Scan a store: every run read and analyzed in worker processes, each run's summary cached in
the user's cache folder under a key of its files' sizes and mtimes, so a rescan reads only the
runs that changed."""

from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Iterable

from postmortem import __version__
from postmortem.diagnose.analyze import analyze
from postmortem.diagnose.models import worst
from postmortem.errors import UserError
from postmortem.files import atomic_write, cache_home
from postmortem.run import listing, mlflowserver, read_run
from postmortem.run.discover import read_candidate, runs_in

CACHE_FORMAT = 1        # bump when a summary's shape or the analysis behind it changes


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/postmortem/runs (~/.cache/postmortem/runs)."""
    return cache_home() / "runs"


def _files_of(cand) -> list[Path]:
    """The files a run's analysis depends on (a folder's files, walked; a log file itself)."""
    out = []
    for f in cand.files:
        if f.is_dir():
            out += sorted(p for p in f.rglob("*") if p.is_file())
        else:
            out.append(f)
    manifest = (cand.root if cand.root.is_dir() else cand.root.parent) / "manifest.json"
    if manifest.is_file():
        out.append(manifest)
    return out


def key_of(task: dict) -> str | None:
    """The cache key of a run: what it is, and its files' sizes and mtimes (a database's run:
    its points and last timestamp; a server's run once it has ended). None: never cached."""
    parts = [str(CACHE_FORMAT), __version__, task["address"], task["id"]]
    cand = task.get("candidate")
    if cand is not None and cand.format != "mlflow-db":
        try:
            for f in _files_of(cand):
                st = f.stat()
                parts.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            return None
    elif task.get("stamp"):
        parts.append(task["stamp"])
    else:
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _slot(task: dict) -> Path:
    """One cache file a run (its store and id): a run that changes overwrites its own row, so
    the cache holds one row a run ever scanned, never one a version of it."""
    name = hashlib.sha256(f"{task['address']}\n{task['id']}".encode()).hexdigest()
    return cache_dir() / name[:2] / f"{name}.json"


def _cached(task: dict, key: str | None) -> dict | None:
    if key is None:
        return None
    try:
        held = json.loads(_slot(task).read_text())
    except (OSError, ValueError):
        return None
    return held.get("row") if isinstance(held, dict) and held.get("key") == key else None


def _store(task: dict, key: str | None, summary: dict) -> None:
    """Atomically: a reader never sees half a file, two scans at once never mix theirs."""
    if key is None:
        return
    try:
        atomic_write(_slot(task), json.dumps({"key": key, "row": summary}))
    except OSError:
        pass            # a cache that cannot be written costs the next scan time, nothing else


def summarize(task: dict) -> dict:
    """Read and analyze one run (in a worker): what `analyze` found, in one row."""
    started = time.perf_counter()
    # the id as given (an empty one stays ""); the rest None where unknown
    row = {"id": task["id"], **{k: task[k] or None for k in ("name", "start", "steps", "status")}}
    try:
        if task.get("candidate") is not None:
            log = read_candidate(task["candidate"], Path(task["path"]))
        else:
            log = read_run(task["address"], run=task["id"])
        result = analyze(log)
        incs = result.incidents
        row.update(format=log.source.format, steps=len(log.frame), incidents=len(incs), error=None,
                   kind=None, step=None, top_cause=None, score=None)
        if incs:
            inc = incs[worst(incs)]
            top = inc.hypotheses[0] if inc.hypotheses else None
            row.update(kind=inc.shown_kind, step=inc.step,
                       top_cause=top.pattern if top else None,
                       score=round(top.score, 3) if top else None)
    except UserError as err:
        row.update(incidents=None, error=str(err).splitlines()[0])
    except Exception as err:            # a bug of ours on one run: named in its row, the scan goes on
        row.update(incidents=None, error=f"internal error: {type(err).__name__}: {err}")
    row["seconds"] = round(time.perf_counter() - started, 4)
    return row


def tasks_of(store: str) -> list[dict]:
    """One task per run of the store (run/store.py's rule: the runs `--run` picks from)."""
    if mlflowserver.is_uri(store):
        return [dict(address=store, path=store, candidate=None, **_listed(r))
                for r in mlflowserver.server_runs(store, count_steps=False)]   # counted as read
    # by its whole path: the cache's slots and keys name the store and its files, so a rescan
    # from another folder, or spelled another way, finds the rows of the first scan
    path = Path(store).absolute()
    cands = runs_in(path)
    out = []
    # a file's runs (a database's, or the log itself) are named from the folder it sits in
    for cand, r in zip(cands, listing.describe(cands, path if path.is_dir() else path.parent, steps=False)):
        # a run with a folder or file of its own is read as that; a database's run in its store
        own = cand.root if cand.format != "mlflow-db" else path
        out.append(dict(address=str(path), path=str(own), candidate=cand, **_listed(r)))
    return out


def _listed(r) -> dict:
    return {"id": r.id, "name": r.name, "start": r.start, "steps": r.steps, "status": r.status,
            "stamp": r.stamp}


def scan(store: str, jobs: int | None = None, use_cache: bool = True) -> tuple[list[dict], dict[str, float]]:
    """(one summary a run, newest first; figures of the scan: runs, cached, seconds, workers)."""
    started = time.perf_counter()
    tasks = tasks_of(store)
    keys = [key_of(t) if use_cache else None for t in tasks]
    rows: list[dict | None] = [_cached(t, k) for t, k in zip(tasks, keys)]
    todo = [i for i, r in enumerate(rows) if r is None]
    workers = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
    if todo:
        fresh: Iterable[dict]
        if workers == 1:
            fresh = map(summarize, (tasks[i] for i in todo))
        else:
            pool = ProcessPoolExecutor(max_workers=workers)
            fresh = pool.map(summarize, [tasks[i] for i in todo],
                             chunksize=max(1, len(todo) // (workers * 8)))
        for i, row in zip(todo, fresh):
            rows[i] = row
            if row.get("error") is None or not row["error"].startswith("internal error"):
                _store(tasks[i], keys[i], row)
        if workers > 1:
            pool.shutdown()
    done = [row for row in rows if row is not None]
    assert len(done) == len(tasks)          # every run summarized, or found in the cache
    for row, t in zip(done, tasks):
        row["start"] = t["start"]         # the listing's, fresh: a cached row keeps no stale one
    done = sorted(done, key=lambda r: (r["start"] is None, -(r["start"] or 0.0), r["id"]))
    figures = {"runs": len(tasks), "cached": len(tasks) - len(todo), "analyzed": len(todo),
               "workers": workers if todo else 0, "seconds": round(time.perf_counter() - started, 3)}
    return done, figures
