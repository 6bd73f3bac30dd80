"""The direction of imports (docs/architecture.md), held by a test that fails: read from the
source (every import statement, wherever it stands) and seen at run time (each core module
imported alone in a fresh interpreter, as harlequin's import hygiene test does)."""

import ast
import functools
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "postmortem"


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A file's syntax tree, read once for all the scans of the session."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _top_level(tree: ast.Module) -> set[int]:
    """The ids of the statements that run at import: the module's own, and those under an
    `if` or `try` at its top (`if TYPE_CHECKING:` among them: the scan of layers reads it)."""
    top = {id(n) for n in tree.body}
    for node in tree.body:
        if isinstance(node, (ast.If, ast.Try)):
            top |= {id(n) for n in ast.walk(node)}
    return top


def _base(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` reads, a relative one resolved against the file's package."""
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
    return base


def _package(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts[:-1])


def imports(path: Path, root: Path = ROOT) -> list[tuple[str, int, bool]]:
    """(module imported, line, at module level) for every import of the file; a relative
    import is resolved against the file's package."""
    tree = _tree(path)
    package = _package(path, root)
    top = _top_level(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(node, package)
            # `from postmortem import x` may name a module x
            out += [(f"{base}.{a.name}" if base == "postmortem" else base, node.lineno, id(node) in top)
                    for a in node.names]
    return out


def layer(module: str) -> str:
    """`postmortem.run.tables` -> `run`; a top-level module is its own layer."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def ours(name: str) -> bool:
    return name == "postmortem" or name.startswith("postmortem.")


ALL = modules()
# who may import what of ours, by layer: DESIGN's direction of imports
RULES = {
    "run": lambda m: layer(m) in ("run", "files", "errors"),
    "document": lambda m: layer(m) != "replay",
    "kb": lambda m: layer(m) != "run" and m not in ("postmortem.diagnose.analyze",),
    "diagnose": lambda m: layer(m) not in ("document", "replay", "kb", "tui", "cli"),
}
TORCH_MAY = ("replay", "minigpt", "integrations")   # integrations: each imports its framework


def violations() -> list[str]:
    found = []
    for name, path in ALL.items():
        here = layer(name)
        for imported, line, top in imports(path):
            where = f"{path.relative_to(ROOT)}:{line} imports {imported}"
            root = imported.split(".")[0]
            if root == "textual" and here != "tui":
                found.append(f"{where}: textual outside tui/")
            if root == "torch" and top and here not in TORCH_MAY:
                found.append(f"{where}: torch at import time outside replay/ and minigpt/")
            if ours(imported) and here in RULES and not RULES[here](imported):
                found.append(f"{where}: {here}/ may not import {layer(imported)}/")
            if ours(imported) and layer(imported) in ("tui", "cli") and here not in ("tui", "cli", "__main__"):
                found.append(f"{where}: a front end imported by the core")
    return found


def test_the_direction_of_imports_holds():
    assert violations() == []


def test_the_scan_sees_what_it_forbids(tmp_path):
    """The scan reads every import form, nested ones too (a scan that sees nothing passes)."""
    src = tmp_path / "postmortem" / "run" / "bad.py"
    src.parent.mkdir(parents=True)
    src.write_text("import torch\nfrom textual.app import App\n"
                   "def f():\n    from postmortem.replay import engine\n    from ..kb import lessons\n")
    got = sorted((m, top) for m, _, top in imports(src, tmp_path))
    assert got == [("postmortem.kb", False), ("postmortem.replay", False), ("textual.app", True), ("torch", True)]
    assert not RULES["run"]("postmortem.replay") and not RULES["run"]("postmortem.kb")
    assert RULES["run"]("postmortem.errors") and RULES["run"]("postmortem.files")
    assert not RULES["document"]("postmortem.replay.engine") and not RULES["kb"]("postmortem.run.model")


# Every module outside the front ends, torch's two homes and the child-process entry points,
# imported alone: neither textual nor torch may come with it, nor matplotlib (the figure
# imports it when it draws, and only then).
# postmortem.integrations itself is core (it imports nothing); its modules import their framework.
CORE = [m for m in ALL if layer(m) not in ("tui", "replay", "minigpt") and not m.endswith("__main__")
        and not m.startswith("postmortem.integrations.")]


@pytest.mark.slow
@pytest.mark.parametrize("module", CORE)
def test_a_core_module_imports_neither_textual_nor_torch(module):
    code = (f"import sys, {module}\n"
            "leaked = sorted(m for m in ('textual', 'torch', 'matplotlib') if m in sys.modules)\n"
            "print(','.join(leaked))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"{module} brings {r.stdout.strip()} with it"


@pytest.mark.parametrize("module", ["postmortem.replay.worker", "postmortem.replay.loading",
                                    "postmortem.replay.distributed"])
def test_the_replays_front_door_imports_no_torch(module):
    """The app lists what is missing to replay and starts the child without torch."""
    code = f"import sys, {module}; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr or r.stdout


@pytest.mark.slow
def test_matplotlib_only_when_a_figure_is_drawn(tmp_path):
    """`analyze` and the TUI's start-up (the app and its screens imported, a run read and
    analyzed as the loader does) never load matplotlib; `new` does, to draw the figure."""
    run = ROOT / "sample_runs" / "long-tail-token"
    code = ("import contextlib, io, sys\n"
            "from postmortem.cli import main\n"
            "import postmortem.tui.app, postmortem.tui.screens.editor, postmortem.tui.screens.lessons\n"
            "import postmortem.tui.screens.commit, postmortem.tui.screens.dashboard\n"
            "from postmortem.document import figure, markdown, lint, draft\n"
            f"with contextlib.redirect_stdout(io.StringIO()): main(['analyze', {str(run)!r}, '--json'])\n"
            "print('matplotlib' in sys.modules)\n"
            f"main(['new', {str(run)!r}, '--learner', 'ana', '-o', {str(tmp_path / 'd.md')!r}])\n"
            "print('matplotlib' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"], r.stdout + r.stderr
    assert (tmp_path / "d.png").is_file()


# -- one file, one place in the order of imports -------------------------------------------------

def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def file_imports(path: Path, root: Path = ROOT, known=ALL) -> set[str]:
    """The modules of ours a file imports, wherever the import stands (a function's body
    too: an import deferred into a function still makes the two files one knot), but not
    under `if TYPE_CHECKING:` (never run). `from package import module` is that module."""
    tree = _tree(path)
    package = _package(path, root)
    never = {id(n) for b in ast.walk(tree) if _type_checking(b) for n in ast.walk(b)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in never:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = _base(node, package)
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in out if m in known}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every knot of the graph (a strongly connected part, Tarjan's), each named by one of its
    cycles, the one graphlib finds, from its first module in order: [a, b, ..., a]."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    knots = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            knot = set()
            while not knot or v not in knot:
                knot.add(stack.pop())
            if len(knot) > 1 or v in graph[v]:
                knots.append(knot)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    named = []
    for knot in knots:
        try:
            graphlib.TopologicalSorter({v: graph[v] & knot for v in knot}).prepare()
        except graphlib.CycleError as e:
            cycle = list(reversed(e.args[1]))[:-1]        # graphlib gives it against the arrows
            first = cycle.index(min(cycle))
            named.append(cycle[first:] + cycle[:first + 1])
    return sorted(named)


def import_graph() -> dict[str, set[str]]:
    return {name: file_imports(path) - {name} for name, path in ALL.items()}


def test_no_file_level_cycle_in_the_core():
    """Issue 28 broke the four knots there were (diagnose models/catalog/symptoms, replay
    loading/protocol, integrations hf/hf_replay, metriclines overflow/pairs/steps) by moving
    code: none may come back, not even through an import inside a function."""
    found = [" -> ".join(c) for c in cycles(import_graph())]
    assert found == [], "file-level import cycles:\n" + "\n".join(found)


def test_the_cycle_scan_sees_a_cycle_hidden_in_a_function(tmp_path):
    """A knot made through a function's import is found and named; one under TYPE_CHECKING is not."""
    pkg = tmp_path / "postmortem" / "x"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from postmortem.x import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nimport postmortem.x.a\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from postmortem.x import e\n")
    (pkg / "e.py").write_text("from postmortem.x.d import f\n")
    known = {f"postmortem.x.{n}": pkg / f"{n}.py" for n in "abcde"}
    graph = {m: file_imports(p, tmp_path, known) for m, p in known.items()}
    assert graph["postmortem.x.b"] == {"postmortem.x.c"} and graph["postmortem.x.d"] == set()
    assert cycles(graph) == [["postmortem.x.a", "postmortem.x.b", "postmortem.x.c", "postmortem.x.a"]]
    assert cycles({"p": {"q"}, "q": set()}) == []


# -- one address per name ---------------------------------------------------------------------------

# The documented public packages, whose names are imported from there by design: reading
# (`read_run`, `RunLog`), the Recorder's old address, and the replay contract's front door
# (a run's factory returns a `postmortem.replay.Replayable`; minigpt/replay.py is the example).
PUBLIC = ("postmortem.run", "postmortem.record", "postmortem.replay")


def bound_by_import(path: Path, root: Path = ROOT) -> dict[str, str]:
    """The names a module binds at its top by importing them, each with the module it comes
    from: what another module could take from it as if it were their home."""
    tree = _tree(path)
    package = _package(path, root)
    top = _top_level(tree)
    names = {}
    for node in ast.walk(tree):
        if id(node) in top and isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0]: a.name for a in node.names}
        elif id(node) in top and isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name: _base(node, package) for a in node.names if a.name != "*"}
    return names


def reexports_used(modules: dict[str, Path] = ALL, root: Path = ROOT) -> list[str]:
    """`from M import name` in a module, where M only imported `name` from elsewhere."""
    bound = {name: bound_by_import(path, root) for name, path in modules.items() if name not in PUBLIC}
    found = []
    for path in modules.values():
        package = _package(path, root)
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _base(node, package)
            for a in node.names:
                if base in bound and a.name in bound[base] and f"{base}.{a.name}" not in modules:
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {a.name} from {base}, "
                                 f"its home is {bound[base][a.name]}")
    return found


def test_every_name_is_imported_from_its_home():
    found = reexports_used()
    assert found == [], "\n".join(found)


def test_the_reexport_scan_sees_one(tmp_path):
    pkg = tmp_path / "postmortem" / "x"
    pkg.mkdir(parents=True)
    (pkg / "home.py").write_text("PANELS = ()\n")
    (pkg / "hall.py").write_text("from postmortem.x.home import PANELS  # noqa: F401\nOWN = 1\n")
    (pkg / "user.py").write_text("def f():\n    from .hall import PANELS, OWN\n")
    modules = {f"postmortem.x.{n}": pkg / f"{n}.py" for n in ("home", "hall", "user")}
    assert reexports_used(modules, tmp_path) == [
        "postmortem/x/user.py:2 imports PANELS from postmortem.x.hall, its home is postmortem.x.home"]
