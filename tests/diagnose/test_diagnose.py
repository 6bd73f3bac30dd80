"""Diagnosis on the sample runs (known causes) and on real public logs (INDEX.md)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.diagnose.thresholds import Thresholds
from postmortem.minigpt.samples import SAMPLES
from postmortem.run import read_run

ROOT = Path(__file__).resolve().parents[2]
EXPECTED_KIND = {"long-tail-token": "spike", "fp16-overflow": "nan", "lr-discontinuity": "spike",
                 "optimizer-reset": "spike", "numerics": "nan", "bad-init": "bad-start",
                 "schedule-misconfigured": "divergence", "bad-data": "spike"}


@pytest.mark.parametrize("name", [n for n in SAMPLES if n != "healthy"])
def test_each_sample_ranks_its_injected_cause_first(name):
    cfg = SAMPLES[name][0]
    log = read_run(ROOT / "sample_runs" / name)
    result = analyze(log)
    assert result.incidents, name
    inc = result.incidents[0]
    assert inc.kind == EXPECTED_KIND[name]
    assert inc.hypotheses[0].pattern == cfg.injection.kind
    inj = cfg.injection
    expected_step = {"optimizer-reset": inj.resume_from + 1, "bad-init": 0,
                     "bad-data": inj.step + inj.length}.get(name, inj.step)
    if name != "schedule-misconfigured":          # a slow divergence has no single step
        assert abs(inc.step - expected_step) <= 1, (inc.step, expected_step)
    top = inc.hypotheses[0]
    assert top.supported_by and all(o.panel in ("loss", "lr", "grad-norm", "loss-scale", "batch",
                                                "optimizer-moments", "weight-norm", "per-token-loss",
                                                "activations") for o in top.supported_by)
    assert top.discriminate


def test_healthy_sample_has_no_incident():
    assert analyze(read_run(ROOT / "sample_runs" / "healthy")).incidents == []


def direct_symptoms(f: pd.DataFrame, spike: int, peak: int, mean: float, std: float):
    """The template's numbers, computed here by hand from the metrics."""
    before = f[(f.step < spike) & (f.step >= spike - 500)].loss.to_numpy()
    before = before[np.isfinite(before)]
    ema = before[0]
    for v in before[1:]:
        ema = 2 / 51 * v + (1 - 2 / 51) * ema
    after = f[(f.step > peak) & (f.step <= peak + 50)].loss
    recovered = bool((after <= mean + 0.5 * std).any())
    at50 = f[f.step >= peak + 50].loss
    row = f[f.step == spike].iloc[0]
    return {"pre_spike_loss_ema50": ema, "peak_loss": f[f.step == peak].loss.item(),
            "recovery_loss": at50.iloc[0] if recovered else "did not recover",
            "grad_norm_pre_clip": row.grad_norm, "lr": row.lr, "batch_index": int(row.batch_index)}


def test_symptoms_equal_the_numbers_computed_directly():
    log = read_run(ROOT / "sample_runs" / "long-tail-token")
    inc = analyze(log).incidents[0]
    f = log.frame
    prev = f[(f.step < 250) & (f.step >= 150)].loss
    want = direct_symptoms(f, 250, 250, prev.mean(), prev.std())
    got = inc.symptoms
    assert got.spike_step == 250 and got.peak_step == 250 and got.dtype == "fp32"
    assert got.pre_spike_loss_ema50 == pytest.approx(want["pre_spike_loss_ema50"], rel=1e-9)
    assert got.peak_loss == want["peak_loss"] and got.recovery_loss == want["recovery_loss"]
    assert got.grad_norm_pre_clip == want["grad_norm_pre_clip"] and got.lr == want["lr"]
    assert got.batch_index == want["batch_index"] == 250


def test_nan_symptoms_say_did_not_recover():
    inc = analyze(read_run(ROOT / "sample_runs" / "numerics")).incidents[0]
    assert inc.symptoms.recovery_loss == "did not recover" and inc.symptoms.peak_loss is None
    fp16 = analyze(read_run(ROOT / "sample_runs" / "fp16-overflow")).incidents[0]
    assert isinstance(fp16.symptoms.recovery_loss, float)             # skipped, then fine again
    assert any("loss_scale cascade" in r for r in fp16.related)


def incidents(real_runs, name, **th):
    return analyze(read_run(real_runs / name), Thresholds(**th)).incidents


def steps_of(incs, metric=None):
    return {i.step for i in incs if metric is None or i.metric == metric}


def near(steps, target, tol=3):
    return any(abs(s - target) <= tol for s in steps)


