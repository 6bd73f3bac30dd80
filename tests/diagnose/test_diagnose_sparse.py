"""Issue 25, the families the blind check on pasted logs named: a blow-up on a sparse or
short log is one divergence (judged in logging intervals), a NaN leads what it merges
with, and a spike with too little before it cannot be told. Synthetic runs written as
real metrics.jsonl files and read back."""

import json
from pathlib import Path

import numpy as np

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run


def write(path: Path, rows: list[dict]):
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return analyze(read_run(path))


def checks(result) -> dict:
    return {c.id: c for c in result.checks}


def test_a_short_log_that_blows_up_and_stays_up_is_one_divergence(tmp_path):
    """7 rows, logged every 100 steps: loss x3 from row 4 and staying is one incident (its
    later points inside it), not three spikes; no LR logged, so lr-too-high scores nothing
    on the blow-up alone and says why."""
    rows = [{"step": 100 * k, "loss": v} for k, v in enumerate([2.1, 2.0, 1.95, 1.9, 6.5, 6.8, 7.0])]
    result = write(tmp_path, rows)
    assert [(i.kind, i.step) for i in result.incidents] == [("divergence", 400)]
    assert result.incidents[0].related == ["spike at step 500", "spike at step 600"]
    lr = next(h for h in result.incidents[0].hypotheses if h.pattern == "lr-too-high")
    assert lr.score == 0.0 and any("no LR logged" in c.observation for c in lr.contradicted_by)


def test_a_sparse_spike_that_comes_back_within_a_few_lines_stays_a_spike(tmp_path):
    """Every 100 steps: up one line, back on the next (100 steps later, past 50 steps but
    within a few logged points): a spike, not a divergence."""
    rng = np.random.default_rng(3)
    loss = 3.0 + 0.02 * rng.standard_normal(40)
    loss[25] = 6.0
    result = write(tmp_path, [{"step": 100 * k, "loss": float(v)} for k, v in enumerate(loss)])
    assert [(i.kind, i.step) for i in result.incidents] == [("spike", 2500)]


def test_a_grad_norm_jump_the_row_before_a_sparse_blow_up_scores_lr_too_high(tmp_path):
    """fairseq-like: 7 rows every 1000 updates, the grad norm 2.7 -> 1e5 one row before the
    loss leaves, the LR logged: the grad jump joins the divergence and lr-too-high leads
    (a loss that stays up is no single batch: long-tail-token below it)."""
    loss = [9.1, 8.0, 7.4, 7.0, 6.9, 21.0, 22.5]
    gn = [2.6, 2.8, 2.7, 2.75, 100615.0, 9e4, 8e4]
    rows = [{"step": 1000 * k, "loss": v, "lr": 1.25, "gnorm": g} for k, (v, g) in enumerate(zip(loss, gn))]
    result = write(tmp_path, rows)
    assert [(i.kind, i.metric, i.step) for i in result.incidents] == [("divergence", "loss", 5000)]
    assert "grad_norm spike at step 4000" in result.incidents[0].related
    top = result.incidents[0].hypotheses[0]
    assert top.pattern == "lr-too-high" and top.score > 0.3
    assert any("grad norm" in s.observation for s in top.supported_by)


def test_a_nan_leads_the_noise_spike_just_before_it(tmp_path):
    """5 finite rows then NaN on every row: the incident is the NaN; the rise at row 2 (two
    points before it) cannot be told, and says so."""
    rows = [{"step": k, "loss": v} for k, v in enumerate([1.0, 1.109, 1.537, 1.2, 1.1, 1.05])]
    rows += [{"step": k, "loss": float("nan")} for k in range(6, 15)]
    result = write(tmp_path, rows)
    assert [(i.kind, i.step) for i in result.incidents] == [("nan", 6)]
    assert checks(result)["B2"].status == "skipped" and "cannot tell" in checks(result)["B2"].detail


def test_a_nan_right_after_a_real_spike_is_the_incident_with_the_spike_in_it(tmp_path):
    """A judged spike (a long calm history) and a NaN 4 steps later: one incident, the NaN's,
    the spike named in it."""
    rng = np.random.default_rng(5)
    rows = [{"step": k, "loss": float(3.0 + 0.02 * rng.standard_normal())} for k in range(100)]
    rows[95]["loss"] = 6.0
    rows += [{"step": k, "loss": float("nan")} for k in range(99, 103)]
    rows = [r for r in rows if r["step"] != 99 or r["loss"] != r["loss"]]
    result = write(tmp_path, sorted(rows, key=lambda r: r["step"]))
    assert [(i.kind, i.step) for i in result.incidents] == [("nan", 99)]
    assert "spike at step 95" in result.incidents[0].related[0]


