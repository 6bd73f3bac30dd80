"""The run's checkpoints: which steps were saved, the last one before an incident, and
loading one safely. No torch at import (the app lists checkpoints without it)."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

from postmortem.errors import ReplayError

_STEP = re.compile(r"(\d+)")
_VERSION = re.compile(r"-v(\d+)$")


def checkpoints(manifest, run_dir: Path) -> dict[int, Path]:
    folder = run_dir / (manifest.replay.checkpoints if manifest and manifest.replay else "checkpoints/")
    out = {}
    # files (step_000250.pt) or folders a framework saves (checkpoint-250/, a Replayable.load reads them)
    found = sorted(folder.glob("*.pt")) + sorted(folder.glob("*.pth")) + sorted(folder.glob("*.ckpt")) \
        + sorted(p for p in folder.glob("*") if p.is_dir())
    # Lightning's ModelCheckpoint names a second save of the same step epoch=4-step=250-v1.ckpt:
    # the step is still 250, and the later save (a resumed run's) wins
    for f in sorted(found, key=lambda f: _version(_name(f))):      # a later version overwrites
        nums = _STEP.findall(_VERSION.sub("", _name(f)))
        if nums:
            out[int(nums[-1])] = f
    return out


def _name(f: Path) -> str:
    return f.stem if f.is_file() else f.name


def _version(name: str) -> int:
    m = _VERSION.search(name)
    return int(m.group(1)) if m else 0


def before(ckpts: dict[int, Path], step: int, run_dir: Path) -> int:
    """The last checkpoint at or before `step`."""
    usable = [s for s in ckpts if s <= step]
    if not usable:
        have = ", ".join(map(str, sorted(ckpts))) or "none"
        raise ReplayError(f"{run_dir}: no checkpoint at or before step {step} (have: {have})")
    return max(usable)


def load_state(path: Path):
    """torch.load with weights_only=True: a checkpoint that needs arbitrary unpickling is
    refused, never loaded silently."""
    import torch
    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as err:
        first = str(err).splitlines()[0][:160]
        raise ReplayError(f"{path}: refused: the checkpoint needs unsafe unpickling ({first}); "
                          "save tensors, dicts and numbers only") from None
    except (OSError, RuntimeError, EOFError) as err:
        raise ReplayError(f"{path}: cannot load the checkpoint: {str(err).splitlines()[0][:160]}") from None
