"""The reader registry: one entry per format, in the order files are recognised.

Each entry says how the format recognises a file (its first bytes, a Probe), how the files
a walk found make runs (Candidates), and how a run is read into a RunLog. `discover` asks
the registry and branches on no format: a new format is one module and one entry here.
The text logs are one entry, "text", whose formats are the dialects (run/dialects/, found
by textlogs.sniff). Every entry's read returns a RunLog: the readers that give series are
built into one by `built`, the one place where series become a RunLog.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from postmortem.errors import RunReadError
from postmortem.run import grouping, hf, mlflow, recognise, storerows, tables, tensorboard, textlogs, wandb
from postmortem.run.assemble import Series, build_runlog
from postmortem.run.candidate import Candidate
from postmortem.run.grouping import Found
from postmortem.run.model import RunLog, RunManifest, Source
from postmortem.run.recognise import Probe, Verdict
from postmortem.run.storerows import Describe

Recognise = Callable[[Probe], "str | Verdict | None"]
Read = Callable[[Candidate, Source, "RunManifest | None", "str | None"], RunLog]
Group = Callable[[Found, Path], list[Candidate]]
FileRuns = Callable[[Path, str], list[Candidate]]
LAST = 1 << 10      # a format with no place of its own: after those that have one
ITS_NAME: tuple[str, ...] = ("\0its name",)      # an entry's formats by default: its name alone


class Reader(Protocol):
    """What the registry asks of a format (read-only: an Entry, or any object that has these)."""

    @property
    def name(self) -> str: ...
    @property
    def formats(self) -> tuple[str, ...]:
        """The names it reads as (--format); the text entry's are the dialects."""
    @property
    def recognise(self) -> Recognise:
        """The format of a file by its Probe; NOT_A_LOG (nobody's); None (not this reader's)."""
    @property
    def read(self) -> Read:
        """A run (Candidate) into a RunLog; its last argument is --step's column."""
    @property
    def group(self) -> Group | None:
        """The runs among the files a walk found; None: each file is a run of its own."""
    @property
    def file_runs(self) -> FileRuns:
        """The runs of one file passed by itself."""
    @property
    def folders(self) -> Callable[[Path], list[Path]] | None:
        """The run folders under a path that it takes whole, before the walk (MLflow's)."""
    @property
    def join(self) -> Callable[[list[Candidate]], list[Candidate] | None] | None:
        """Several of its files that are one run (a text log's pastes), or None."""
    @property
    def forced(self) -> Callable[[Path], bool] | None:
        """--format names it for a file recognised as another: whether it reads it anyway."""
    @property
    def table(self) -> bool:
        """--step picks one of its columns."""
    @property
    def structured(self) -> bool:
        """A structured log, which wins over text logs found beside it."""
    @property
    def shares_file(self) -> bool:
        """Its runs share one file (a database): a run picked has no path of its own."""
    @property
    def describe(self) -> Describe | None:
        """Its runs' listing rows from their store's bookkeeping; None: each dated by its file."""
    @property
    def copies_beside(self) -> bool:
        """Its writer may leave a byte-identical copy beside a log (mmengine's scalars.json and
        <timestamp>.json): the copies in one folder are one run."""
    @property
    def record_name(self) -> str | None:
        """The file name of postmortem's own record of a run in this format (beside manifest.json)."""
    @property
    def shown(self) -> int:
        """Its place among --format's names."""
    @property
    def listed(self) -> int:
        """Its runs' place in a folder's listing (the formats that group)."""


def one_file(path: Path, fmt: str) -> list[Candidate]:
    """The usual case: a file is one run."""
    return [Candidate(fmt, [path], path)]


