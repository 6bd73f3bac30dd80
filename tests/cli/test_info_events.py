"""`info` says the events the text readers keep beside the series: resumes, checkpoint loads
and evaluations (`read.resumes`, `read.checkpoints`, `read.evals` in --json, a line each in text)."""

import json
import subprocess
import sys


def pm(*args):
    return subprocess.run([sys.executable, "-m", "postmortem", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def _d2(i, loss):
    # detectron2 utils/events.py CommonMetricPrinter.write (v0.6)
    return (f"[11/26 10:00:00 d2.utils.events]:  eta: 1:00:00  iter: {i}  total_loss: {loss:.3f}  loss_cls: 0.5  "
            f"loss_box_reg: 0.4  time: 0.5000  data_time: 0.0100  lr: 0.02  max_mem: 3000M")


def _resumed_log(tmp_path):
    """A detectron2 run resumed at iteration 40000: fvcore's `Loading ... from P ...` lines, then
    detectron2's `Starting training from iteration 40000`."""
    fv = "[11/26 11:00:00 fvcore.common.checkpoint]: "
    lines = [_d2(i, 2 - i / 1000) for i in range(39919, 40000, 20)]
    lines += [fv + "[Checkpointer] Loading from output/model_0039999.pth ...",
              fv + "Loading optimizer from output/model_0039999.pth ...",
              "[11/26 11:00:01 d2.engine.train_loop]: Starting training from iteration 40000"]
    lines += [_d2(i, 1.5 - i / 100000) for i in range(40019, 40100, 20)]
    p = tmp_path / "d2.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_info_json_says_resumes_and_checkpoint_loads(tmp_path):
    r = pm("info", _resumed_log(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    read = json.loads(r.stdout)["read"]
    assert read["resumes"] == [{"step": 40000, "dialect": "detectron2.start_iter"}]
    assert read["checkpoints"] == [{"step": 40000, "dialect": "detectron2.checkpoint"},
                                   {"step": 40000, "dialect": "detectron2.checkpointable"}]
    assert "evals" not in read          # none in this log: the field is absent, not empty


def test_info_text_says_them_one_line_each(tmp_path):
    r = pm("info", _resumed_log(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "resumed 1: step 40000 (detectron2.start_iter)" in lines
    assert ("checkpoint loads 2: step 40000 (detectron2.checkpoint), "
            "step 40000 (detectron2.checkpointable)") in lines
    assert not any(line.startswith("evaluations") for line in lines)
