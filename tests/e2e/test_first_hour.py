"""The first hour of a new user, as tests: the README's first screen read as the commands
it is, and a fresh clone driven through them as written.

The clone is of the commit at HEAD (`git clone --local`), so the slow test checks what
was committed, not the working tree. Its shell has no `postmortem` on the PATH but what
the README's own commands put there, as on a new user's machine."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "sample_runs/long-tail-token"
# The README's placeholders, filled as a user would fill them on the sample run.
# The knowledge base goes beside the clone (../kb), never into the home of whoever runs the tests.
PLACEHOLDERS = {"path/to/run_or_log": SAMPLE, "NAME": "ana", "~/postmortems": "../kb"}
# A fresh draft is not argued yet: check lists what is left and commit refuses it (exit 1).
EXIT_ON_A_FRESH_DRAFT = {"check": 1, "commit": 1}


def first_screen(readme: str) -> list[list[str]]:
    """The command lines of the bash blocks above the README's first `## ` heading,
    comments off, placeholders as written."""
    head = readme.split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", head, re.S)
    lines = [[re.sub(r"(^|\s+)#.*$", "", line).strip() for line in b.splitlines()] for b in blocks]
    return [[line for line in block if line] for block in lines]


def filled(command: str) -> str:
    for placeholder, value in PLACEHOLDERS.items():
        command = re.sub(rf"(?<![\w/.]){re.escape(placeholder)}(?![\w/])", value, command)
    return command


def puts_postmortem_on_path(command: str) -> bool:
    return command in ("source .venv/bin/activate", ". .venv/bin/activate")


def test_the_readme_opens_with_set_up_and_tests_then_what_to_run_next():
    blocks = first_screen((ROOT / "README.md").read_text())
    commands = [c for block in blocks for c in block]
    assert commands[:2] == ["bash scripts/setup.sh", "bash scripts/test.sh"], commands[:2]
    mine = [c for c in commands if c.split()[0] in ("postmortem", ".venv/bin/postmortem")]
    assert any(c.split()[1:2] == ["analyze"] for c in mine), "the first screen never says analyze"
    for c in mine:
        if c.startswith("postmortem"):
            before = commands[:commands.index(c)]
            assert any(puts_postmortem_on_path(b) for b in before), \
                f"`{c}` comes before anything puts postmortem on the PATH"


def test_every_command_on_the_first_screen_parses():
    """Each `postmortem ...` line of the first screen is a real command with real options."""
    from postmortem.cli.parser import build_parser

    parser = build_parser()
    commands = {name for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict)
                for name in a.choices}
    lines = [c for b in first_screen((ROOT / "README.md").read_text()) for c in b
             if c.split()[0] in ("postmortem", ".venv/bin/postmortem")]
    assert lines
    for line in lines:
        argv = shlex.split(filled(line))[1:]
        if argv[0] not in commands:      # `postmortem RUN`: the analysis in a pipe
            argv = ["analyze", *argv]
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit_:
            pytest.fail(f"`{line}` does not parse (exit {exit_.code})")
        assert args.command == argv[0]


def test_the_readme_links_only_files_in_the_repository():
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README links {target}, which is not in the repository"


def _new_user_env(home: Path) -> dict[str, str]:
    """This environment less any virtualenv and any folder holding a `postmortem`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME") and not k.startswith("PYTEST_")}
    folders = [f for f in env.get("PATH", "").split(os.pathsep)
               if f and not (Path(f) / "postmortem").exists()]
    env["PATH"] = os.pathsep.join(folders)
    env["POSTMORTEM_DEBUG"] = ""
    return env


def _run(command: str, prelude: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    script = "\n".join(["set -e", *prelude, command])
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1200)


