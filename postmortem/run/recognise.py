"""How a file is recognised: its first bytes (a Probe) and the tests the registry's readers
put to them (run/readers.py asks them in order; the first that answers names the format)."""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from postmortem.run import encodings, hf, mlflow, tables, tensorboard, textlogs, wandb
from postmortem.run.assemble import to_number


class Verdict(enum.Enum):
    """A reader's answer that ends the search: the file is no log of any format."""

    NOT_A_LOG = "not a log"


NOT_A_LOG = Verdict.NOT_A_LOG
SQLITE_MAGIC = b"SQLite format 3\x00"
# A run's side files, never its log (the mini-GPT lab's minigpt.json is its config)
SIDE_JSON = {"all_results.json", "train_results.json", "eval_results.json", "config.json",
             "manifest.json", "wandb-summary.json", "wandb-metadata.json", "minigpt.json"}
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_JSON_KEY = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:')
_KEY_NAMES = {*tables.STEP_NAMES, *tables.EPOCH_NAMES}


def magic(path: Path, n: int = 16) -> bytes:
    """The first `n` bytes of the file (none when it cannot be opened)."""
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


@dataclass
class Probe:
    """A file's first 4 KiB, read once and shown to each reader in turn."""

    path: Path
    raw: bytes       # as stored
    head: bytes      # as UTF-8, without a byte-order mark (a UTF-16 file is classed by its text)

    @classmethod
    def of(cls, path: Path) -> Probe:
        raw = magic(path, 4096)
        return cls(path, raw, encodings.utf8_head(raw))

    @cached_property
    def text(self) -> bytes:
        return self.head.lstrip()

    @cached_property
    def header_cells(self) -> list[str] | None:
        """The first line's comma-separated cells, lowered; None where it has no comma."""
        first_line = self.head.split(b"\n", 1)[0].decode("utf-8", "replace").strip().lower()
        if "," not in first_line:
            return None
        return [c.strip().strip('"') for c in first_line.split(",")]


def is_wandb(p: Probe) -> str | None:
    return "wandb" if p.head.startswith(wandb.MAGIC) else None


def is_mlflow_db(p: Probe) -> str | Verdict | None:
    """An SQLite file is MLflow's database or no log at all."""
    if not p.head.startswith(SQLITE_MAGIC):
        return None
    return "mlflow-db" if mlflow.is_mlflow_db(p.path) else NOT_A_LOG


def is_parquet(p: Probe) -> str | None:
    return "parquet" if p.head.startswith(b"PAR1") else None


def is_tensorboard(p: Probe) -> str | None:
    return "tensorboard" if tensorboard.is_event_file(p.path) else None


def is_side_file(p: Probe) -> Verdict | None:
    return NOT_A_LOG if p.path.name in SIDE_JSON else None


def is_trainer_state(p: Probe) -> str | None:
    if not p.text.startswith(b"{"):
        return None
    if hf.is_trainer_state(p.path) or (encodings.is_wide(p.raw) and p.path.suffix == ".json"
                                       and b'"log_history"' in bytes(encodings.utf8_bytes(p.path)[0])):
        return "hf-trainer-state"
    return None


def is_jsonl(p: Probe) -> str | None:
    """JSON records whose first one has a step (or epoch) key, or a lone record cut short;
    or one JSON list of such records (Chainer's LogReport `log`, `json.dump(self._log, f,
    indent=4)`)."""
    if _JSON_LIST.match(p.text):
        return "jsonl" if _json_keys(_first_record(p.text)) & _KEY_NAMES else None
    if not p.text.startswith(b"{"):
        return None
    line = _first_line(p.path, p.text)
    # fairseq v0.9's bare `json.dumps(stats)` names `epoch` but counts updates: a text dialect
    if (_json_keys(line) & _KEY_NAMES or _cut_json_record(p.path, line)) and not textlogs.is_fairseq_v09_json(line):
        return "jsonl"
    return None


def is_lightning(p: Probe) -> str | None:
    """A table named metrics.csv in a version_N folder: Lightning's CSVLogger."""
    if is_csv(p) and p.path.name == "metrics.csv" and tables.is_lightning_dir(p.path.parent):
        return "lightning"
    return None


def is_csv(p: Probe) -> str | None:
    """A header with a step (or epoch) cell, or a .csv file whose first row names columns."""
    cells = p.header_cells
    if cells is None:
        return None
    if any(c in _KEY_NAMES for c in cells) or p.path.suffix.lower() == ".csv" and _names_not_numbers(cells):
        return "csv"
    return None


def is_text_log(p: Probe) -> str | None:
    """A text log: its family (dialect) by evidence over the whole file."""
    if not textlogs.looks_like_text(p.path):
        return None
    dialect, _ = textlogs.sniff(p.path)
    return dialect


def keyed_csv(path: Path) -> bool:
    """A table whose header names a step (or epoch) column."""
    cells = magic(path, 4096).split(b"\n", 1)[0].decode("utf-8", "replace").lower().split(",")
    return any(c.strip().strip('"') in _KEY_NAMES for c in cells)


def _names_not_numbers(cells: list[str]) -> bool:
    """A header row: a table without a step column still names its columns."""
    return len(cells) >= 2 and all(c and to_number(c) is None for c in cells)


def _first_line(path: Path, head: bytes, limit: int = 4 << 20) -> bytes:
    """The first line whole, even when it is longer than the head (a wide JSONL record)."""
    if b"\n" in head or len(head) < 4096:
        return head.split(b"\n", 1)[0]
    with open(path, "rb") as f:
        line = f.readline(limit)
    return line.removeprefix(b"\xef\xbb\xbf")


_JSON_LIST = re.compile(rb"\[\s*\{")       # not `[rank0]: {...}`: a log line's prefix


def _first_record(head: bytes) -> bytes:
    """The first flat record of a JSON list, as far as the head holds it (b"" if not whole)."""
    start = head.find(b"{")
    end = head.find(b"}", start)
    return head[start:end + 1] if 0 <= start < end and b"{" not in head[start + 1:end] else b""


def _json_keys(line: bytes) -> set[str]:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return set()
    return set(obj) if isinstance(obj, dict) else set()


def _cut_json_record(path: Path, line: bytes) -> bool:
    """The file's only line is a JSON object cut short (a JSONL file caught mid-write): it
    is JSONL by its name or by the step key it shows, and its reader says it is cut."""
    if not line.lstrip().startswith(b'{"') or _json_keys(line) or not _only_line_unended(path):
        return False
    if path.suffix.lower() in _JSONL_SUFFIXES:
        return True
    keys = {k.decode("utf-8", "replace") for k in _JSON_KEY.findall(line)}
    return bool(keys & _KEY_NAMES)


def _only_line_unended(path: Path, limit: int = 4 << 20) -> bool:
    """Whether the file is one line with no newline at its end."""
    with open(path, "rb") as f:
        return not f.readline(limit).endswith(b"\n") and not f.read(1)

