"""Find what a path holds, pick the reader by content, and read it into a RunLog."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from postmortem.run import hf, logconfig, losscolumn, mlflow, store, tables, tensorboard, textfile, textlogs, wandb
from postmortem.run.assemble import build_runlog
from postmortem.run.model import RunLog, RunManifest, RunReadError, Source

FORMATS = ("jsonl", "csv", "parquet", "hf-trainer-state", "lightning", "tensorboard", "mlflow",
           "mlflow-db", "wandb", *textlogs.SNIFF)
_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "checkpoints", "artifacts", "media"}
_SKIP_SUFFIXES = {".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".npy", ".npz", ".png", ".jpg",
                  ".gif", ".svg", ".pkl", ".py", ".yaml", ".yml", ".toml", ".html", ".tar", ".gz",
                  ".zip"}
_SIDE_JSON = {"all_results.json", "train_results.json", "eval_results.json", "config.json",
              "manifest.json", "wandb-summary.json", "wandb-metadata.json",
              "minigpt.json"}      # the mini-GPT lab's config, beside its run's record


@dataclass
class Candidate:
    """One readable thing found under the path: a format and the files it spans."""

    format: str
    files: list[Path]
    root: Path
    structured: bool = True
    companion: bool = False       # the same run in a second format: read only on request
    weak: bool = False            # a table with no step column: loses to any log that has one
    notes: list[str] = field(default_factory=list)
    run_id: str | None = None     # the store's own id of the run (MLflow, W&B); else its folder
    record: bool = False          # postmortem's own record of the run (metrics.jsonl + manifest.json)
    picked: str | None = None     # the listing's id of the run `--run` picked (a post-mortem records it)

    def label(self, base: Path) -> str:
        rel = self.root.relative_to(base) if self.root != base and base in self.root.parents else self.root.name
        return f"{rel} ({self.format})"


def _magic(path: Path, n: int = 16) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def _first_line(path: Path, head: bytes, limit: int = 4 << 20) -> bytes:
    """The first line whole, even when it is longer than the head (a wide JSONL record)."""
    if b"\n" in head or len(head) < 4096:
        return head.split(b"\n", 1)[0]
    with open(path, "rb") as f:
        line = f.readline(limit)
    return line.removeprefix(b"\xef\xbb\xbf")


def _json_keys(line: bytes) -> set[str]:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return set()
    return set(obj) if isinstance(obj, dict) else set()


_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_JSON_KEY = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:')


def _cut_json_record(path: Path, line: bytes) -> bool:
    """The file's only line is a JSON object cut short (a JSONL file caught mid-write): it
    is JSONL by its name or by the step key it shows, and its reader says it is cut."""
    if not line.lstrip().startswith(b'{"') or _json_keys(line) or not _only_line_unended(path):
        return False
    if path.suffix.lower() in _JSONL_SUFFIXES:
        return True
    keys = {k.decode("utf-8", "replace") for k in _JSON_KEY.findall(line)}
    return bool(keys & {*tables.STEP_NAMES, *tables.EPOCH_NAMES})


def _only_line_unended(path: Path, limit: int = 4 << 20) -> bool:
    """Whether the file is one line with no newline at its end."""
    with open(path, "rb") as f:
        return not f.readline(limit).endswith(b"\n") and not f.read(1)


def classify_file(path: Path) -> str | None:
    """The format of one file, by content first and by name where content is ambiguous."""
    raw = _magic(path, 4096)
    head = textfile.utf8_head(raw)      # a UTF-16 file (PowerShell's `>`) is classed by its text
    if not head:
        return None
    if head.startswith(wandb.MAGIC):
        return "wandb"
    if head.startswith(b"SQLite format 3\x00"):
        return "mlflow-db" if mlflow.is_mlflow_db(path) else None
    if head.startswith(b"PAR1"):
        return "parquet"
    if tensorboard.is_event_file(path):
        return "tensorboard"
    if path.name in _SIDE_JSON:
        return None
    text = head.lstrip()
    if text.startswith(b"{") and (hf.is_trainer_state(path) or textfile.is_wide(raw) and path.suffix == ".json"
                                  and b'"log_history"' in bytes(textfile.utf8_bytes(path)[0])):
        return "hf-trainer-state"
    if text.startswith(b"{"):
        line = _first_line(path, text)
        keys = _json_keys(line)
        if (keys & {*tables.STEP_NAMES, *tables.EPOCH_NAMES} or _cut_json_record(path, line)) \
                and not textlogs.is_fairseq_v09_json(line):
            return "jsonl"
    first_line = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip().lower()
    cells = [c.strip().strip('"') for c in first_line.split(",")]
    if "," in first_line and (any(c in tables.STEP_NAMES or c in tables.EPOCH_NAMES for c in cells)
                              or path.suffix.lower() == ".csv" and _names_not_numbers(cells)):
        return "lightning" if path.name == "metrics.csv" and tables.is_lightning_dir(path.parent) else "csv"
    if textlogs.looks_like_text(path):
        dialect, _ = textlogs.sniff(path)
        return dialect
    return None


def _keyed_csv(path: Path) -> bool:
    cells = _magic(path, 4096).split(b"\n", 1)[0].decode("utf-8", "replace").lower().split(",")
    return any(c.strip().strip('"') in (*tables.STEP_NAMES, *tables.EPOCH_NAMES) for c in cells)


def _names_not_numbers(cells: list[str]) -> bool:
    """A header row: a table without a step column still names its columns."""
    return len(cells) >= 2 and all(c and tables.to_number(c) is None for c in cells)


def _walk(root: Path, problems: list[str] | None = None, skip: frozenset = frozenset()):
    """Files under `root`, but not in the folders `skip` (runs already found); symlinked files
    are read, symlinked folders not searched (a dataset, a loop); FIFOs and devices never opened."""
    stack, seen = [root], set()
    while stack:
        d = stack.pop()
        try:
            real = d.resolve()
            if real in seen:
                continue
            seen.add(real)
            entries = sorted(d.iterdir())
        except OSError as err:
            if problems is not None:
                problems.append(f"{d}: {err.strerror or err}; not searched")
            continue
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                is_dir, is_file = e.is_dir(), e.is_file()
            except OSError:
                continue
            if is_dir:
                # a linked folder may be a dataset or a whole disk: not searched
                if e.name not in _SKIP_DIRS and not e.is_symlink() and e not in skip:
                    stack.append(e)
            elif is_file and e.suffix.lower() not in _SKIP_SUFFIXES:
                yield e


def find_candidates(root: Path, problems: list[str] | None = None) -> list[Candidate]:
    """Group the files under `root` into the runs they belong to."""
    tb, hf_states, lightning, wandb_files, dbs, others = [], [], {}, [], [], []
    mlflow_runs = mlflow.find_file_store_runs(root)
    mlflow_dirs = frozenset(mlflow_runs)
    for f in _walk(root, problems, skip=mlflow_dirs):
        if any(p in mlflow_dirs for p in f.parents):      # the run folder passed itself
            continue
        kind = classify_file(f)
        if kind is None:
            continue
        if kind == "tensorboard":
            tb.append(f)
        elif kind == "hf-trainer-state":
            hf_states.append(f)
        elif kind == "lightning":
            lightning.setdefault(f.parent.parent, []).append(f.parent)
        elif kind == "wandb":
            wandb_files.append(f)
        elif kind == "mlflow-db":
            dbs.append(f)
        else:
            others.append(Candidate(kind, [f], f, structured=kind in ("jsonl", "csv", "parquet"),
                                    weak=kind == "csv" and not _keyed_csv(f)))
    cands: list[Candidate] = []
    by_output_dir: dict[Path, list[Path]] = {}
    for f in hf_states:      # an output dir's own state and its checkpoint-N/ copies: one run
        out = f.parent.parent if f.parent.name.startswith("checkpoint-") else f.parent
        by_output_dir.setdefault(out, []).append(f)
    for out, states in by_output_dir.items():
        c = Candidate("hf-trainer-state", [hf.pick_trainer_state(states)],
                      root if len(by_output_dir) == 1 else out)
        if tb:
            c.notes.append(f"also found {len(tb)} TensorBoard event file(s) of the same run; read "
                           f"trainer_state.json (--format tensorboard reads them instead)")
        cands.append(c)
    for run_root, files in tensorboard.group_runs(tb, root):
        cands.append(Candidate("tensorboard", files, run_root, companion=bool(hf_states)))
    for parent, versions in lightning.items():
        if parent == root or root in parent.parents:
            # an empty or broken version_N/metrics.csv beside good ones is read too, to be named;
            # never a sibling of the version folder that was passed
            versions += [d for d in sorted(parent.glob("version_*"))
                         if d not in versions and tables.is_lightning_dir(d)]
        for chain in _lightning_runs(versions):
            cands.append(Candidate("lightning", chain, parent if len(chain) > 1 else chain[0],
                                   run_id=chain[0].name))
    for f in wandb_files:
        cands.append(Candidate("wandb", [f], f.parent, run_id=f.stem.removeprefix("run-")))
    for run in mlflow_runs:
        cands.append(Candidate("mlflow", [run], run, run_id=run.name))
    for db in dbs:
        for run_id in mlflow.mlflow_db_runs(db):
            cands.append(Candidate("mlflow-db", [db], db, run_id=run_id))
    cands += _without_copies(others)
    return cands


def _lightning_runs(versions: list[Path]) -> list[list[Path]]:
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
    import csv
    try:
        with open(path, newline="", errors="replace") as f:
            rows = csv.reader(f)
            header = [c.strip().lower() for c in next(rows, [])]
            if "step" not in header:
                return None
            at = header.index("step")
            for _, row in zip(range(1000), rows):
                if len(row) > at and tables.to_number(row[at]) is not None:
                    return tables.to_number(row[at])
    except (OSError, csv.Error):
        return None
    return None


def _without_copies(cands: list[Candidate]) -> list[Candidate]:
    """A JSONL log and its byte-identical copy in the same folder are one run (mmengine writes
    vis_data/scalars.json and vis_data/<timestamp>.json): kept once, the copy named."""
    import hashlib
    by_size: dict[tuple, list[int]] = {}
    for i, c in enumerate(cands):
        if c.format == "jsonl":         # copies sit side by side; two runs' folders are two runs
            try:
                by_size.setdefault((c.files[0].parent, c.files[0].stat().st_size), []).append(i)
            except OSError:
                pass
    dropped: set[int] = set()
    for same in (ix for ix in by_size.values() if len(ix) > 1):     # only these can be copies
        kept: dict[str, Candidate] = {}
        # scalars.json is mmengine's name for the run's own file: the one kept
        for i in sorted(same, key=lambda i: (cands[i].files[0].name != "scalars.json", i)):
            try:
                digest = hashlib.sha1(cands[i].files[0].read_bytes()).hexdigest()
            except OSError:
                continue
            if digest in kept:
                kept[digest].notes.append(f"{cands[i].files[0].name} is an identical copy of "
                                          f"{kept[digest].files[0].name}; read once")
                dropped.add(i)
            else:
                kept[digest] = cands[i]
    return [c for i, c in enumerate(cands) if i not in dropped]


def _choose(cands: list[Candidate], path: Path, fmt: str | None, run: str | None = None) -> Candidate:
    """The run to read: the one run the path holds, or the one `run` names (store.pick); a path
    that holds several, with none named, is refused with their listing (store.SeveralRuns)."""
    pool, cands = _runs_of(cands, path, fmt)
    if run is not None:
        from postmortem.run import listing
        try:
            described = listing.describe(pool, path)
            chosen = pool[at := store.pick(described, run, path)]
        except RunReadError:
            # a log the default passes over (a text log beside structured ones) is still a run
            others = [c for c in cands if c not in pool]
            if not others:
                raise
            described = listing.describe(others, path)
            if not any(run in (r.id, r.name) or run in r.aliases for r in described):
                raise
            chosen = others[at := store.pick(described, run, path)]
        chosen.picked = described[at].id
        if len(pool) > 1:
            chosen.notes.append(f"one of {len(pool)} runs of {path} (--run {run})")
        return chosen
    if len(pool) > 1:
        from postmortem.run import listing
        raise store.SeveralRuns(path, listing.describe(pool, path))
    chosen = pool[0]
    skipped = [c for c in cands if c is not chosen]
    if skipped and not chosen.record:       # the record's notes say what else was found
        chosen.notes.append("also found " + ", ".join(c.label(path) for c in skipped)
                            + f"; read {chosen.label(path)}")
    return chosen


def runs_in(path: Path, fmt: str | None = None) -> list[Candidate]:
    """Every run a store holds, under the rule read_run applies (for `postmortem runs`)."""
    path = Path(path)
    if not path.exists():
        raise RunReadError(path, "no such file or directory")
    if not path.is_dir():
        return _file_runs(path, fmt)
    return _runs_of(find_candidates(path), path, fmt)[0]


def _runs_of(cands: list[Candidate], path: Path, fmt: str | None) -> tuple[list[Candidate], list[Candidate]]:
    """(the distinct runs, all that was considered): the format asked for, postmortem's own
    record first, structured logs over text, keyed tables over weak ones, pastes joined."""
    if fmt:
        if fmt not in FORMATS:
            raise RunReadError(path, f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
        cands = [c for c in cands if c.format == fmt]
        if not cands:
            raise RunReadError(path, f"no {fmt} log found")
    else:
        record = _recorders_log(cands, path)
        if record is not None:
            # what the run wrote for postmortem (a Recorder or an integration's callback)
            # wins over the framework's own copies of the same run (checkpoint-N/trainer_state.json,
            # lightning_logs/): those are read on request (--format)
            cands = [record] + [c for c in cands if c is not record and not c.companion]
            skipped = [c for c in cands if c is not record]
            if skipped:             # said only where there was a choice: the record alone is the run
                record.notes.append("read metrics.jsonl, the run's postmortem record (manifest.json beside it)")
                record.notes.append("also found " + ", ".join(c.label(path) for c in skipped)
                                    + " (--format reads one of them instead)")
            record.record = True
            return [record], cands
        cands = [c for c in cands if not c.companion]
    if not cands:
        raise RunReadError(path, "no training log found (looked for metrics tables, "
                                 "trainer_state.json, event files, W&B, MLflow and text logs)")
    structured = [c for c in cands if c.structured]
    pool = structured or cands
    if len(pool) > 1 and any(not c.weak for c in pool):
        pool = [c for c in pool if not c.weak]
    merged = _pastes(pool) if len(pool) > 1 else None
    if merged:
        cands = [c for c in cands if c not in pool] + merged
        pool = merged
    return pool, cands


def _recorders_log(cands: list[Candidate], path: Path) -> Candidate | None:
    """The metrics.jsonl with a manifest.json beside it at the top of `path`, if any."""
    for c in cands:
        f = c.files[0]
        if c.format == "jsonl" and f.name == "metrics.jsonl" and path.is_dir() \
                and f.parent.resolve() == path.resolve() and (path / "manifest.json").is_file():
            return c
    return None


def _pastes(pool: list[Candidate]) -> list[Candidate] | None:
    """Text logs of one family in one directory whose steps do not overlap: pastes of one run."""
    if len({c.format for c in pool}) != 1 or pool[0].format not in textlogs.SNIFF:
        return None
    files = [c.files[0] for c in pool]
    if len({f.parent for f in files}) != 1:
        return None
    ordered = textlogs.pastes_of_one_run(files)
    return [Candidate(pool[0].format, ordered, files[0].parent, structured=False)] if ordered else None


def load_manifest(path: Path, problems: list[str] | None = None) -> RunManifest | None:
    for cand in ([path / "manifest.json"] if path.is_dir() else [path.parent / "manifest.json"]):
        if cand.is_dir():
            if problems is not None:
                problems.append(f"{cand} is a directory, not a manifest; ignored")
            continue
        if cand.exists():
            try:
                return RunManifest.model_validate_json(cand.read_bytes())
            except ValidationError as err:
                first = err.errors()[0]
                where = ".".join(str(x) for x in first["loc"]) or "top level"
                raise RunReadError(cand, f"{where}: {first['msg']}") from None
            except OSError as err:
                raise RunReadError(cand, err.strerror or str(err)) from None
    return None


def read_run(path: str | Path, format: str | None = None, *, loss: str | None = None,
             step: str | None = None, run: str | None = None) -> RunLog:
    """Read whatever `path` holds (a directory, one file, an MLflow server's URI) into a RunLog.

    `run` picks one run of a store that holds several (store.pick: its id, name or folder).
    `loss` names the column that is the loss, `step` the column that is the step (tables),
    where the rules in `losscolumn` and `tables` would pick another.
    """
    from postmortem.run import mlflowserver
    if mlflowserver.is_uri(path):
        return _read_server(path, run, loss)
    path = Path(path)
    try:
        return _read_run(path, format, loss, step, run)
    except RecursionError:
        raise RunReadError(path, "nested too deeply to read (JSON or YAML nested thousands "
                                 "of levels deep?)") from None


def _read_server(uri: str, run: str | None, loss: str | None) -> RunLog:
    """A run of an MLflow tracking server: the one it holds, or the one `run` names."""
    from postmortem.run import mlflowserver
    runs = mlflowserver.server_runs(uri)
    if not runs:
        raise RunReadError(uri, "the MLflow server holds no runs")
    if run is None and len(runs) > 1:
        raise store.SeveralRuns(uri, runs)
    chosen = runs[store.pick(runs, run, uri) if run is not None else 0]
    source = Source(format="mlflow-server", path=uri, files=[])
    if run is not None:
        source.extras.update(store=uri, store_run=chosen.id)
    log = build_runlog(mlflowserver.read_server_run(uri, chosen.id, source), source, None)
    return _finish(log, [], loss)


def _db_runs(path: Path) -> list[Candidate]:
    return [Candidate("mlflow-db", [path], path, run_id=r) for r in mlflow.mlflow_db_runs(path)]


def _read_run(path: Path, format: str | None, loss: str | None, step: str | None,
              run: str | None) -> RunLog:
    if not path.exists():
        raise RunReadError(path, "no such file or directory")
    problems: list[str] = []
    if path.is_dir():
        try:
            next(path.iterdir(), None)
        except OSError as err:
            raise RunReadError(path, err.strerror or str(err)) from None
        cand = _choose(find_candidates(path, problems), path, format, run)
    elif not path.is_file():
        # a FIFO, socket or device: opening it could wait for ever
        raise RunReadError(path, "not a regular file or directory (a FIFO, socket or device?); "
                                 "save the log to a file first")
    else:
        runs = _file_runs(path, format)
        cand = _choose(runs, path, None, run) if runs[0].format == "mlflow-db" else runs[0]
        if format and cand.format != format:
            raise RunReadError(path, f"is {cand.format}, not {format}")
    if step and cand.format not in _TABLES:
        raise RunReadError(path, f"--step picks a column of a table ({', '.join(_TABLES)}); "
                                 f"this is {cand.format}")
    store_path = path
    if run is not None and cand.format != "mlflow-db":
        path = cand.root        # the run picked has a folder or file of its own: named as that
    return read_candidate(cand, path, problems, step, loss, store_path)


def _file_runs(path: Path, format: str | None) -> list[Candidate]:
    """The runs one file holds: one, or an MLflow database's; an unreadable file is refused."""
    kind = classify_file(path)
    if format and format != kind and format in textlogs.SNIFF and textlogs.looks_like_text(path):
        kind = format
    if kind == "mlflow-db":
        runs = _db_runs(path)
        if not runs:
            raise RunReadError(path, "the MLflow database holds no run with metrics")
        return runs
    if kind is None and _magic(path).startswith(b"SQLite format 3\x00"):
        raise RunReadError(path, "an SQLite file, but not a readable MLflow store "
                                 "(corrupt, truncated, or another program's database)")
    if kind is None:
        raise RunReadError(path, "unknown format: not a metrics table, trainer_state.json, "
                                 "event file, W&B or MLflow store, or a known text log")
    if kind == "lightning":
        return [Candidate(kind, [path.parent], path.parent)]
    return [Candidate(kind, [path], path)]


def read_candidate(cand: Candidate, path: Path, problems: list[str] | None = None,
                   step: str | None = None, loss: str | None = None, store_path: Path | None = None) -> RunLog:
    """One run found in a store (runs_in), read as read_run reads it, without looking again."""
    problems = list(problems or [])
    manifest = load_manifest(path, problems)
    source = Source(format=cand.format, path=str(path), files=[str(f) for f in cand.files])
    if cand.picked is not None:         # where it was picked and its id there: read again so
        source.extras.update(store=str(store_path or path), store_run=cand.picked)
    try:
        log = _read(cand, source, manifest, step)
    except OSError as err:
        raise RunReadError(getattr(err, "filename", None) or path, err.strerror or str(err)) from None
    except MemoryError:
        raise RunReadError(path, "too large to read into memory") from None
    if step:
        log.source.extras["step_from"] = f"{step} (--step)"
    return _finish(log, cand.notes + problems, loss)


def _finish(log: RunLog, notes: list[str], loss: str | None) -> RunLog:
    for note in notes:
        log.source.warn(note)
    losscolumn.choose(log, loss)
    logconfig.apply(log)
    _infer_dtype(log)
    return log


_TABLES = ("csv", "jsonl", "parquet", "lightning")


def _read(cand: Candidate, source: Source, manifest: RunManifest | None,
          step: str | None = None) -> RunLog:
    f = cand.files[0]
    match cand.format:
        case "jsonl":
            return tables.read_jsonl(f, source, manifest, step)
        case "csv":
            return tables.read_csv(f, source, manifest, step)
        case "parquet":
            return tables.read_parquet(f, source, manifest, step)
        case "lightning":
            return tables.read_lightning(cand.files, source, manifest, step)
        case "hf-trainer-state":
            series = hf.read_trainer_state(f, source)
        case "tensorboard":
            series = tensorboard.read_tensorboard(cand.files, cand.root if cand.root.is_dir()
                                                  else cand.root.parent, source)
        case "wandb":
            series = wandb.read_wandb(f, source)
        case "mlflow":
            series = mlflow.read_file_store_run(f, source)
        case "mlflow-db":
            source.extras["mlflow_run_id"] = cand.run_id
            series = mlflow.read_mlflow_db(f, cand.run_id, source)
        case _:
            series = (textlogs.read_pastes(cand.files, source, cand.format) if len(cand.files) > 1
                      else textlogs.read_text_log(f, source, cand.format))
    return build_runlog(series, source, manifest)


def _infer_dtype(log: RunLog) -> None:
    """A dynamic loss scale means fp16; say so when nothing better is known."""
    if log.dtype or "loss_scale" not in log.frame:
        return
    scale = log.frame["loss_scale"].dropna()
    if len(scale) and (scale != 1.0).any():
        log.source.extras["dtype"] = "fp16"
        log.source.extras["dtype_from"] = "a dynamic loss scale was logged"
