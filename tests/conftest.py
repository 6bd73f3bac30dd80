import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REAL_RUNS = ROOT.parent / "shared" / "real_runs"
TESTS = Path(__file__).parent
# The tests are in a folder per layer (run/, diagnose/, tui/, ...), with no __init__.py: the
# shared helpers here (pilots, writers, cli_run, worked_example) and the helpers a test file
# lends another (`from test_cli import pm`, across folders too) import by their bare names,
# whatever file or folder pytest is asked to run.
sys.path[:0] = [str(TESTS), *sorted(str(d) for d in TESTS.iterdir()
                                    if d.is_dir() and any(d.glob("test_*.py")))]


def slow_whole(path: Path) -> bool:
    """Whether a test file is slow whole: `pytestmark = pytest.mark.slow` (alone or in a list)
    at its top level, read from the source so that the quick tier need not import it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in node.targets):
            marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            return any(ast.unparse(m) == "pytest.mark.slow" for m in marks)
    return False


def pytest_ignore_collect(collection_path, config):
    """The quick tier (-m "not slow") does not even import a file that is slow whole (its
    imports, torch's among them, are seconds of every worker's collection)."""
    if ((config.option.markexpr or "").split() == ["not", "slow"] and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_") and slow_whole(collection_path)):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    """A test that uses the `made_here` fixture trains the sample runs: slow wherever it is.
    Every other slow test says so where it is written (@pytest.mark.slow, or the file's
    `pytestmark = pytest.mark.slow`)."""
    for item in items:
        if "made_here" in item.fixturenames:
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session):
    """One collection, then the session's objects set aside (gc.freeze): pytest's clean-up
    collects five times more, and a worker whose heap is big (the TUI's apps, the runs read)
    took over 5 s at it on a loaded machine; pytest-xdist's execnet then sends the worker a
    SIGINT, and a green run ended in two KeyboardInterrupt tracebacks (raised in hypothesis'
    gc callback, where the worker happened to be)."""
    import gc
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory):
    """The views the dashboard keeps (tui/viewcache.py) go to a folder of this session, never
    to the home of whoever runs the tests."""
    import os
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(autouse=True)
def _own_settings(tmp_path_factory, monkeypatch):
    """No test reads or writes the knowledge base and learner of whoever runs the tests
    (kb/settings.py): its own config and state folders, and no POSTMORTEM_KB/_LEARNER."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    monkeypatch.delenv("POSTMORTEM_KB", raising=False)
    monkeypatch.delenv("POSTMORTEM_LEARNER", raising=False)


@pytest.fixture(scope="session")
def real_runs() -> Path:
    if not REAL_RUNS.is_dir():
        pytest.skip(f"{REAL_RUNS} is not beside the checkout")
    return REAL_RUNS


@pytest.fixture(scope="session")
def made_here(tmp_path_factory):
    """Sample runs recorded on this machine, made once a session: a replay is checked bit for
    bit on these, since the committed ones may come from another torch build or CPU."""
    made: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in made:
            from postmortem.cli import main
            out = tmp_path_factory.mktemp("made-here")
            assert main(["sample", "make", name, "--out", str(out), "--jobs", "1"]) == 0
            made[name] = out / name
        return made[name]
    return make


def recorded_here(run: Path) -> bool:
    """Whether the run was recorded on CPU by this torch build with this CPU's kernels."""
    import json

    from postmortem.run.record import this_machine
    versions = json.loads((run / "manifest.json").read_text())["versions"]
    here = this_machine()
    return versions.get("device", "cpu") == "cpu" and \
        all(versions.get(k) == here[k] for k in ("torch", "cpu_capability"))


@pytest.fixture(scope="module")
def one_thread():
    """torch on one thread for a module: the second trainer's small models train 10x faster
    on one thread than on two on a busy machine (torch imported only where it is asked for)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