@pytest.mark.slow
def test_index_spikes_are_found(real_runs):
    assert near(steps_of(incidents(real_runs, "bloom-tr11-176B-chronicles")), 31219)
    tr8 = incidents(real_runs, "bloom-tr8-104B-chronicles")
    assert near(steps_of(tr8), 7010) and near(steps_of(tr8), 8741) and near(steps_of(tr8), 6930, 10)
    assert near(steps_of(tr8, "loss_scale"), 9026)       # 65536 -> 8192 across a gap in the log
    tr1 = incidents(real_runs, "bloom-tr1-13B-chronicles")
    assert near(steps_of(tr1), 29050) and any("loss_scale cascade" in r for i in tr1 for r in i.related)
    tr8b = incidents(real_runs, "bloom-tr8b-104B-chronicles")
    hit = [i for i in tr8b if abs(i.step - 17062) <= 2]
    assert hit and hit[0].hypotheses[0].pattern == "fp16-overflow"
    llmc = steps_of(incidents(real_runs, "llmc-modded-nanogpt-llmc"), "grad_norm")
    assert near(llmc, 7435) and near(llmc, 9025)
    star = steps_of(incidents(real_runs, "hf-trainer-star-gnspikes"), "grad_norm")
    assert {4700, 10600, 22360, 33900, 34060, 35440, 36000, 37700} <= star
    for run in ("modded-nanogpt-muon", "modded-nanogpt-soap"):
        found = steps_of(incidents(real_runs, run), "loss")
        assert {919, 947, 5335} <= found, run


def test_data_order_spikes_line_up_across_optimizers(real_runs):
    muon = steps_of(incidents(real_runs, "modded-nanogpt-muon"), "loss")
    soap = steps_of(incidents(real_runs, "modded-nanogpt-soap"), "loss")
    assert len(muon & soap) >= 0.5 * min(len(muon), len(soap))


def test_against_the_other_optimizer_the_shared_spikes_point_at_the_data(real_runs):
    muon = read_run(real_runs / "modded-nanogpt-muon")
    plain = {i.step: i for i in analyze(muon).incidents}
    crossed = {i.step: i for i in analyze(muon, against=[read_run(real_runs / "modded-nanogpt-soap")]).incidents}
    for step in (919, 947, 5335):           # INDEX: the same steps spike with SOAP
        top = crossed[step].hypotheses[0]
        assert top.pattern == "long-tail-token" and crossed[step].confidence == "high"
        assert any(f"modded-nanogpt-soap spikes at step {step} too" in o.observation for o in top.supported_by)
        assert top.score > next(h.score for h in plain[step].hypotheses if h.pattern == "long-tail-token")
    # SOAP stops at step 6000: past it, nothing is claimed either way
    assert not any("soap" in o.observation for h in crossed[6127].hypotheses
                   for o in h.supported_by + h.contradicted_by)


def two_runs(tmp_path):
    """Run a spikes at 300 and 600; run b, over the same data, at 300 only; run c stops at 500."""
    rng = np.random.default_rng(3)
    out = []
    for name, spikes, last in (("a", (300, 600), 900), ("b", (300,), 900), ("c", (300,), 500)):
        loss = 3.0 + 0.02 * rng.standard_normal(last)
        for s in spikes:
            loss[s] = 5.0
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.csv").write_text(
            "step,loss\n" + "".join(f"{s},{v:.5f}\n" for s, v in enumerate(loss)))
        out.append(read_run(tmp_path / name))
    return out


def test_a_spike_shared_with_a_run_over_the_same_data_supports_the_data(tmp_path):
    a, b, c = two_runs(tmp_path)
    by_step = {i.step: i for i in analyze(a, against=[b, c]).incidents}
    hyps = {h.pattern: h for h in by_step[300].hypotheses}
    said = [o.observation for o in hyps["long-tail-token"].supported_by]
    assert any(t.startswith("b spikes at step 300 too") for t in said)
    assert any(t.startswith("c spikes at step 300 too") for t in said)
    assert any("not this run's restart" in o.observation for o in hyps["optimizer-reset"].contradicted_by)
    assert by_step[300].hypotheses[0].pattern == "long-tail-token"
    lonely = {h.pattern: h for h in by_step[600].hypotheses}["long-tail-token"]
    against = [o.observation for o in lonely.contradicted_by]
    assert against == ["b, over the same data, does not spike here"]     # c never got to 600
    alone = {i.step: i for i in analyze(a).incidents}
    assert hyps["long-tail-token"].score > {h.pattern: h for h in alone[300].hypotheses}["long-tail-token"].score


@pytest.mark.parametrize("name", ["deepspeed-chat-sft-opt1.3b", "megatron-deepspeed-moe-0.125B",
                                  "hf-trainer-tinyllama-evalrows", "hf-trainer-viz-evalrows",
                                  "hf-trainer-cpt-predictrows", "hf-trainer-tb-serial-lain",
                                  "deepspeed-chat-rlhf-opt1.3b"])
def test_benign_runs_have_no_incident(real_runs, name):
    assert incidents(real_runs, name) == []