@pytest.mark.slow
def test_a_fresh_clone_runs_the_readme_as_written(tmp_path):
    if not (ROOT / ".git").exists() or not shutil.which("git"):
        pytest.skip("not a git checkout")
    clone = tmp_path / "main"
    subprocess.run(["git", "clone", "--quiet", "--local", str(ROOT), str(clone)], check=True)
    if (ROOT.parent / "shared").is_dir():     # the real-log corpus lives beside the checkout
        (tmp_path / "shared").symlink_to(ROOT.parent / "shared")
    env = _new_user_env(tmp_path)
    blocks = first_screen((clone / "README.md").read_text())
    assert _run("command -v postmortem", [], clone, env).returncode != 0, \
        "postmortem is on this PATH already: the test could not tell a README that forgets it"

    prelude: list[str] = []          # what changes the shell (activation) holds for the lines after it
    for command in (c for block in blocks for c in block):
        if puts_postmortem_on_path(command):
            prelude.append(command)
            continue
        argv = shlex.split(filled(command))
        if argv[:2] == ["bash", "scripts/test.sh"]:
            # the tests' quick tier: all of it collected, and this file's fast tests run
            # (the whole suite here would take minutes and run this test again)
            done = _run("bash scripts/test.sh --quick --collect-only -q", prelude, clone, env)
            assert done.returncode == 0, done.stdout[-3000:]
            assert re.search(r"\d+/\d+ tests collected \(\d+ deselected\)", done.stdout), done.stdout[-600:]
            # -n 0: in one process, whose summary counts the slow test it left out
            done = _run("bash scripts/test.sh --quick -n 0 -q tests/e2e/test_first_hour.py", prelude, clone, env)
            assert done.returncode == 0, done.stdout[-3000:]
            assert re.search(r"\d+ passed, 1 deselected", done.stdout), done.stdout[-600:]
            continue
        done = _run(shlex.join(argv), prelude, clone, env)
        out = done.stdout
        assert done.returncode != 127, f"`{command}`: command not found after the lines before it\n{out}"
        assert "Traceback" not in out and "internal error" not in out, f"`{command}`\n{out}"
        if argv[:2] == ["bash", "scripts/setup.sh"]:
            assert done.returncode == 0, out[-3000:]
            assert (clone / ".venv" / "bin" / "postmortem").exists()
            assert "spike of loss at step 250" in out, out[-3000:]       # the main job on the sample
            assert "source .venv/bin/activate" in out, "set-up does not say what to type next"
            continue
        name = argv[1] if len(argv) > 1 else ""
        expected = EXIT_ON_A_FRESH_DRAFT.get(name, 0)
        assert done.returncode == expected, f"`{command}` exited {done.returncode}\n{out[-3000:]}"
        if name == "init":        # the knowledge base beside the clone, a repository of its own
            assert (clone.parent / "kb" / ".git").is_dir() and "learner: ana" in out, out
        elif name == "new":
            draft = clone / argv[argv.index("-o") + 1] if "-o" in argv else None
            assert draft is not None and draft.read_text().startswith("---"), out
        elif name in EXIT_ON_A_FRESH_DRAFT:
            assert "TODO" in out, out          # it names what is left to write
        else:                                  # analyze, and `postmortem RUN` in a pipe
            assert "spike of loss at step 250" in out, out[-3000:]
    _argue_and_commit(clone, prelude, env)


ARGUED = {   # sections 3-7 as a user writes them on the sample, in the forms `check` reads
    "| loss | the run is fp32 (manifest.json says so): no fp16 loss scale to overflow |  | fp16-overflow |":
        "| loss | the run is fp32 (manifest.json says so): no fp16 loss scale to overflow |  | fp16-overflow |\n"
        "| batch | the spike goes with the batch when it is swapped | long-tail-token | lr-discontinuity, optimizer-reset |",
    "TODO: one sentence: what caused the incident.": "Half of the batch of step 250 was long-tail junk.",
    "- TODO: what changes in the data, config or code.": "- filter the junk documents",
    "- TODO: seed, epsilon, through step T, and expectations.":
        "- seed: 1234\n- through step: 249\n- expect: step 250 loss < 2.0",
    "TODO: one line for the lessons file.": "A spike on one batch with a smooth LR: look at the batch first.",
}