# --- loss-scale start-up vs cascade ---------------------------------------------------------

def test_halvings_from_far_below_any_initial_scale_on_the_first_steps_are_a_cascade(tmp_path):
    """A start-up search begins at a scaler's initial scale (2^7..2^32) and falls from there;
    64 -> 2 in five halvings on the first steps is a cascade. The same count of halvings from
    65536 is the start-up search, not an incident."""
    rng = np.random.default_rng(2)
    low = [64, 32, 16, 8, 4, 2, 2, 2]
    rows = [{"step": k, "loss": float(2.5 + 0.02 * rng.standard_normal()), "loss_scale": s} for k, s in enumerate(low)]
    result = write(tmp_path / "low", rows)
    assert checks(result)["B3"].status == "fail"
    assert [(i.metric, i.step) for i in result.incidents] == [("loss_scale", 1)]
    high = [65536, 32768, 16384, 8192, 4096, 4096, 4096, 4096]
    rows = [{**r, "loss_scale": s} for r, s in zip(rows, high)]
    result = write(tmp_path / "high", rows)
    assert checks(result)["B3"].status == "pass" and result.incidents == []


def test_a_nan_grad_norm_under_a_constant_scale_of_one_and_no_skips_is_a_nan_not_a_floor_overflow(tmp_path):
    """Megatron's bf16 print: `loss scale: 1.0` on every line, `number of skipped iterations:
    0`, then `grad norm: nan` on three lines. Dynamic scaling is not engaged; the incident is
    a NaN of the grad norm, and B3 does not call it persistent overflow at the floor."""
    rows = [{"step": 10 * k, "loss": 2.5 - 0.01 * k, "loss_scale": 1.0, "skipped": 0, "grad_norm": 0.8 + 0.01 * k}
            for k in range(1, 30)]
    for k in (20, 21, 22):
        rows[k]["grad_norm"] = float("nan")
    result = write(tmp_path, rows)
    b3 = checks(result)["B3"]
    assert b3.status != "fail" and "not engaged" in b3.detail and "floor" not in b3.detail
    assert [(i.kind, i.metric, i.step) for i in result.incidents] == [("nan", "grad_norm", 210)]


def test_a_blow_up_that_ends_non_finite_stays_the_divergence(tmp_path):
    """fairseq-like, every 1000 updates: the loss leaves at 5000, stays up and overflows to
    inf at 7000: one divergence from 5000 (the inf inside it), not a NaN at 7000."""
    loss = [9.5, 8.6, 7.5, 6.9, 1.0e4, 4.8e9, float("inf")]
    result = write(tmp_path, [{"step": 1000 * (k + 1), "loss": v} for k, v in enumerate(loss)])
    assert [(i.kind, i.step) for i in result.incidents] == [("divergence", 5000)]
    assert "nan at step 7000" in result.incidents[0].related


def test_a_scale_that_never_moves_with_no_skips_is_no_sign_of_fp16(tmp_path):
    """The same bf16-style log: fp16-overflow gets no support from the scale column (it is
    said against it, with why)."""
    rows = [{"step": 10 * k, "loss": 2.5 - 0.01 * k, "loss_scale": 1.0, "skipped": 0, "grad_norm": 0.8 + 0.01 * k}
            for k in range(1, 30)]
    rows[20]["grad_norm"] = float("nan")
    fp16 = next(h for h in write(tmp_path, rows).incidents[0].hypotheses if h.pattern == "fp16-overflow")
    assert not any("loss scaler is at work" in o.observation for o in fp16.supported_by)
    assert any("no loss scaler at work" in o.observation for o in fp16.contradicted_by)


def test_two_halvings_on_consecutive_steps_while_the_loss_triples_are_a_cascade(tmp_path):
    """128 -> 32 on two consecutive steps mid-run with the loss 1.3 -> 4.3: a cascade (B3
    fails), not two routine probes; the same two halvings with the loss calm stay probes."""
    rng = np.random.default_rng(4)
    rows = [{"step": k, "loss": float(1.3 + 0.02 * rng.standard_normal()), "loss_scale": 128.0} for k in range(100, 200)]
    for r in rows:
        if r["step"] == 160:
            r["loss_scale"] = 64.0
        if r["step"] >= 161:
            r["loss_scale"] = 32.0
    calm = write(tmp_path / "calm", rows)
    assert checks(calm)["B3"].status != "fail"
    for r in rows:
        if 161 <= r["step"] <= 163:
            r["loss"] = 4.3
    result = write(tmp_path / "jump", rows)
    assert checks(result)["B3"].status == "fail"
    assert any(i.metric == "loss_scale" or "loss_scale cascade" in " ".join(i.related) for i in result.incidents)