def write(tmp_path, rows):
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return read_run(tmp_path)


def noisy(n, seed=0):
    rng = np.random.default_rng(seed)
    return 3.0 + 0.02 * rng.standard_normal(n)


def test_nan_never_poisons_a_window(tmp_path):
    loss = noisy(300)
    rows = [{"step": s, "loss": float(v)} for s, v in enumerate(loss)]
    rows[150]["loss"] = float("nan")
    rows[200]["loss"] = 4.0
    incs = analyze(write(tmp_path, rows)).incidents
    assert [(i.kind, i.step) for i in incs] == [("nan", 150), ("spike", 200)]


def test_windows_are_in_steps_for_a_sparse_log(tmp_path):
    loss = noisy(300)
    loss[200] = 4.0
    rows = [{"step": s * 20, "loss": float(v)} for s, v in enumerate(loss)]   # every 20 steps
    incs = analyze(write(tmp_path, rows)).incidents
    assert [(i.kind, i.step) for i in incs] == [("spike", 4000)]


def test_relative_magnitudes(tmp_path):
    # an fp16 run whose grad norm is normally 1e5 has no spike; a jump to 1e6 is one
    rng = np.random.default_rng(1)
    gn = 1e5 * np.exp(0.1 * rng.standard_normal(300))
    gn[250] = 1e6
    rows = [{"step": s, "loss": float(v), "grad_norm": float(g)} for s, (v, g) in enumerate(zip(noisy(300), gn))]
    incs = analyze(write(tmp_path, rows)).incidents
    assert [(i.metric, i.step) for i in incs] == [("grad_norm", 250)]


def test_loss_zero_beside_nan_grad_norm_is_flagged(tmp_path):
    rows = [{"step": s, "loss": float(v), "grad_norm": 1.0} for s, v in enumerate(noisy(100))]
    rows[60] = {"step": 60, "loss": 0.0, "grad_norm": float("nan")}
    incs = analyze(write(tmp_path, rows)).incidents
    assert [(i.kind, i.step) for i in incs] == [("nan", 60)]


def test_eval_rows_never_count_as_train_spikes(tmp_path):
    rows = [{"step": s, "loss": float(v)} for s, v in enumerate(noisy(300))]
    for s in range(0, 300, 50):
        rows[s]["val_loss"] = 9.0 if s == 250 else 3.1
    assert analyze(write(tmp_path, rows)).incidents == []


def test_thresholds_are_overridable(tmp_path):
    loss = noisy(300)
    loss[200] = 3.3
    rows = [{"step": s, "loss": float(v)} for s, v in enumerate(loss)]
    log = write(tmp_path, rows)
    assert analyze(log).incidents
    assert analyze(log, Thresholds(spike_sigma=50)).incidents == []
    checks = {c.id: c for c in analyze(log, Thresholds(spike_sigma=50)).checks}
    assert "spike_sigma=50" in checks["B2"].threshold


def test_thin_evidence_says_low_confidence(tmp_path):
    loss = noisy(300)
    loss[200] = 3.5
    log = write(tmp_path, [{"step": s, "loss": float(v)} for s, v in enumerate(loss)])
    [inc] = analyze(log).incidents
    assert inc.confidence == "low"


def test_every_node_has_an_outcome_and_a_reason(real_runs):
    result = analyze(read_run(real_runs / "wandb-alpaca-9am288wn"))
    ids = [c.id for c in result.checks]
    assert ids[:2] == ["A1", "A2"] and "B4.3" in ids
    for c in result.checks:
        assert c.status in ("pass", "fail", "skipped") and c.detail
        if c.status == "fail":
            assert c.leaf
    # a fine-tune of LLaMA-7B (its config.yaml gives the vocab): 4.47 at step 1 is far below ln 32000
    a1 = next(c for c in result.checks if c.id == "A1")
    assert a1.status == "skipped" and "trained model" in a1.detail


@pytest.mark.slow
def test_human_output_fits_100_columns(tmp_path):
    """In a 100-column terminal (a pipe keeps each line whole instead: tests/cli/test_cli_help.py)."""
    import os
    import pty
    import re
    import select
    import sys
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(COLUMNS="100", LINES="40", TERM="xterm")
        try:
            os.execv(sys.executable, [sys.executable, "-m", "postmortem", "analyze",
                                      str(ROOT / "sample_runs" / "optimizer-reset")])
        finally:
            os._exit(127)         # never back into pytest in the child
    out = b""
    while select.select([fd], [], [], 60)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:           # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    # a carriage return takes the terminal back to column 0 (the progress spinner redraws its
    # line so): each stretch between returns is what one line of the screen holds
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode()).replace("\r\n", "\n")
    assert max(len(part) for line in text.splitlines() for part in line.split("\r")) <= 100
    text = text.replace("\r", "")
    assert "optimizer-reset" in text and "checklist B, how it trained" in text
