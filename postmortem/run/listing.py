"""What a store's listing says of each run in it (id, name, start, steps, status), read from the
store's own bookkeeping without reading the run: MLflow's meta.yaml and runs table, W&B's and
mmengine's time-stamped folders, TensorBoard's event-file names, Lightning's versions."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from postmortem.run import mlflow, wandb
from postmortem.run.store import StoredRun, from_stamp


def _lines(path: Path, limit: int = 64 << 20) -> int | None:
    """Lines of a small file (a table's rows); None for a large one (not worth the read here)."""
    try:
        if path.stat().st_size > limit:
            return None
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return None


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _rel(path: Path, base: Path) -> str:
    if path == base:
        return path.name or str(path)       # the store is the run: named as its folder
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.name


class CandidateView(Protocol):
    """What the listing reads of a run candidate that discovery found (run/discover.py's)."""

    @property
    def format(self) -> str: ...
    @property
    def files(self) -> list[Path]: ...
    @property
    def root(self) -> Path: ...
    @property
    def run_id(self) -> str | None: ...


def describe(cands: Sequence[CandidateView], base: Path) -> list[StoredRun]:
    """One listing row per candidate, in the candidates' order."""
    db_meta: dict[Path, dict[str, StoredRun]] = {}
    out: list[StoredRun] = []
    folders = [c.root.parent if c.root.is_file() else c.root for c in cands]
    for c, folder in zip(cands, folders):
        if c.format == "mlflow-db":
            if c.files[0] not in db_meta:
                db_meta[c.files[0]] = mlflow.db_run_listing(c.files[0])
            assert c.run_id is not None               # a database's candidate is one of its runs
            out.append(db_meta[c.files[0]].get(c.run_id) or StoredRun(c.run_id))
        else:
            # a log file alone in its folder is named by the folder (runs/a/metrics.jsonl: a)
            own = folder if folder != base and folders.count(folder) == 1 else c.root
            if own.name == "vis_data" and own.parent != base:
                own = own.parent            # mmengine's <timestamp>/vis_data/: the run is <timestamp>
            out.append(_describe(c, base, own))
    ids = [r.id for r in out]
    for r, c in zip(out, cands):
        if ids.count(r.id) > 1 and c.format != "mlflow-db":
            # two stores' version_0: each named by its path in the store
            r.aliases.add(r.id)
            r.id = _rel(c.files[0] if c.format == "lightning" else c.root, base)
    return out


def _describe(c: CandidateView, base: Path, own: Path) -> StoredRun:
    f = c.files[0]
    rid = c.run_id or _rel(own, base)
    run = StoredRun(rid, aliases={_rel(c.root, base), c.root.name, own.name})
    match c.format:
        case "mlflow":
            return mlflow.file_store_listing(f) or run
        case "wandb":
            run.name = wandb.run_name(f) or f.parent.name
            run.aliases |= {run.name, f.parent.name}
            run.start = from_stamp(f.parent.name) or _mtime(f)
        case "tensorboard":
            run.start = min((from_stamp(p.name) or _mtime(p) or 0.0) for p in c.files)
        case "lightning":
            run.name = "+".join(d.name for d in c.files) if len(c.files) > 1 else ""
            run.aliases |= {d.name for d in c.files}
            run.start = _mtime(c.files[0] / "hparams.yaml") or _mtime(c.files[0] / "metrics.csv")
            rows = [_lines(d / "metrics.csv") for d in c.files]
            counted = [n for n in rows if n is not None]
            run.steps = max(0, sum(counted) - len(rows)) if len(counted) == len(rows) else None
        case _:
            run.start = from_stamp(_rel(f, base)) or _mtime(f)
            if c.format == "jsonl":
                run.steps = _lines(f)
    return run
