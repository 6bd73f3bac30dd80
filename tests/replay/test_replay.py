"""Replay on the sample runs: faithful bit for bit on CPU, and the arms and probes single out
the injected cause. Runs on CUDA too when there is one (same assertions, looser faithfulness)."""

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from conftest import recorded_here

from postmortem.diagnose.analyze import analyze
from postmortem.errors import ReplayError
from postmortem.replay.engine import Replayer
from postmortem.replay.models import Cancelled
from postmortem.run import read_run

ROOT = Path(__file__).resolve().parents[2]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def replay(name, device="cpu", arms=None, **kw):
    log = read_run(ROOT / "sample_runs" / name)
    inc = analyze(log).incidents[0]
    r = Replayer(log, inc, device, **kw)
    return r.replay(arms) if arms else r.replay()


def faithfulness(result) -> str:
    return next(e.observation for e in result.evidence if e.observation.startswith("faithful replay"))


def evidence(result, arm):
    return [e for e in result.evidence if e.observation.startswith(arm)]


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,cause", [("long-tail-token", "long-tail-token"), ("fp16-overflow", "fp16-overflow"),
                                        ("lr-discontinuity", "lr-discontinuity"), ("optimizer-reset", "optimizer-reset"),
                                        ("numerics", "numerics"), ("bad-data", "bad-data")])
def test_the_replay_singles_out_the_injected_cause(name, cause, device):
    result = replay(name, device)
    assert result.faithful, result.faithful_max_diff
    if device == "cpu" and recorded_here(ROOT / "sample_runs" / name):
        assert result.faithful_max_diff == 0.0, result.faithful_max_diff
    assert result.hypotheses[0].pattern == cause
    assert result.hypotheses[0].score > max(h.score for h in result.hypotheses[1:])


@pytest.mark.slow
def test_a_run_recorded_on_this_machine_replays_bit_for_bit(made_here):
    log = read_run(made_here("long-tail-token"))
    result = Replayer(log, analyze(log).incidents[0], "cpu").replay(("faithful",))
    assert result.faithful and result.faithful_max_diff == 0.0, result.faithful_max_diff
    assert "within" not in faithfulness(result)     # no tolerance was needed


