"""Issue 25: facts from the log over defaults, 'cannot tell' where a log is too short, the
incident dated at its onset, a divergence with causes, similar incidents by kind. Logs
written here with numpy noise (several seeds and noise levels) and real logs."""

import json
from pathlib import Path

import numpy as np
import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.diagnose.signature import Signature, of_incident
from postmortem.diagnose.thresholds import Thresholds
from postmortem.kb.similar import compare
from postmortem.run import read_run

REAL = Path(__file__).resolve().parents[3] / "shared" / "real_runs"


def jsonl(path: Path, rows: list[dict], manifest: dict | None = None):
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if manifest:
        (path / "manifest.json").write_text(json.dumps(manifest))
    return read_run(path)


def check(analysis, cid):
    return next(c for c in analysis.checks if c.id == cid)


def curve(n, seed, noise, start=4.0, floor=2.0, tau=40.0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return floor + (start - floor) * np.exp(-t / tau) + noise * rng.standard_normal(n)


@pytest.mark.skipif(not REAL.exists(), reason="needs ../shared/real_runs")
def test_gpt2_124m_first_grad_norm_is_judged_against_its_size():
    """build-nanogpt's GPT-2 124M starts at grad norm ~15: normal for 124M parameters."""
    a = analyze(read_run(REAL / "buildnanogpt-stdout-124m-gnspikes"))
    a2 = check(a, "A2")
    assert a2.status == "pass" and "124.4M parameters" in a2.detail and "124,354,560 parameters" in a2.detail


def test_an_unknown_size_is_said_assumed_and_set_changes_the_bound_and_its_text(tmp_path):
    rows = [{"step": s, "loss": float(v), "grad_norm": 15.0 if s == 0 else 1.0}
            for s, v in enumerate(curve(120, 0, 0.02))]
    log = jsonl(tmp_path, rows)
    a2 = check(analyze(log), "A2")
    assert a2.status == "skipped" and "cannot tell" in a2.detail and "at most 10M parameters" in a2.detail
    # beyond the largest model's bound, the size does not matter
    huge = jsonl(tmp_path / "huge", [{**r, "grad_norm": 5000.0} if r["step"] == 0 else r for r in rows])
    assert check(analyze(huge), "A2").status == "fail"
    # the manifest's shape (12 layers of 768) is a 85M-parameter model: 15 is in range
    big = jsonl(tmp_path / "big", rows, {"config": {"n_layer": 12, "n_embd": 768}})
    a2 = check(analyze(big), "A2")
    assert a2.status == "pass" and "12 x 12 layers x d_model 768^2" in a2.detail
    # --set: the bound moves, and the question and the threshold say the one in force
    a2 = check(analyze(log, Thresholds(first_grad_norm_max=20.0)), "A2")
    assert a2.status == "pass" and "0.1 to 20 at" in a2.question and "first_grad_norm_max=20.0" in a2.threshold
    a2 = check(analyze(big, Thresholds(first_grad_norm_params=1e9)), "A2")
    assert a2.status == "fail" and "1e+09" in a2.question


def test_the_dtype_every_line_prints_is_the_runs_dtype_and_says_where(tmp_path):
    losses = curve(60, 1, 0.03, start=10.8, floor=6.0)
    text = "".join(f"step {s} | loss {v:.4f} | lr 3.0e-04 | norm 1.25 | bf16\n" for s, v in enumerate(losses))
    (tmp_path / "train.log").write_text(text)
    a = analyze(read_run(tmp_path / "train.log"))
    assert a.run.dtype == "bf16"
    from postmortem.diagnose.context import Context
    assert Context(read_run(tmp_path / "train.log")).facts.read_from["dtype"] == "train.log: its lines say bf16"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_rise_with_two_steps_before_it_cannot_be_judged_and_says_so(tmp_path, seed):
    loss = curve(60, seed, 0.02)
    loss[2] *= 3.5
    a = analyze(jsonl(tmp_path, [{"step": s, "loss": float(v)} for s, v in enumerate(loss)]))
    b2 = check(a, "B2")
    assert b2.status == "skipped" and "step 2 with 2 step(s) before it, needs 3" in b2.detail
    # the same rise with three before it is judged, and found
    loss = curve(60, seed, 0.02)
    loss[3] *= 3.5
    a = analyze(jsonl(tmp_path / "three", [{"step": s, "loss": float(v)} for s, v in enumerate(loss)]))
    assert check(a, "B2").status == "fail" and [i.step for i in a.incidents][:1] == [3]


@pytest.mark.parametrize("seed,noise", [(0, 0.01), (1, 0.03), (2, 0.05)])
def test_an_lr_jump_dates_the_incident_at_itself(tmp_path, seed, noise):
    """The loss climbs from the step after the LR jump; the incident is the jump's step, and
    the Symptoms say the same step."""
    n, at = 400, 250
    loss = curve(n, seed, noise, tau=60)
    lr = np.full(n, 1e-3)
    lr[at:at + 8] = 3e-2
    rise = np.r_[np.zeros(at + 1), np.minimum(np.arange(1, n - at), 6) * 0.35]
    rise[at + 12:] *= np.exp(-np.arange(n - at - 12) / 10)
    rows = [{"step": s, "loss": float(loss[s] + rise[s]), "lr": float(lr[s]), "grad_norm": 1.0}
            for s in range(n)]
    a = analyze(jsonl(tmp_path, rows))
    [inc] = a.incidents
    assert inc.step == at and inc.symptoms.spike_step == at
    assert inc.hypotheses[0].pattern == "lr-discontinuity"


@pytest.mark.parametrize("seed", [0, 1])
def test_a_cascade_before_the_blow_up_dates_the_incident(tmp_path, seed):
    n, at = 400, 250
    loss = curve(n, seed, 0.02, tau=60)
    scale = np.full(n, 65536.0)
    skipped = np.zeros(n, dtype=int)
    for k in range(6):                     # six halvings from step 250, the loss up from 254
        scale[at + k + 1:] /= 2
        skipped[at + k] = 1
    loss[at + 4:at + 9] += 3.0
    rows = [{"step": s, "loss": float(loss[s]), "loss_scale": float(scale[s]), "skipped": int(skipped[s])}
            for s in range(n)]
    a = analyze(jsonl(tmp_path, rows, {"dtype": "fp16"}))
    [inc] = a.incidents
    assert inc.step == at and inc.hypotheses[0].pattern == "fp16-overflow"


@pytest.mark.parametrize("seed", [0, 1])
def test_a_blow_up_that_stays_is_a_divergence_with_its_grad_norm_jump_weighed(tmp_path, seed):
    n, at = 400, 250
    loss = curve(n, seed, 0.02, tau=60)
    loss[at:] += 2.5                         # up at once, never back
    gn = np.ones(n)
    gn[at - 1:at + 3] = 40.0
    rows = [{"step": s, "loss": float(loss[s]), "grad_norm": float(gn[s]), "lr": 1e-3} for s in range(n)]
    [inc] = analyze(jsonl(tmp_path, rows)).incidents
    assert inc.kind == "divergence"
    lr_high = next(h for h in inc.hypotheses if h.pattern == "lr-too-high")
    assert lr_high.score > 0 and any("40x its rolling mean" in o.observation or "grad norm 40" in o.observation
                                     for o in lr_high.supported_by)


def test_similar_weighs_the_kind_before_the_dtype_and_the_phase():
    mine = Signature(pattern="numerics", kind="nan", dtype="fp32", phase="mid")
    past_nan = Signature(pattern="fp16-overflow", kind="nan", dtype="fp16", phase="late")
    past_spike = Signature(pattern="long-tail-token", kind="spike", dtype="fp32", phase="mid")
    assert compare(mine, past_nan)[0] > compare(mine, past_spike)[0]
    assert "kind: match (nan vs nan)" in compare(mine, past_nan)[1]


def test_an_incidents_signature_carries_its_kind(tmp_path):
    loss = curve(300, 0, 0.02)
    loss[200] = float("nan")
    a = analyze(jsonl(tmp_path, [{"step": s, "loss": float(v)} for s, v in enumerate(loss)]))
    assert of_incident(a.incidents[0]).kind == "nan"


@pytest.mark.skipif(not REAL.exists(), reason="needs ../shared/real_runs")
def test_the_deepspeed_chat_sawtooth_stays_routine_and_is_called_dynamic():
    a = analyze(read_run(REAL / "deepspeed-chat-sft-opt1.3b"))
    b3 = check(a, "B3")
    assert a.incidents == [] and b3.status == "pass" and "dynamic loss scaling" in b3.detail


@pytest.mark.parametrize("seed,gap", [(0, 11), (1, 9)])
def test_two_probes_close_together_are_two_probes_not_a_cascade(tmp_path, seed, gap):
    """A skipped step whose grad norm is logged inf is one skip (counted once), and a probe
    just before a real cascade does not date it."""
    n = 300
    loss = curve(n, seed, 0.02)
    scale = np.full(n, 2.0 ** 20)
    gn = np.ones(n)
    skipped = np.zeros(n, dtype=int)
    for at in (200, 200 + gap):
        skipped[at], gn[at] = 1, np.inf
        scale[at + 1:] /= 2
    rows = [{"step": s, "loss": float(loss[s]), "grad_norm": float(gn[s]), "loss_scale": float(scale[s]),
             "skipped": int(skipped[s])} for s in range(n)]
    a = analyze(jsonl(tmp_path, rows, {"dtype": "fp16"}))
    assert a.incidents == [] and "routine probe" in check(a, "B3").detail
    for k in range(6):                      # a real cascade from step 250, a probe at 246
        skipped[250 + k], gn[250 + k] = 1, np.inf
        scale[251 + k:] /= 2
    skipped[246], gn[246] = 1, np.inf
    scale[247:] /= 2
    rows = [{"step": s, "loss": float(loss[s]), "grad_norm": float(gn[s]), "loss_scale": float(scale[s]),
             "skipped": int(skipped[s])} for s in range(n)]
    [inc] = analyze(jsonl(tmp_path / "cascade", rows, {"dtype": "fp16"})).incidents
    assert inc.step == 250 and inc.shown_kind == "cascade"


@pytest.mark.parametrize("seed", [0, 1])
def test_spikes_while_a_blow_up_stays_up_are_that_divergence_not_new_incidents(tmp_path, seed):
    n = 600
    loss = curve(n, seed, 0.02, tau=60)
    loss[250:400] += 2.5                    # up at 250, back at 400
    loss[280] += 4.0
    loss[320] += 6.0                        # jumps on the way, the loss never back between
    loss[500] += 3.0                        # after it came back: an incident of its own
    gn = np.ones(n)
    gn[330] = 60.0
    rows = [{"step": s, "loss": float(loss[s]), "grad_norm": float(gn[s])} for s in range(n)]
    incs = analyze(jsonl(tmp_path, rows)).incidents
    assert [(i.kind, i.step) for i in incs] == [("divergence", 250), ("spike", 500)]
    assert {"spike at step 280", "spike at step 320", "grad_norm spike at step 330"} <= set(incs[0].related)


def test_related_events_are_kept_typed_beside_their_words_and_the_signature_reads_them(tmp_path):
    """`related` says the merged events in words, `related_events` holds them as numbers,
    one for one; the signature's grad lead reads the numbers, never the words."""
    n = 600
    loss = curve(n, 0, 0.02, tau=60)
    loss[250:400] += 2.5
    loss[280] += 4.0
    gn = np.ones(n)
    gn[240] = 60.0                          # the grad norm leads the loss by 10 steps
    rows = [{"step": s, "loss": float(loss[s]), "grad_norm": float(gn[s])} for s in range(n)]
    inc = analyze(jsonl(tmp_path, rows)).incidents[0]
    typed = [(r.kind, r.metric, r.step) for r in inc.related_events]
    assert ("spike", "grad_norm", 240) in typed and ("spike", "loss", 280) in typed, typed
    assert len(inc.related) == len(inc.related_events)
    for said, r in zip(inc.related, inc.related_events):
        assert said in (f"{r.kind} at step {r.step}", f"{r.metric} {r.kind} at step {r.step}")
    assert of_incident(inc).grad_lead == inc.step - 240 == 10
    assert of_incident(inc.model_copy(update={"related": []})).grad_lead == 10      # the words are not read
    assert of_incident(inc.model_copy(update={"related_events": []})).grad_lead is None