@dataclass
class Entry:
    """A row of the registry (the Reader every built-in format is)."""

    name: str
    recognise: Recognise
    read: Read
    formats: tuple[str, ...] = ITS_NAME
    group: Group | None = None
    file_runs: FileRuns = one_file
    folders: Callable[[Path], list[Path]] | None = None
    join: Callable[[list[Candidate]], list[Candidate] | None] | None = None
    forced: Callable[[Path], bool] | None = None
    table: bool = False
    structured: bool = True
    shares_file: bool = False
    describe: Describe | None = None
    copies_beside: bool = False
    record_name: str | None = None
    shown: int = LAST
    listed: int = LAST

    def __post_init__(self) -> None:
        if self.formats is ITS_NAME:
            self.formats = (self.name,)


def built(series_of: Callable[[Candidate, Source], list[Series]]) -> Read:
    """A reader of series as a reader of RunLogs (assemble.build_runlog: segments, one row a step)."""
    def read(cand: Candidate, source: Source, manifest: RunManifest | None, step: str | None) -> RunLog:
        return build_runlog(series_of(cand, source), source, manifest)
    return read


def _table(read_file: Callable[[Path, Source, RunManifest | None, str | None], RunLog]) -> Read:
    """A table reader of one file as a reader of runs."""
    def read(cand: Candidate, source: Source, manifest: RunManifest | None, step: str | None) -> RunLog:
        return read_file(cand.files[0], source, manifest, step)
    return read


def _lightning(cand: Candidate, source: Source, manifest: RunManifest | None, step: str | None) -> RunLog:
    return tables.read_lightning(cand.files, source, manifest, step)


def _trainer_state(cand: Candidate, source: Source) -> list[Series]:
    return hf.read_trainer_state(cand.files[0], source)


def _events(cand: Candidate, source: Source) -> list[Series]:
    root = cand.root if cand.root.is_dir() else cand.root.parent
    return tensorboard.read_tensorboard(cand.files, root, source)


def _wandb(cand: Candidate, source: Source) -> list[Series]:
    return wandb.read_wandb(cand.files[0], source)


def _mlflow(cand: Candidate, source: Source) -> list[Series]:
    return mlflow.read_file_store_run(cand.files[0], source)


def _mlflow_db(cand: Candidate, source: Source) -> list[Series]:
    if cand.run_id is None:      # grouping gives every run of a database its id
        raise RunReadError(cand.files[0], "no MLflow run named in the database")
    source.extras["mlflow_run_id"] = cand.run_id
    return mlflow.read_mlflow_db(cand.files[0], cand.run_id, source)


def _text(cand: Candidate, source: Source) -> list[Series]:
    if len(cand.files) > 1:
        return textlogs.read_pastes(cand.files, source, cand.format)
    return textlogs.read_text_log(cand.files[0], source, cand.format)


def _pastes(pool: list[Candidate]) -> list[Candidate] | None:
    """Text logs of one dialect in one folder that are pieces of one run (pastes of its
    stretches, or a relaunch resumed into a new file: `textlogs.pastes_of_one_run`)."""
    files = [c.files[0] for c in pool]
    if len({f.parent for f in files}) != 1:
        return None
    if pool[0].format == "marian":
        kept = _without_marian_valid_logs(pool)
        if len(kept) == 1:
            return kept
    ordered = textlogs.pastes_of_one_run(files)
    return [Candidate(pool[0].format, ordered, files[0].parent)] if ordered else None


def _without_marian_valid_logs(pool: list[Candidate]) -> list[Candidate]:
    """Marian's `--valid-log` beside its `--log`: the validator's logger writes its lines to
    both (src/common/logging.cpp `createLoggers`, but on Windows), so the file of validation
    lines alone is a copy of the log's own: read once, named."""
    valid = [c for c in pool if textlogs.is_marian_valid_log(c.files[0])]
    logs = [c for c in pool if c not in valid]
    if not valid or not logs:
        return pool
    for c in logs:
        c.notes.append(", ".join(v.files[0].name for v in valid) + " holds Marian's validation lines (--valid-log), "
                       f"which {c.files[0].name} holds too: read once")
    return logs


