"""Loading the user's replay entry point and calling the run's own code (its factory, a
trainer factory), each failure of that code in one line. The checkpoints are
replay/checkpoints.py."""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

from postmortem.errors import ReplayError
from postmortem.replay.protocol import Replayable


def entry_point(manifest, run_dir: Path):
    """Import `pkg.module:function` named by the manifest: the user's own code, imported
    only when a replay is asked for."""
    spec = manifest.replay if manifest else None
    if spec is None:
        raise ReplayError(f"{run_dir}: no replay entry point: manifest.json needs "
                          '"replay": {"entrypoint": "pkg.module:make_replay"} '
                          "(postmortem.run.record.Recorder writes the manifest)")
    if str(run_dir) not in sys.path:
        sys.path.append(str(run_dir))           # a make_replay kept beside the run
    return import_user(spec.entrypoint, run_dir, "replay entry point")


def make(fn, manifest, run_dir: Path, device):
    """Call the run's factory; what it returns must be a Replayable (postmortem.replay)."""
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in (("run_dir", run_dir), ("device", device)) if k in params}
    name = f"{fn.__module__}:{fn.__qualname__}"
    made = call_user(fn, name, run_dir, "replay factory", manifest, **kwargs)
    if not isinstance(made, Replayable):
        raise ReplayError(f"{run_dir}: the replay factory {name} returned {type(made).__name__}, "
                          "not a postmortem.replay.Replayable")
    return made


# -- the run's own code: imported and called with its failures in one line ---------------------

def import_user(name: str, run_dir, what: str, where: str = "", folders=()):
    """`module:function` from the run's own code (`what` names it in errors: "replay entry
    point", "trainer factory"); a module that is missing or fails on import is one line.
    `folders`: where the run's code was (the training script's folder first), put first on
    sys.path as `python train.py` had it; a module of the same name imported from elsewhere
    (another run's train.py, in this process) is put aside, not reused."""
    module_name, _, func = name.partition(":")
    if folders:
        _first_on_path(module_name, [Path(f).resolve() for f in folders if f])
    try:
        return getattr(importlib.import_module(module_name), func)
    except (ImportError, AttributeError) as err:
        raise ReplayError(f"{run_dir}: cannot import the {what} {name}{where}: {err}") from None
    except (Exception, SystemExit) as err:      # the module itself failed: a NameError, a sys.exit
        raise ReplayError(f"{run_dir}: importing the {what} {name}{where} failed: {_one_line(err)}") from None


def _first_on_path(module: str, folders: list[Path]) -> None:
    for folder in reversed(folders):
        if str(folder) in sys.path:
            sys.path.remove(str(folder))
        sys.path.insert(0, str(folder))
    top = module.split(".")[0]
    held = getattr(sys.modules.get(top), "__file__", None)
    if held and not any(Path(held).resolve().is_relative_to(f) for f in folders):
        for key in [k for k in sys.modules if k == top or k.startswith(top + ".")]:
            del sys.modules[key]


def call_user(fn, name: str, run_dir, what: str, /, *args, **kwargs):
    """`fn(*args, **kwargs)`, the run's own code: what it raises, or a sys.exit in it, is one
    line naming it (a Ctrl-C stays a Ctrl-C)."""
    try:
        return fn(*args, **kwargs)
    except ReplayError:
        raise
    except (Exception, SystemExit) as err:
        raise ReplayError(f"{run_dir}: the {what} {name} failed: {_one_line(err)}") from None


def _one_line(err: BaseException) -> str:
    if isinstance(err, SystemExit):
        return f"it called sys.exit({err.code!r})"
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:200]}" if text else type(err).__name__