@pytest.mark.slow
def test_a_run_from_another_torch_build_is_faithful_within_a_tolerance_that_says_why(tmp_path):
    run = tmp_path / "lr-discontinuity"
    shutil.copytree(ROOT / "sample_runs" / "lr-discontinuity", run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["versions"] = {"torch": "1.13.1+cu117"}
    (run / "manifest.json").write_text(json.dumps(manifest))
    log = read_run(run)
    result = Replayer(log, analyze(log).incidents[0], "cpu").replay(("faithful",))
    assert result.faithful
    assert f"(within 0.01: recorded with torch 1.13.1+cu117, replayed with {torch.__version__})" \
        in faithfulness(result)


@pytest.mark.slow
def test_fp32_removes_the_fp16_overflow_not_the_rare_token_spike():
    fp16 = evidence(replay("fp16-overflow"), "fp32 arm")[0]
    assert "is gone" in fp16.observation and fp16.favors == ["fp16-overflow"]
    # the rare-token run is fp32 already; its spike survives every arm but the swapped batch
    lt = replay("long-tail-token")
    assert "is gone" in evidence(lt, "swap-batch arm")[0].observation
    assert "stays" in evidence(lt, "scheduled-lr arm")[0].observation


@pytest.mark.slow
def test_fp32_arm_on_a_rare_token_spike_in_fp16(tmp_path):
    # the same junk batch in an fp16 run: fp32 does not remove it
    from postmortem.minigpt.config import Injection, TrainConfig
    from postmortem.minigpt.train import train
    torch.set_num_threads(1)
    cfg = TrainConfig(run_id="lt-fp16", dtype="fp16", steps=270,
                      injection=Injection(kind="long-tail-token", step=250, fraction=0.5))
    d = train(cfg, tmp_path / "lt-fp16", dev=torch.device("cpu"), record_layers=False)
    log = read_run(d)
    inc = [i for i in analyze(log).incidents if i.step == 250][0]
    result = Replayer(log, inc, "cpu").replay(("faithful", "fp32", "swap-batch"))
    assert "stays" in evidence(result, "fp32 arm")[0].observation
    assert "fp16-overflow" in evidence(result, "fp32 arm")[0].rules_out
    assert "is gone" in evidence(result, "swap-batch arm")[0].observation


@pytest.mark.slow
def test_first_nonfinite_module_of_the_log0_run_is_the_loss():
    result = replay("numerics")
    nf = result.probes["first_nonfinite"]
    assert nf["forward"]["module"].startswith("loss")
    assert nf["forward"]["output"]["+inf"] > 0
    assert nf["after_step"] is not None             # NaN weights after the step


@pytest.mark.slow
def test_restored_moments_remove_the_resume_spike():
    result = replay("optimizer-reset")
    assert any("those of a fresh optimizer" in e.observation for e in result.evidence)
    restored = evidence(result, "restored-moments arm")[0]
    assert "is gone" in restored.observation and restored.favors == ["optimizer-reset"]


@pytest.mark.slow
def test_probes_report_layers_tokens_and_hashes():
    result = replay("long-tail-token", arms=("faithful",))
    layers = result.probes["layers"]
    assert "model.blocks.0.mlp.fc" in layers or "blocks.0.mlp.fc" in layers
    some = next(iter(layers.values()))
    assert some["grad_norm"] > 0 and some["g2_over_v"] > 0
    assert result.probes["per_token"]["rare_share_of_tail"] == 1.0
    assert len(result.probes["hashes"]) == 54


@pytest.mark.slow
def test_the_evidence_joins_each_hypothesis_for_and_against():
    result = replay("long-tail-token", arms=("faithful", "scheduled-lr", "swap-batch"))
    ranked = {h.pattern: h for h in result.hypotheses}
    swap = next(e for e in result.evidence if e.observation.startswith("swap-batch arm"))
    schedule = next(e for e in result.evidence if e.observation.startswith("scheduled-lr arm"))
    assert swap.observation in [o.observation for o in ranked["long-tail-token"].supported_by]
    assert schedule.observation in [o.observation for o in ranked["lr-discontinuity"].contradicted_by]
    # the diagnosis' own observations stay, after the replay's
    assert any(o.panel == "grad-norm" for o in ranked["long-tail-token"].supported_by[1:])


def test_progress_and_cancel():
    seen = []
    cancel = threading.Event()

    def progress(arm, step, done, total):
        seen.append((arm, step))
        if len(seen) == 5:
            cancel.set()
    with pytest.raises(Cancelled):
        replay("long-tail-token", progress=progress, cancel=cancel)
    assert seen[:2] == [("faithful", 200), ("faithful", 201)]


def test_unsafe_checkpoint_is_refused(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(ROOT / "sample_runs" / "long-tail-token", d)
    ckpt = d / "checkpoints" / "step_000200.pt"
    state = torch.load(ckpt, weights_only=True)
    state["extra"] = threading.Event        # a class: needs arbitrary unpickling
    torch.save(state, ckpt)
    log = read_run(d)
    with pytest.raises(ReplayError, match="unsafe unpickling"):
        Replayer(log, analyze(log).incidents[0], "cpu").replay(("faithful",))


@pytest.mark.slow
def test_cli_json_and_clear_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "postmortem", "replay", str(ROOT / "sample_runs" / "lr-discontinuity"),
                        "--arms", "scheduled-lr", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["faithful"] and data["hypotheses"][0]["pattern"] == "lr-discontinuity"
    assert {"panel", "observation", "favors", "rules_out"} <= set(data["evidence"][0])
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 3.0 + (s == 150)}) + "\n" for s in range(300)))
    r = subprocess.run([sys.executable, "-m", "postmortem", "replay", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "no replay entry point" in r.stderr and "Recorder" in r.stderr


@pytest.mark.slow
def test_new_with_replay_fills_the_evidence_section(tmp_path):
    from postmortem.document.lint import check_text
    from postmortem.document.markdown import parse
    out = tmp_path / "d.md"
    r = subprocess.run([sys.executable, "-m", "postmortem", "new", str(ROOT / "sample_runs" / "fp16-overflow"),
                        "--learner", "ana", "--replay", "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = parse(out.read_text())
    assert doc.pattern == "fp16-overflow" and doc.hypotheses[0].pattern == "fp16-overflow"
    assert any("fp32 arm" in e.observation and e.favors == ["fp16-overflow"] for e in doc.evidence)
    problems = [str(p) for p in check_text(out.read_text(), doc, read_run(ROOT / "sample_runs" / "fp16-overflow"))]
    assert not any(p.startswith("Discriminating evidence") for p in problems), problems
