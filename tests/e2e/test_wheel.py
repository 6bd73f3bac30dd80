"""An installed wheel writes, checks and commits a post-mortem: the wheel is built from the
checkout and installed in a fresh virtualenv outside it, run from a folder outside it.

Offline and fast: the wheel goes in with --no-deps, and the checkout's virtualenv lends its
installed dependencies through a .pth line (the .pth files *inside* that folder, among them the
editable install of the checkout, are not processed: the package comes from the wheel)."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "learners" / "example" / "postmortems" / "2026-11-22-19-spike-001.md"
RUN = ROOT / "sample_runs" / "long-tail-token"


def run(*args, cwd, env=None, check=True):
    r = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if check:
        assert r.returncode == 0, f"{args}: {r.stdout}\n{r.stderr}"
    return r


def test_an_installed_wheel_writes_checks_and_commits_a_postmortem(tmp_path):
    src = tmp_path / "src"            # a copy of the checkout's files: the build leaves the checkout as it is
    tracked = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file() and name.startswith(("postmortem/", "pyproject.toml", "README.md")):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path / "dist",
        src, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("postmortem-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "postmortem/templates/postmortem.md" in names
    assert any(n.endswith(".tcss") for n in names)

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).stdout.strip())
    (site / "lent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel,
        cwd=tmp_path)

    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "ana", "GIT_AUTHOR_EMAIL": "ana@example.org",
           "GIT_COMMITTER_NAME": "ana", "GIT_COMMITTER_EMAIL": "ana@example.org", "PYTHONPATH": ""}
    where = run(python, "-c", "import postmortem; print(postmortem.__file__)", cwd=work, env=env).stdout.strip()
    assert Path(where).is_relative_to(venv), where          # the wheel's, not the checkout's
    pm = [python, "-m", "postmortem"]

    run(*pm, "new", RUN, "--learner", "ana", "-o", work / "draft.md", cwd=work, env=env)
    draft = (work / "draft.md").read_text()
    assert draft.startswith("---\n") and "## 3. Discriminating evidence" in draft and "spike_step: 250" in draft
    r = run(*pm, "check", work / "draft.md", cwd=work, env=env, check=False)
    assert r.returncode == 1 and "TODO" in r.stdout           # a draft: sections 3-7 to write

    done = work / "done.md"
    done.write_text(EXAMPLE.read_text().replace("learner: example", "learner: ana"))   # ana's, as committed
    shutil.copy(EXAMPLE.with_suffix(".png"), work)        # the figure the document shows, beside it
    r = run(*pm, "check", done, "--run", RUN, cwd=work, env=env)
    assert "complete and true to the run" in r.stdout
    kb = work / "kb"
    kb.mkdir()
    run(*pm, "commit", done, "--learner", "ana", "--run", RUN, "--repo", kb, "--init", cwd=work, env=env)
    assert (kb / "learners" / "ana" / "postmortems" / EXAMPLE.name).read_text().startswith("---\n")
    assert "long-tail-token" in (kb / "learners" / "ana" / "lessons.md").read_text()
    assert run("git", "log", "--oneline", cwd=kb).stdout.count("\n") >= 1
