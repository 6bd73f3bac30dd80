"""Loading the user's replay entry point and the last checkpoint before the incident."""

from __future__ import annotations

import importlib
import inspect
import pickle
import re
import sys
from pathlib import Path

from postmortem.errors import ReplayError

_STEP = re.compile(r"(\d+)")


def entry_point(manifest, run_dir: Path):
    """Import `pkg.module:function` named by the manifest: the user's own code, imported
    only when a replay is asked for."""
    spec = manifest.replay if manifest else None
    if spec is None:
        raise ReplayError(f"{run_dir}: no replay entry point: manifest.json needs "
                          '"replay": {"entrypoint": "pkg.module:make_replay"} '
                          "(postmortem.record.Recorder writes the manifest)")
    module_name, _, func = spec.entrypoint.partition(":")
    if str(run_dir) not in sys.path:
        sys.path.append(str(run_dir))           # a make_replay kept beside the run
    try:
        fn = getattr(importlib.import_module(module_name), func)
    except (ImportError, AttributeError) as err:
        raise ReplayError(f"{run_dir}: cannot import the replay entry point {spec.entrypoint}: {err}") from None
    return fn


def make(fn, manifest, run_dir: Path, device):
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in (("run_dir", run_dir), ("device", device)) if k in params}
    return fn(manifest, **kwargs)


def checkpoints(manifest, run_dir: Path) -> dict[int, Path]:
    folder = run_dir / (manifest.replay.checkpoints if manifest and manifest.replay else "checkpoints/")
    out = {}
    for f in sorted(folder.glob("*.pt")) + sorted(folder.glob("*.pth")):
        nums = _STEP.findall(f.stem)
        if nums:
            out[int(nums[-1])] = f
    return out


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
