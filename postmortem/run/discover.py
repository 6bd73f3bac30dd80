"""Find what a path holds, pick the reader by content, and read it into a RunLog."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import ValidationError

from postmortem.errors import RunReadError
from postmortem.run import listing, logconfig, losscolumn, mlflowserver, readers, store
from postmortem.run.assemble import build_runlog
from postmortem.run.candidate import Candidate
from postmortem.run.model import RunLog, RunManifest, Source
from postmortem.run.recognise import SQLITE_MAGIC, magic

_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "checkpoints", "artifacts", "media"}
_SKIP_SUFFIXES = {".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".npy", ".npz", ".png", ".jpg",
                  ".gif", ".svg", ".pkl", ".py", ".yaml", ".yml", ".toml", ".html", ".tar", ".gz",
                  ".zip"}


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
    """Group the files under `root` into the runs they belong to: the stores' runs first (in
    the order the registry lists them), then each other log file, in the order of the walk."""
    found = readers.claimed_folders(root)
    claimed = frozenset(d for dirs in found.values() for d in dirs)
    singles: list[Candidate] = []
    for f in _walk(root, problems, skip=claimed):
        if any(p in claimed for p in f.parents):      # the run folder passed itself
            continue
        fmt = readers.format_of(f)
        if fmt is None:
            continue
        reader = readers.reader_of(fmt)
        if reader.group is None:
            singles += reader.file_runs(f, fmt)
        else:
            found.setdefault(fmt, []).append(f)
    cands = [c for reader in readers.grouped() if reader.group is not None for c in reader.group(found, root)]
    return cands + _without_copies(singles)


def _without_copies(cands: list[Candidate]) -> list[Candidate]:
    """A JSONL log and its byte-identical copy in the same folder are one run (mmengine writes
    vis_data/scalars.json and vis_data/<timestamp>.json): kept once, the copy named."""
    by_size: dict[tuple, list[int]] = {}
    for i, c in enumerate(cands):
        if readers.reader_of(c.format).copies_beside:   # side by side; two runs' folders are two runs
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
        try:
            described = listing.describe(pool, path, steps=False)        # picking needs no steps
            chosen = pool[at := store.pick(described, run, path)]
        except RunReadError:
            # a log the default passes over (a text log beside structured ones) is still a run
            others = [c for c in cands if c not in pool]
            if not others:
                raise
            described = listing.describe(others, path, steps=False)
            if not any(run in (r.id, r.name) or run in r.aliases for r in described):
                raise
            chosen = others[at := store.pick(described, run, path)]
        chosen.picked = described[at].id
        if len(pool) > 1:
            chosen.notes.append(f"one of {len(pool)} runs of {path} (--run {run})")
        return chosen
    if len(pool) > 1:
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
        if fmt not in readers.formats():
            raise RunReadError(path, f"unknown format {fmt!r}; known: {', '.join(readers.formats())}")
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
    structured = [c for c in cands if readers.reader_of(c.format).structured]
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
        if readers.reader_of(c.format).record_name == f.name and path.is_dir() \
                and f.parent.resolve() == path.resolve() and (path / "manifest.json").is_file():
            return c
    return None


def _pastes(pool: list[Candidate]) -> list[Candidate] | None:
    """Logs of one format that its reader joins into one run (a text log's pastes)."""
    if len({c.format for c in pool}) != 1:
        return None
    join = readers.reader_of(pool[0].format).join
    return join(pool) if join is not None else None


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
    if mlflowserver.is_uri(path):
        return _read_server(str(path), run, loss)
    path = Path(path)
    try:
        return _read_run(path, format, loss, step, run)
    except RecursionError:
        raise RunReadError(path, "nested too deeply to read (JSON or YAML nested thousands "
                                 "of levels deep?)") from None


def _read_server(uri: str, run: str | None, loss: str | None) -> RunLog:
    """A run of an MLflow tracking server: the one it holds, or the one `run` names."""
    runs = mlflowserver.server_runs(uri, count_steps=run is None)     # counted for a listing only
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
        # a file that holds a store's runs (a database): the one the path holds, or `run`
        cand = _choose(runs, path, None, run) if readers.reader_of(runs[0].format).shares_file else runs[0]
        if format and cand.format != format:
            raise RunReadError(path, f"is {cand.format}, not {format}")
    reader = readers.reader_of(cand.format)
    if step and not reader.table:
        raise RunReadError(path, f"--step picks a column of a table ({', '.join(readers.table_formats())}); "
                                 f"this is {cand.format}")
    store_path = path
    if run is not None and not reader.shares_file:
        path = cand.root        # the run picked has a folder or file of its own: named as that
    return read_candidate(cand, path, problems, step, loss, store_path)


def _file_runs(path: Path, format: str | None) -> list[Candidate]:
    """The runs one file holds: one, or an MLflow database's; an unreadable file is refused."""
    kind = readers.format_of(path)
    if format and format != kind and format in readers.formats():
        forced = readers.reader_of(format).forced      # a text log read as the dialect named
        if forced is not None and forced(path):
            kind = format
    if kind is None and magic(path).startswith(SQLITE_MAGIC):
        raise RunReadError(path, "an SQLite file, but not a readable MLflow store "
                                 "(corrupt, truncated, or another program's database)")
    if kind is None:
        raise RunReadError(path, "unknown format: not a metrics table, trainer_state.json, "
                                 "event file, W&B or MLflow store, or a known text log")
    return readers.reader_of(kind).file_runs(path, kind)


def read_candidate(cand: Candidate, path: Path, problems: list[str] | None = None,
                   step: str | None = None, loss: str | None = None, store_path: Path | None = None) -> RunLog:
    """One run found in a store (runs_in), read as read_run reads it, without looking again."""
    problems = list(problems or [])
    manifest = load_manifest(path, problems)
    source = Source(format=cand.format, path=str(path), files=[str(f) for f in cand.files])
    if cand.picked is not None:         # where it was picked and its id there: read again so
        source.extras.update(store=str(store_path or path), store_run=cand.picked)
    try:
        log = readers.reader_of(cand.format).read(cand, source, manifest, step)
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


def _infer_dtype(log: RunLog) -> None:
    """A dynamic loss scale means fp16; say so when nothing better is known."""
    if log.dtype or "loss_scale" not in log.frame:
        return
    scale = log.frame["loss_scale"].dropna()
    if len(scale) and (scale != 1.0).any():
        log.source.extras["dtype"] = "fp16"
        log.source.extras["dtype_from"] = "a dynamic loss scale was logged"
