"""Adding a dialect is one module and its `register` call: in a copy of the package, a
module dropped into `dialects/progress/` and one into `dialects/messages/` (nothing else
touched) are in `catalogue()`, name their lines, make a text-log family of their own, and
their log and overflow message are read into the run. And the dialect modules share their
helpers through the one public module, `dialects.entries`, importing no private name across
files."""

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from postmortem.run import dialects

DIALECTS = Path(dialects.__file__).parent

PROGRESS = '''
from postmortem.run.dialects import register
from postmortem.run.dialects.entries import NUM, entry

register(
    entry("toyfw.step", "ToyFW", "progress", "toy/toyfw v1 toyfw/train.py (log)",
          "f'toyfw step {step} loss {loss:.4f}'",
          r"\\btoyfw step (?P<step>\\d+) loss (?P<loss>" + NUM + r")",
          ("toyfw step 10 loss 2.5000",), ("toyfw step",)),
)
'''

MESSAGES = '''
from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

register(
    entry("toyfw.overflow", "ToyFW", "overflow", "toy/toyfw v1 toyfw/amp.py (step)",
          "f'toyfw overflow, scale now {scale}'",
          r"toyfw overflow, scale now " + scale("scale"),
          ("toyfw overflow, scale now 1024.0",), ("toyfw overflow",)),
)
'''

# run in a fresh interpreter on the copy: the tables built from the catalogue at import see it
PROBE = '''
import json, sys
from postmortem.run import read_run
from postmortem.run.dialects import catalogue, progress
log = read_run(sys.argv[1])
f = log.frame
import postmortem
print(json.dumps({
    "package": postmortem.__file__,
    "ids": [d.id for d in catalogue()],
    "of_line": getattr(progress.of_line("toyfw step 10 loss 2.5000"), "id", None),
    "families": list(progress.families()),
    "format": log.source.format,
    "loss": {str(int(s)): float(v) for s, v in zip(f.step, f.loss)},
    "overflows": {str(int(s)): float(v) for s, v in zip(f.step, f.overflows) if v == v},
    "loss_scale": {str(int(s)): float(v) for s, v in zip(f.step, f.loss_scale) if v == v},
    "overflow_dialects": log.source.extras["series_dialects"]["overflows"],
}))
'''


def test_a_new_dialect_is_one_module_and_its_registration(tmp_path):
    copy = tmp_path / "pkg" / "postmortem"
    shutil.copytree(DIALECTS.parents[1], copy, ignore=shutil.ignore_patterns("__pycache__"))
    for sub, text in (("progress", PROGRESS), ("messages", MESSAGES)):
        (copy / "run" / "dialects" / sub / "toyfw.py").write_text(textwrap.dedent(text))
    log = tmp_path / "train.log"
    log.write_text("".join(f"toyfw step {s} loss {3 - s / 100:.4f}\n" for s in range(1, 41))
                   + "toyfw overflow, scale now 1024.0\n"
                   + "".join(f"toyfw step {s} loss {3 - s / 100:.4f}\n" for s in range(41, 61)))
    env = {**os.environ, "PYTHONPATH": str(copy.parent)}
    r = subprocess.run([sys.executable, "-c", PROBE, str(log)], capture_output=True, text=True,
                       check=False, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["package"] == str(copy / "__init__.py")
    assert "toyfw.step" in got["ids"] and "toyfw.overflow" in got["ids"]
    assert got["of_line"] == "toyfw.step" and "toyfw" in got["families"]
    assert got["format"] == "toyfw"
    assert len(got["loss"]) == 60 and got["loss"]["10"] == 2.9 and got["loss"]["60"] == 2.4
    # the overflow between steps 40 and 41 is a skipped step on 41, with the scale it printed
    assert got["overflows"] == {"41": 1.0} and got["loss_scale"]["41"] == 1024.0
    assert got["overflow_dialects"] == ["toyfw.overflow"]


def _private_imports(path: Path) -> list[str]:
    """`from postmortem.run.dialects... import _x` or of a `_module`, in one file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("postmortem.run.dialects"):
            parts = (node.module or "").split(".")
            out += [f"{node.module}.{a.name}" for a in node.names
                    if a.name.startswith("_") or any(p.startswith("_") for p in parts)]
    return out


def test_dialect_modules_import_only_public_names():
    modules = sorted(DIALECTS.rglob("*.py"))
    assert len(modules) > 40
    assert [m for m in modules if m.name.startswith("_") and m.name != "__init__.py"] == []
    assert {str(m.relative_to(DIALECTS)): _private_imports(m) for m in modules} == {
        str(m.relative_to(DIALECTS)): [] for m in modules}


def test_every_dialect_module_builds_its_entries_with_the_shared_entry():
    for m in sorted((DIALECTS / "progress").glob("*.py")) + sorted((DIALECTS / "messages").glob("*.py")):
        if m.name == "__init__.py":
            continue
        tree = ast.parse(m.read_text(encoding="utf-8"))
        imports = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert ("postmortem.run.dialects.entries", "entry") in imports, m.name
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "entry"], m.name
