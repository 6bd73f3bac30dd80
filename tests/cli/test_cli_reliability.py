"""Reliability leftovers of issue 26, through the real command line: what exited 3 (a bug's
traceback line) now exits 0 or says its one line with exit 2."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import one_line_error, postmortem

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_first_segment_with_no_finite_loss_nor_grad_norm_is_analyzed(tmp_path):
    """A run that restarted after a first attempt logged only NaN: A1 and A2 skip with why."""
    log = tmp_path / "restarted.jsonl"
    rows = [{"step": s, "loss": math.nan, "grad_norm": math.nan, "lr": 1e-3} for s in range(20)]
    rows += [{"step": s, "loss": 2.0 + (5 if s == 150 else 0), "grad_norm": 1.0 + (20 if s == 150 else 0),
              "lr": 1e-3} for s in range(200)]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = postmortem("analyze", log, "--json")
    assert r.returncode == 0, r.stderr
    checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["A1"]["status"] == "skipped" and checks["A2"]["status"] == "skipped"
    assert "first segment" in checks["A2"]["detail"]


@pytest.mark.slow
def test_a_nul_or_control_character_in_the_front_matter_is_one_line(tmp_path):
    from worked_example import as_learners
    doc = as_learners(tmp_path)
    good = doc.read_text()
    for bad, line in (("\x00", 4), ("\x07", 4)):
        doc.write_text(good.replace("learner: ada", f"learner: a{bad}da"))
        for command in (("check", doc), ("commit", doc, "--kb", tmp_path), ("verify", doc, "--run", doc)):
            error = one_line_error(postmortem(*command))
            assert error == (f"postmortem: error: {doc}: front matter is not YAML: unacceptable character "
                             f"#x{ord(bad):04x}: special characters are not allowed (line {line})"), error


KILLED_AT_GIT_COMMIT = """
import os, signal, sys
from pathlib import Path
from postmortem.document.markdown import read, render
from postmortem.kb import commit as kbcommit
real = kbcommit.run_git
def _git(r, args, *a, **kw):
    if args[0] == "commit":                  # the files are written, the journal too: kill -9 now
        os.kill(os.getpid(), signal.SIGKILL)
    return real(r, args, *a, **kw)
kbcommit.run_git = _git
pm = read(sys.argv[1])
kbcommit.commit(pm, render(pm), "ada", Path(sys.argv[2]))
"""


@pytest.mark.slow
def test_a_commit_killed_half_way_is_never_shown_by_lessons(tmp_path):
    import git
    from test_kb_commit import IDENTITY
    from worked_example import as_learners
    kb = tmp_path / "kb"
    git.Repo.init(kb, initial_branch="main")
    env = {**__import__("os").environ, **IDENTITY}
    r = subprocess.run([sys.executable, "-c", KILLED_AT_GIT_COMMIT, as_learners(tmp_path / "d"), kb],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stderr
    assert (kb / "learners" / "ada" / "lessons.md").exists()           # half-made, in the tree
    r = postmortem("lessons", "--kb", kb, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["count"] == 0, r.stdout
    assert not (kb / "learners").exists() and not (kb / ".git" / "postmortem-commit").exists()
    assert git.Repo(kb).git.status("--porcelain") == ""


@pytest.mark.slow
def test_verify_says_nan_at_a_nan_step_and_a_nan_fails_a_window(tmp_path):
    from worked_example import as_learners
    rerun = tmp_path / "rerun.jsonl"
    rows = [{"step": s, "loss": 2.0} for s in range(300)]
    rows[250]["loss"], rows[251]["loss"] = math.nan, None        # a logged NaN, then a step not logged
    rerun.write_text("".join(json.dumps(r) + "\n" for r in rows))
    doc = as_learners(tmp_path / "d")
    text = doc.read_text()
    doc.write_text(text.replace("- expect: step 250 loss < 2.0", "- expect: step 250 loss < 2.5\n"
                                "- expect: step 251 loss < 2.5"))
    r = postmortem("verify", doc, "--run", rerun)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert "FAIL  step 250 loss < 2.5  [loss = NaN]" in lines and "FAIL  step 251 loss < 2.5  [no loss at step 251]" in lines
    assert "FAIL  max grad_norm in [245, 260] < 5.0  [the re-run has no grad_norm]" in lines, lines
    doc.write_text(text.replace("max grad_norm in [245, 260] < 5.0", "max loss in [245, 260] < 5.0"))
    r = postmortem("verify", doc, "--run", rerun)
    assert "FAIL  max loss in [245, 260] < 5.0  [loss = NaN at step 250]" in r.stdout.splitlines(), r.stdout