def _side_file(cand: Candidate, source: Source, manifest: RunManifest | None, step: str | None) -> RunLog:
    raise RunReadError(cand.files[0], "a run's side file, not its log")


# The order files are recognised in: it decides an ambiguous file (a JSON file with a step key
# and a log_history is a trainer state; a metrics.csv in version_N/ is Lightning's).
REGISTRY: list[Reader] = [
    Entry("wandb", recognise.is_wandb, built(_wandb), group=grouping.wandb_runs,
          describe=storerows.wandb_run, shown=8, listed=3),
    Entry("mlflow-db", recognise.is_mlflow_db, built(_mlflow_db), group=grouping.mlflow_db_runs,
          file_runs=grouping.database_file, shares_file=True, describe=storerows.mlflow_db, shown=7, listed=5),
    Entry("mlflow", lambda probe: None, built(_mlflow), group=grouping.mlflow_runs,
          folders=mlflow.find_file_store_runs, describe=storerows.mlflow_file_store, shown=6, listed=4),
    Entry("parquet", recognise.is_parquet, _table(tables.read_parquet), table=True, shown=2),
    Entry("tensorboard", recognise.is_tensorboard, built(_events), group=grouping.tensorboard_runs,
          describe=storerows.tensorboard_run, shown=5, listed=1),
    Entry("side-files", recognise.is_side_file, _side_file, formats=()),
    Entry("hf-trainer-state", recognise.is_trainer_state, built(_trainer_state),
          group=grouping.trainer_state_runs, describe=storerows.trainer_state, shown=3, listed=0),
    Entry("jsonl", recognise.is_jsonl, _table(tables.read_jsonl), table=True, describe=storerows.jsonl,
          copies_beside=True, record_name="metrics.jsonl", shown=0),
    Entry("lightning", recognise.is_lightning, _lightning, group=grouping.lightning_runs,
          file_runs=grouping.lightning_file, table=True, describe=storerows.lightning_run, shown=4, listed=2),
    Entry("csv", recognise.is_csv, _table(tables.read_csv), file_runs=grouping.csv_file, table=True, shown=1),
    Entry("text", recognise.is_text_log, built(_text), formats=tuple(textlogs.SNIFF), join=_pastes,
          forced=textlogs.looks_like_text, structured=False),
]


def formats() -> tuple[str, ...]:
    """Every format a run can be read as (--format's names), in the order they are shown."""
    ranked = sorted(REGISTRY, key=lambda r: r.shown)
    return tuple(f for r in ranked for f in r.formats)


def table_formats() -> tuple[str, ...]:
    """The formats --step applies to."""
    return tuple(f for f in formats() if reader_of(f).table)


def structured(fmt: str) -> bool:
    """Whether `fmt` is a structured log's format (no text log's printed arguments to parse);
    a format the registry does not read (an MLflow server's runs) is not."""
    return any(fmt in r.formats and r.structured for r in REGISTRY)


def reader_of(fmt: str) -> Reader:
    """The registry's entry that reads `fmt`."""
    for r in REGISTRY:
        if fmt in r.formats:
            return r
    raise KeyError(fmt)


def format_of(path: Path) -> str | None:
    """The format of one file: the first entry that recognises it (None: no log of ours)."""
    probe = Probe.of(path)
    if not probe.head:
        return None
    for r in REGISTRY:
        found = r.recognise(probe)
        if isinstance(found, str):
            return found
        if found is not None:       # NOT_A_LOG: the later entries are not asked
            return None
    return None


def grouped() -> list[Reader]:
    """The entries that group a walk's files into runs, in the order their runs are listed."""
    return sorted((r for r in REGISTRY if r.group is not None), key=lambda r: r.listed)


def claimed_folders(root: Path) -> Found:
    """The run folders under `root` that an entry takes whole (MLflow's file store)."""
    return {r.name: r.folders(root) for r in REGISTRY if r.folders is not None}
