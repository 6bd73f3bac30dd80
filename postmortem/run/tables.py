"""Tables: canonical CSV / JSONL / Parquet and Lightning's CSVLogger `metrics.csv`.

Missing and NaN stay apart: an empty CSV cell, an absent JSON key or a Parquet
null is "not logged"; `nan`, `NaN` or a NaN double is a logged NaN.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml

from postmortem.run.aliases import canonical_name
from postmortem.run.assemble import (STRICT, Series, build_runlog, build_runlog_wide,
                                     series_from_wide, to_number)
from postmortem.run.model import RunLog, RunManifest, RunReadError, Source

STEP_NAMES = ("step", "_step", "global_step", "iteration", "iter", "trainer/global_step",
              "train/global_step")
# Arrow's JSON reader refuses bare NaN/Infinity: unlikely doubles stand in for them while it parses.
_SENTINELS = {b"NaN": -1.2345678901234567e+308, b"Infinity": 1.2345678901234567e+308,
              b"-Infinity": -1.2345678901234565e+308}
_SENTINEL_VALUES = {v: {b"NaN": np.nan, b"Infinity": np.inf, b"-Infinity": -np.inf}[k]
                    for k, v in _SENTINELS.items()}
_JSON_BARE = re.compile(rb"(?<=[:\[,])(\s*)(-?Infinity|NaN)(?=\s*[,}\]])")


def _step_column(names: list[str], path: Path) -> str:
    lowered = {n.lower(): n for n in names}
    for cand in STEP_NAMES:
        if cand in lowered:
            return lowered[cand]
    raise RunReadError(path, f"no step column (looked for {', '.join(STEP_NAMES[:4])}, ...)")


def _first_bad(path: Path, column: str, values: pa.ChunkedArray, offset_lines: int) -> str:
    strings = values.to_pylist()
    for i, v in enumerate(strings):
        if v is not None and to_number(v) is None:
            return f"line {i + offset_lines}: {column} is {v!r}, not a number"
    return f"{column} is not numeric"


def _table_to_runlog(table: pa.Table, path: Path, source: Source, manifest: RunManifest | None,
                     header_lines: int, sentinel: bool = False) -> RunLog:
    step_name = _step_column(table.column_names, path)
    step = table.column(step_name)
    if not pa.types.is_integer(step.type) and not pa.types.is_floating(step.type):
        raise RunReadError(path, _first_bad(path, step_name, step.cast(pa.string()), header_lines))
    if step.null_count:
        raise RunReadError(path, f"{step.null_count} row(s) have no {step_name}")
    columns, nan_masks = {}, {}
    for name in table.column_names:
        if name == step_name:
            continue
        col = table.column(name)
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            if name == "batch_hash" or canonical_name(name) == "batch_hash":
                columns[name] = np.array(col.to_pylist(), dtype=object)
                continue
            # Mixed cells such as "nan%" or "1,234": coerce one by one, or refuse.
            parsed = [None if v is None else to_number(v) for v in col.to_pylist()]
            if any(p is None and v is not None for p, v in zip(parsed, col.to_pylist())):
                if canonical_name(name) in STRICT:
                    raise RunReadError(path, _first_bad(path, name, col, header_lines))
                source.warn(f"{name}: not numeric; kept out of the table")
                continue
            col = pa.chunked_array([pa.array(parsed, type=pa.float64())])
        elif pa.types.is_boolean(col.type) or pa.types.is_integer(col.type) or pa.types.is_null(col.type):
            col = col.cast(pa.float64())
        elif not pa.types.is_floating(col.type):
            source.warn(f"{name}: {col.type} values; kept out of the table")
            continue
        values = col.to_numpy()
        if values.dtype != np.float64:
            values = values.astype(np.float64)
        if col.null_count:
            # to_numpy gives NaN for nulls; flag the cells that were NaN in the file.
            nan_masks[name] = pc.fill_null(pc.is_nan(col), False).to_numpy(zero_copy_only=False)
        elif np.isnan(values).any():
            nan_masks[name] = np.isnan(values)
        if sentinel:
            for stand_in, real in _SENTINEL_VALUES.items():
                hit = values == stand_in
                if hit.any():
                    values = values.copy()
                    values[hit] = real
                    if np.isnan(real):
                        nan_masks[name] = nan_masks.get(name, np.zeros(len(values), bool)) | hit
        columns[name] = values
    steps = step.to_numpy()
    return build_runlog_wide(steps, columns, source, manifest, nan_masks)


def read_csv(path: Path, source: Source, manifest: RunManifest | None = None) -> RunLog:
    from pyarrow import csv
    try:
        table = csv.read_csv(
            path,
            convert_options=csv.ConvertOptions(null_values=[""], strings_can_be_null=True,
                                               quoted_strings_can_be_null=True),
        )
    except (pa.ArrowInvalid, pa.ArrowException) as err:
        raise RunReadError(path, f"not a readable CSV: {str(err).splitlines()[0]}") from None
    return _table_to_runlog(table, path, source, manifest, header_lines=2)


def read_parquet(path: Path, source: Source, manifest: RunManifest | None = None) -> RunLog:
    import pyarrow.parquet as pq
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as err:
        raise RunReadError(path, f"not a readable Parquet file: {str(err).splitlines()[0]}") from None
    return _table_to_runlog(table, path, source, manifest, header_lines=0)


def read_jsonl(path: Path, source: Source, manifest: RunManifest | None = None) -> RunLog:
    """One JSON object per line; bare NaN/Infinity accepted; a torn last line is dropped."""
    from pyarrow import json as pajson
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        cut = raw.rfind(b"\n") + 1
        source.warn(f"{path.name}: last line is incomplete (file still being written?); dropped it")
        raw = raw[:cut]
    sentinel = b"NaN" in raw or b"Infinity" in raw
    if sentinel:
        raw = _JSON_BARE.sub(lambda m: m.group(1) + repr(_SENTINELS[m.group(2)]).encode(), raw)
    try:
        table = pajson.read_json(pa.BufferReader(raw))
    except (pa.ArrowInvalid, pa.ArrowException) as err:
        raise RunReadError(path, f"not valid JSON lines: {str(err).splitlines()[0]}") from None
    return _table_to_runlog(table, path, source, manifest, header_lines=1, sentinel=sentinel)


# --- Lightning CSVLogger --------------------------------------------------------

def is_lightning_dir(path: Path) -> bool:
    return re.fullmatch(r"version_\d+", path.name) is not None and (path / "metrics.csv").exists()


def read_lightning(version_dirs: list[Path], source: Source, manifest: RunManifest | None) -> RunLog:
    """version_N directories of one run, joined in order; each later one is a resume segment."""
    version_dirs = sorted(version_dirs, key=lambda d: int(d.name.split("_")[1]))
    series_all: list[Series] = []
    resumes: list[int] = []
    base = 0
    prev_first = None
    for vdir in version_dirs:
        sub = Source(source.format, str(vdir))
        log = read_csv(vdir / "metrics.csv", sub)
        source.warnings += [f"{vdir.name}: {w}" for w in sub.warnings]
        first = int(log.frame["step"].iloc[0])
        if prev_first is not None and first <= prev_first:
            raise RunReadError(source.path, f"{vdir.name} starts again at step {first}: a different "
                                            f"run, not a resume; pass one version_N directory")
        prev_first = first
        hp = vdir / "hparams.yaml"
        if hp.exists():
            try:
                source.extras.setdefault("hparams", {})[vdir.name] = yaml.load(
                    hp.read_text(errors="replace"), Loader=_PermissiveLoader)
            except yaml.YAMLError:
                source.warn(f"{vdir.name}/hparams.yaml: not valid YAML; ignored")
        frame = log.frame
        steps = frame["step"].to_numpy()
        cols = {c: frame[c].to_numpy() for c in log.metrics}
        flagged = {c: log.nan_mask(c) for c in log.logged_nan}
        if series_all:
            resumes.append(base)
        for s in series_from_wide(steps, cols, flagged):
            s.order = s.order + base
            series_all.append(s)
        base += len(steps)
    if len(version_dirs) > 1:
        source.warn(f"joined {len(version_dirs)} version directories in order: "
                    f"{', '.join(d.name for d in version_dirs)} (each later one a resume)")
    return build_runlog(series_all, source, manifest, resumes=resumes)


class _PermissiveLoader(yaml.SafeLoader):
    """hparams.yaml may hold !!python/object tags: read them as plain data."""


def _any_tag(loader, suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_PermissiveLoader.add_multi_constructor("", _any_tag)