def _argue_and_commit(clone: Path, prelude: list[str], env: dict[str, str]) -> None:
    """The README's draft argued, then `commit draft.md` as written, from the clone: into the
    knowledge base `init` named (../kb, another repository), with every number checked
    against the run the draft names (no --run): a number the run contradicts is refused."""
    draft = clone / "draft.md"
    text = draft.read_text()
    for todo, argued in ARGUED.items():
        assert todo in text, todo
        text = text.replace(todo, argued)
    assert "| lr | 0.001301 |" in text
    kb = clone.parent / "kb"
    before = subprocess.run(["git", "-C", str(kb), "rev-list", "--all", "--count"], capture_output=True,
                            text=True).stdout.strip() or "0"
    draft.write_text(text.replace("| lr | 0.001301 |", "| lr | 0.01 |"))
    for command in ("postmortem check draft.md", "postmortem commit draft.md"):
        done = _run(command, prelude, clone, env)
        assert done.returncode == 1 and "lr is 0.01 but the run says 0.001301" in done.stdout, done.stdout
    assert (subprocess.run(["git", "-C", str(kb), "rev-list", "--all", "--count"], capture_output=True,
                           text=True).stdout.strip() or "0") == before, "a number the run contradicts was committed"
    draft.write_text(text)
    done = _run("postmortem check draft.md", prelude, clone, env)
    assert done.returncode == 0 and "complete and true to the run" in done.stdout, done.stdout
    done = _run("postmortem commit draft.md", prelude, clone, env)
    assert done.returncode == 0 and done.stdout.startswith("committed "), done.stdout
    committed = subprocess.run(["git", "-C", str(kb), "show", "--name-only", "--format=%s", "HEAD"],
                               capture_output=True, text=True, check=True).stdout
    assert "post-mortem 19-spike-001 (long-tail-token)" in committed and "learners/ana/lessons.md" in committed
    doc = next((kb / "learners" / "ana" / "postmortems").glob("*-19-spike-001.md")).read_text()
    assert f"run: {clone / SAMPLE}" in doc and "numbers:" not in doc.split("\n---\n")[0], doc[:800]
    assert not subprocess.run(["git", "-C", str(clone), "status", "--porcelain", "--untracked-files=no"],
                              capture_output=True, text=True).stdout.strip(), "the clone was written to"
    done = _run(f"cd {shlex.quote(str(clone.parent))} && postmortem lessons --pattern long-tail-token",
                prelude, clone, env)                 # from another folder: the knowledge base init named
    assert "look at the batch first" in done.stdout, done.stdout


def test_every_file_marked_slow_whole_is_seen_so(tmp_path):
    """The slow tier is marked where a test is written; the quick tier does not even import a
    file slow whole (conftest.slow_whole reads its `pytestmark` from the source): a form of the
    mark it did not see would slow the quick tier down silently."""
    from conftest import slow_whole

    files = sorted((ROOT / "tests").rglob("test_*.py"))
    for path in files:
        says = re.search(r"^pytestmark = .*pytest\.mark\.slow\b", path.read_text(), re.M) is not None
        assert slow_whole(path) == says, f"{path.relative_to(ROOT)}: its pytestmark is read wrong"
    assert sum(slow_whole(path) for path in files) >= 8
    forms = {"pytestmark = pytest.mark.slow": True,
             "pytestmark = [pytest.mark.usefixtures('one_thread'), pytest.mark.slow]": True,
             "pytestmark = pytest.mark.usefixtures('one_thread')": False,
             "@pytest.mark.slow\ndef test_one():\n    pass": False}
    for n, (form, slow) in enumerate(forms.items()):
        path = tmp_path / f"test_{n}.py"
        path.write_text(f"import pytest\n\n{form}\n")
        assert slow_whole(path) == slow, form
