"""The direction of imports (docs/architecture.md), held by a test that fails: read from the
source (every import statement, wherever it stands) and seen at run time (each core module
imported alone in a fresh interpreter, as harlequin's import hygiene test does)."""

import ast
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


def imports(path: Path, root: Path = ROOT) -> list[tuple[str, int, bool]]:
    """(module imported, line, at module level) for every import of the file; a relative
    import is resolved against the file's package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    top = {id(n) for n in tree.body}
    for node in tree.body:           # `if TYPE_CHECKING:` or `try:` at the top still run at import
        if isinstance(node, (ast.If, ast.Try)):
            top |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
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
