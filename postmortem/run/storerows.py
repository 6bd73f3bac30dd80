"""What a store's own bookkeeping says of its runs, one hook a format (the registry's
`describe`): MLflow's meta.yaml and runs table, W&B's time-stamped folders, TensorBoard's
event-file names, Lightning's versions, a JSONL log's lines. run/listing.py asks the
registry for the hook of each run's format; a format with none is dated by its file."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from postmortem.run import mlflow, wandb
from postmortem.run.protowire import ProtoError, fields, records
from postmortem.run.store import StoredRun, from_stamp


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


class Describe(Protocol):
    """The rows of one format's runs, given each run's usual row (its id, its folder's names): a
    batch, so that a database's runs table is read once for all its runs. `steps`: count each
    run's steps too (a listing shown to a person); a scan leaves them out, as its analysis
    counts them, so that a rescan reads no run's data."""

    def __call__(self, cands: Sequence[CandidateView], base: Path, rows: list[StoredRun],
                 steps: bool = True) -> list[StoredRun]: ...


OneRow = Callable[[CandidateView, Path, StoredRun], StoredRun]


def lines(path: Path, limit: int = 64 << 20) -> int | None:
    """Lines of a small file (a table's rows); None for a large one (not worth the read here)."""
    try:
        if path.stat().st_size > limit:
            return None
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return None


def mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def rel(path: Path, base: Path) -> str:
    if path == base:
        return path.name or str(path)       # the store is the run: named as its folder
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.name


def each(one: OneRow, count: OneRow | None = None) -> Describe:
    """A hook of one run at a time as a hook of a batch; `count` counts a run's steps, which
    reads its data: asked only where the listing is shown."""
    def describe(cands: Sequence[CandidateView], base: Path, rows: list[StoredRun],
                 steps: bool = True) -> list[StoredRun]:
        out = [one(c, base, run) for c, run in zip(cands, rows)]
        if count is not None and steps:
            out = [count(c, base, run) for c, run in zip(cands, out)]
        return out
    return describe


def _dated(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    f = c.files[0]
    run.start = from_stamp(rel(f, base)) or mtime(f)
    return run


def _jsonl_steps(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    run.steps = lines(c.files[0])
    return run


def _mlflow(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    return mlflow.file_store_listing(c.files[0]) or run


def _mlflow_steps(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    """The points of the run's longest metric file (one a line)."""
    files = [p for p in (c.files[0] / "metrics").rglob("*") if p.is_file()]
    longest = max(files, key=_size, default=None)
    run.steps = lines(longest) if longest is not None else None
    return run


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _wandb(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    f = c.files[0]
    run.name = wandb.run_name(f) or f.parent.name
    run.aliases |= {run.name, f.parent.name}
    run.start = from_stamp(f.parent.name) or mtime(f)
    return run


def _wandb_steps(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    run.steps = wandb.history_steps(c.files[0])
    return run


def event_steps(files: Sequence[Path], limit: int = 64 << 20) -> int | None:
    """The distinct steps of the events that carry a summary (what the run logged), from each
    record's step field alone; None for event files too large to be worth the read here."""
    try:
        if sum(p.stat().st_size for p in files) > limit:
            return None
        steps: set[int] = set()
        for p in files:
            for rec in records(p.read_bytes()):
                step, logged = 0, False           # proto3 leaves a step 0 out
                try:
                    for number, wire, value in fields(rec):
                        if number == 2 and wire == 0 and isinstance(value, int):
                            step = value
                        elif number == 5:          # Event.summary
                            logged = True
                except ProtoError:
                    continue                      # a torn record: the reader says so, not the listing
                if logged:
                    steps.add(step)
        return len(steps)
    except OSError:
        return None


def _tensorboard(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    run.start = min((from_stamp(p.name) or mtime(p) or 0.0) for p in c.files)
    return run


def _tensorboard_steps(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    run.steps = event_steps(c.files)
    return run


def _trainer_state_steps(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    """An HF output dir: the steps its latest trainer_state.json logged (small files: read)."""
    try:
        if c.files[0].stat().st_size <= 64 << 20:
            history = json.loads(c.files[0].read_bytes()).get("log_history") or []
            run.steps = len({h.get("step") for h in history if isinstance(h, dict)})
    except (OSError, ValueError, AttributeError):
        pass            # the listing is a courtesy: the reader says what is wrong with the file
    return run


def _lightning(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    run.name = "+".join(d.name for d in c.files) if len(c.files) > 1 else ""
    run.aliases |= {d.name for d in c.files}
    run.start = mtime(c.files[0] / "hparams.yaml") or mtime(c.files[0] / "metrics.csv")
    return run


def _lightning_steps(c: CandidateView, base: Path, run: StoredRun) -> StoredRun:
    rows = [lines(d / "metrics.csv") for d in c.files]
    counted = [n for n in rows if n is not None]
    run.steps = max(0, sum(counted) - len(rows)) if len(counted) == len(rows) else None
    return run


def mlflow_db(cands: Sequence[CandidateView], base: Path, rows: list[StoredRun],
              steps: bool = True) -> list[StoredRun]:
    """A database's runs from its runs table, read once a database (not from their folders);
    its steps come with the points and last time the cache keys on, in the same query."""
    tables: dict[Path, dict[str, StoredRun]] = {}
    out = []
    for c in cands:
        if c.files[0] not in tables:
            tables[c.files[0]] = mlflow.db_run_listing(c.files[0])
        assert c.run_id is not None               # a database's candidate is one of its runs
        out.append(tables[c.files[0]].get(c.run_id) or StoredRun(c.run_id))
    return out


dated = each(_dated)
jsonl = each(_dated, _jsonl_steps)
mlflow_file_store = each(_mlflow, _mlflow_steps)
wandb_run = each(_wandb, _wandb_steps)
tensorboard_run = each(_tensorboard, _tensorboard_steps)
lightning_run = each(_lightning, _lightning_steps)
trainer_state = each(_dated, _trainer_state_steps)
