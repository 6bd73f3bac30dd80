"""A run's identity: its id comes from what names the run, never from a generic file or folder
name (`train`, `mlruns`, `lightning_logs`, `version_0`, ...), and is safe as a file name."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from postmortem.files import safe_name

# Names frameworks give every run's files and folders: they tell two runs nothing apart.
GENERIC = re.compile(
    r"^(?:train(?:ing)?\d*|log|logs|logging|output|outputs|out|stdout|stderr|console|main|run\d*|runs|"
    r"mlruns|wandb|files|lightning_logs|tb_logs|tensorboard|events|metrics|results|result|"
    r"checkpoints?|ckpt|trainer_state|history|training_log|log_history|exp\d*|experiment|experiments|"
    r"default|latest|tmp|temp|data|eval|test|version_\d+|checkpoint-\d+|\d+|run-\d+|"
    r"events\.out\.tfevents\..*|mlflow|mlflow\.db|nohup|slurm-\d+|job|job-\d+)$", re.IGNORECASE)
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
MAX_LEN = 80


def safe_id(text: str) -> str:
    """`text` as a file name on any system: ASCII letters, digits and `._+-` only, no leading dot,
    at most 80 characters (a long one keeps a short hash of the whole so two stay apart)."""
    text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode()
    out = _UNSAFE.sub("-", text).strip("-.")
    out = re.sub(r"-{2,}", "-", out)
    if not out:
        out = "run-" + hashlib.sha1(str(text).encode()).hexdigest()[:8] if text else "run"
    if len(out) > MAX_LEN:
        digest = hashlib.sha1(out.encode()).hexdigest()[:8]
        out = out[:MAX_LEN - 9].rstrip("-.") + "-" + digest
    if out.upper().split(".")[0] in {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)),
                                     *(f"LPT{i}" for i in range(10))}:
        out = "run-" + out                      # Windows' reserved device names
    # the knowledge base's one rule for names has the last word (a leading `_`, a `..`), so an id
    # made here is never mapped a second time when it reaches a post-mortem
    return safe_name(out)


def is_generic(name: str) -> bool:
    return not name or bool(GENERIC.match(name))


def name_from_path(path: str | Path) -> str:
    """The first specific name of a log file or run folder, walking up past generic ones:
    `exp7/logs/train.log` -> exp7; `gpt3-moe.log` -> gpt3-moe."""
    p = Path(path)
    names = []
    if p.suffix and not p.is_dir():
        names.append(p.name[: -len(p.suffix)] if not p.name.startswith("events.out") else p.name)
        p = p.parent
    names += [part for part in reversed(p.resolve().parts if p.exists() else p.parts) if part != "/"]
    for name in names:
        if not is_generic(name):
            return name
    return names[0] if names else "run"


def run_id(manifest_run_id: str | None, extras: Mapping[str, Any], path: str) -> str:
    """What names the run, in order: manifest.json's run_id, the MLflow run name or id, the W&B
    run id, a run name in its config (`extras`: the reader's Source.extras), then the log's file
    or folder (`path`). RunLog.run_id asks it."""
    if manifest_run_id:
        return safe_id(manifest_run_id)
    for key in ("mlflow_run_name", "wandb_run_id", "mlflow_run_id"):
        if extras.get(key):
            return safe_id(extras[key])
    name = extras.get("run_name")
    if isinstance(name, str) and name.strip():
        leaf = Path(name.strip().rstrip("/")).name        # HF's run_name defaults to output_dir
        if not is_generic(leaf):
            return safe_id(leaf)
    return safe_id(name_from_path(path))
