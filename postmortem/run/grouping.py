"""How the files a walk found make runs: a store's own grouping (an HF output dir and its
checkpoints, TensorBoard's run folders, Lightning's versions, W&B's and MLflow's runs), and
the runs of one file passed by itself."""

from __future__ import annotations

import csv
from pathlib import Path

from postmortem.errors import RunReadError
from postmortem.run import hf, mlflow, tables, tensorboard
from postmortem.run.assemble import to_number
from postmortem.run.candidate import Candidate
from postmortem.run.recognise import keyed_csv

# What the walk found: format -> its files in walk order (MLflow's: the run folders it claimed)
Found = dict[str, list[Path]]


def trainer_state_runs(found: Found, root: Path) -> list[Candidate]:
    """An output dir's own trainer_state.json and its checkpoint-N/ copies: one run."""
    by_output_dir: dict[Path, list[Path]] = {}
    for f in found.get("hf-trainer-state", []):
        out = f.parent.parent if f.parent.name.startswith("checkpoint-") else f.parent
        by_output_dir.setdefault(out, []).append(f)
    events = found.get("tensorboard", [])
    cands = []
    for out, states in by_output_dir.items():
        c = Candidate("hf-trainer-state", [hf.pick_trainer_state(states)],
                      root if len(by_output_dir) == 1 else out)
        if events:
            c.notes.append(f"also found {len(events)} TensorBoard event file(s) of the same run; read "
                           f"trainer_state.json (--format tensorboard reads them instead)")
        cands.append(c)
    return cands


def tensorboard_runs(found: Found, root: Path) -> list[Candidate]:
    """Event files by run folder; beside a trainer_state.json they are the same run's copy."""
    beside_state = bool(found.get("hf-trainer-state"))
    return [Candidate("tensorboard", files, run_root, companion=beside_state)
            for run_root, files in tensorboard.group_runs(found.get("tensorboard", []), root)]


def lightning_runs(found: Found, root: Path) -> list[Candidate]:
    """Lightning's version_N folders, a resumed run's versions chained into one run."""
    by_parent: dict[Path, list[Path]] = {}
    for f in found.get("lightning", []):
        by_parent.setdefault(f.parent.parent, []).append(f.parent)
    cands = []
    for parent, versions in by_parent.items():
        if parent == root or root in parent.parents:
            # an empty or broken version_N/metrics.csv beside good ones is read too, to be named;
            # never a sibling of the version folder that was passed
            versions += [d for d in sorted(parent.glob("version_*"))
                         if d not in versions and tables.is_lightning_dir(d)]
        for chain in _version_chains(versions):
            cands.append(Candidate("lightning", chain, parent if len(chain) > 1 else chain[0],
                                   run_id=chain[0].name))
    return cands


def _version_chains(versions: list[Path]) -> list[list[Path]]:
    """Version folders in runs: a version whose first step comes after the previous one's is a
    resume of that run (Lightning opens a new version_N on every fit()); one that starts again
    is another run."""
    def number(d: Path) -> int:
        tail = d.name.rsplit("_", 1)[-1]
        return int(tail) if tail.isdigit() else -1
    runs: list[list[Path]] = []
    last = None
    for d in sorted(versions, key=number):
        first = _first_step(d / "metrics.csv")
        if runs and (first is None or last is None or first > last):
            runs[-1].append(d)
        else:
            runs.append([d])
        last = first if first is not None else last
    return runs


def _first_step(path: Path) -> float | None:
    """The first step a Lightning metrics.csv logs (its header and first rows only)."""
    try:
        with open(path, newline="", errors="replace") as f:
            rows = csv.reader(f)
            header = [c.strip().lower() for c in next(rows, [])]
            if "step" not in header:
                return None
            at = header.index("step")
            for _, row in zip(range(1000), rows):
                if len(row) > at and to_number(row[at]) is not None:
                    return to_number(row[at])
    except (OSError, csv.Error):
        return None
    return None


def wandb_runs(found: Found, root: Path) -> list[Candidate]:
    """A run-<id>.wandb file is a run, named by its id."""
    return [Candidate("wandb", [f], f.parent, run_id=f.stem.removeprefix("run-"))
            for f in found.get("wandb", [])]


def mlflow_runs(found: Found, root: Path) -> list[Candidate]:
    """MLflow's file store: each run folder is a run."""
    return [Candidate("mlflow", [run], run, run_id=run.name) for run in found.get("mlflow", [])]


def mlflow_db_runs(found: Found, root: Path) -> list[Candidate]:
    """MLflow's database: each run with metrics in it is a run."""
    return [c for db in found.get("mlflow-db", []) for c in _db_runs(db)]


def _db_runs(path: Path) -> list[Candidate]:
    return [Candidate("mlflow-db", [path], path, run_id=r) for r in mlflow.mlflow_db_runs(path)]


def database_file(path: Path, fmt: str) -> list[Candidate]:
    """An MLflow database passed by itself: its runs; one with none is refused."""
    runs = _db_runs(path)
    if not runs:
        raise RunReadError(path, "the MLflow database holds no run with metrics")
    return runs


def lightning_file(path: Path, fmt: str) -> list[Candidate]:
    """A version_N/metrics.csv passed by itself: its version folder is the run."""
    return [Candidate(fmt, [path.parent], path.parent)]


def csv_file(path: Path, fmt: str) -> list[Candidate]:
    """A CSV table; one with no step column is weak (any log with one wins over it)."""
    return [Candidate(fmt, [path], path, weak=not keyed_csv(path))]
