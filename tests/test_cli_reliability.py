"""Reliability leftovers of issue 26, through the real command line: what exited 3 (a bug's
traceback line) now exits 0 or says its one line with exit 2."""

import json
import math
import subprocess
import sys
from pathlib import Path

from cli_run import one_line_error, postmortem

ROOT = Path(__file__).resolve().parents[1]


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
