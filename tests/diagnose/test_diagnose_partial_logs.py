"""The diagnosis on logs of unusual shapes: a divergence that peaks before the log ends, a
log that starts late, a val loss far from the train losses of long ago, a dead gradient,
a sparse log's neighbours, a loss scale logged far apart, and restarts that are resumes."""

from pathlib import Path

import numpy as np
import pytest
from test_diagnose_cases import checks, write

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run

# --- 1. a divergence's peak is where its highest loss is ------------------------------

def test_a_divergence_that_peaks_then_anneals_names_the_step_of_its_peak(tmp_path):
    rng = np.random.default_rng(0)
    steps = np.arange(1500)
    level = np.where(steps < 400, 3.0, np.where(steps < 900, 3.0 + 3.0 * (steps - 400) / 500,
                                                 6.0 - 1.0 * (steps - 900) / 600))
    loss = level + 0.02 * rng.standard_normal(len(steps))
    [inc] = [i for i in analyze(write(tmp_path, [{"step": int(s), "loss": float(v)}
                                                 for s, v in zip(steps, loss)])).incidents
             if i.kind == "divergence"]
    assert inc.symptoms.peak_loss == pytest.approx(loss.max())
    assert inc.symptoms.peak_step == int(steps[np.argmax(loss)])
    assert inc.symptoms.peak_step < 1499


def test_the_wordlm_divergence_peaks_at_step_11349_not_at_the_last_step(real_runs):
    # (the climb of epochs 1-2 came back by epoch 4: a divergence of its own, before this one)
    [inc] = [i for i in analyze(read_run(real_runs / "pytorch-wordlm-rnntanh-diverge-anneal")).incidents
             if i.kind == "divergence" and i.step > 9149]
    assert inc.symptoms.peak_loss == pytest.approx(17.34, abs=0.01)
    assert inc.symptoms.peak_step == 11349


# --- 2. "the loss moves early" needs a log that covers the start of training ---------

def flat_rows(first: int, every: int = 1, n: int = 400, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"step": first + k * every, "loss": float(6.0 + 0.01 * rng.standard_normal())} for k in range(n)]


def test_a_flat_loss_logged_from_step_0_fails_a6(tmp_path):
    assert checks(analyze(write(tmp_path, flat_rows(0))))["A6"].status == "fail"


def test_a_log_that_starts_late_cannot_say_the_loss_moved_early(tmp_path):
    a6 = checks(analyze(write(tmp_path, flat_rows(29020, every=10))))["A6"]
    assert a6.status == "skipped" and "starts at step 29020" in a6.detail and "start of training" in a6.detail


def test_a_log_whose_first_line_is_one_interval_in_covers_the_start(tmp_path):
    """A log every 50 steps writes its first line at step 49 or 50: that is the start."""
    assert checks(analyze(write(tmp_path, flat_rows(49, every=50))))["A6"].status == "fail"


def test_bloom_13b_chronicles_from_step_29020_skips_a6(real_runs):
    a6 = checks(analyze(read_run(real_runs / "bloom-tr1-13B-chronicles")))["A6"]
    assert a6.status == "skipped" and "29020" in a6.detail


# --- 3. a val loss is compared with the train loss near it, not a stale median --------

def test_a_val_loss_is_compared_with_the_train_loss_logged_just_before_it(tmp_path):
    """A train loss logged every 500 steps falling 1.0 -> 0.008, a val at step 3100 just
    under the last train loss: no leak (the median of the whole log is far above both)."""
    rows = [{"step": s, "loss": v} for s, v in zip(range(500, 3001, 500), (1.0, 0.5, 0.1, 0.03, 0.012, 0.008))]
    rows.append({"step": 3100, "val_loss": 0.0075})
    a7 = checks(analyze(write(tmp_path, rows)))["A7"]
    assert a7.status == "pass" and "vs train 0.008 at step 3100 (the train loss at step 3000)" in a7.detail


def test_an_overfit_is_judged_on_the_last_epochs_not_the_whole_run(tmp_path):
    """Per-epoch losses: the val loss at epoch 28 against the train losses of the last few
    epochs (about 0.05), not the median of twenty epochs back to 0.4."""
    train = np.r_[np.linspace(0.8, 0.1, 20), np.linspace(0.09, 0.05, 9)]
    rows = [{"step": e, "loss": float(v), "val_loss": 0.3} for e, v in enumerate(train)]
    a7 = checks(analyze(write(tmp_path, rows)))["A7"]
    last = float(np.median(train[-5:]))
    assert a7.status == "fail" and f"vs train {last:.4g} at step 28 (the median train loss of steps 24-28)" in a7.detail


def test_the_lain_val_at_3100_is_compared_with_the_train_loss_at_3000(real_runs):
    a7 = checks(analyze(read_run(real_runs / "hf-trainer-tb-serial-lain" / "runs")))["A7"]
    assert a7.status == "pass" and "vs train 0.0081 at step 3100 (the train loss at step 3000)" in a7.detail and "leak" not in a7.detail


# --- 4. a dead gradient is no learning, never evidence of an LR too high -------------

def dead_rows(n: int = 300, clipped: bool = False) -> list[dict]:
    rng = np.random.default_rng(0)
    return [{"step": s, "loss": float(10.3 + 0.02 * rng.standard_normal()),
             "grad_norm": 5.0 if clipped else 0.0, "lr": 1e-3} for s in range(n)]


def test_a_dead_gradient_points_to_bad_init_and_is_no_evidence_of_an_lr_too_high(tmp_path):
    result = analyze(write(tmp_path, dead_rows()))
    a5 = checks(result)["A5"]
    assert a5.status == "fail" and "dead" in a5.detail and a5.leaf == "bad-init"
    for inc in result.incidents:
        for h in inc.hypotheses:
            cited = [o.observation for o in h.supported_by]
            assert (a5.detail in cited) == (h.pattern == "bad-init"), h.pattern


def test_a_gradient_always_clipped_still_points_to_lr_too_high(tmp_path):
    rows = dead_rows(clipped=True)
    a5 = checks(analyze(write(tmp_path, rows, {"config": {"clip": 1.0}})))["A5"]
    assert a5.status == "fail" and a5.leaf == "lr-too-high"


def test_the_olmo_zero_gradient_is_not_evidence_for_lr_too_high(real_runs):
    result = analyze(read_run(real_runs / "olmo-console-20m-zero-gradnorm-flatloss" / "train_fresh.log"))
    assert checks(result)["A5"].leaf == "bad-init"
    for inc in result.incidents:
        lr = next(h for h in inc.hypotheses if h.pattern == "lr-too-high")
        assert not any("dead" in o.observation for o in lr.supported_by)


def test_a_dead_gradient_is_one_fact_for_bad_init_not_two(real_runs):
    """A first grad norm of 0 in a gradient dead at every step is the dead gradient again: it
    is cited once, and bad-init, a leaf that only partly fits a graph that does not learn,
    is not claimed with high confidence on it alone."""
    result = analyze(read_run(real_runs / "olmo-console-20m-zero-gradnorm-flatloss" / "train_fresh.log"))
    assert checks(result)["A2"].status == "fail"                  # the check itself still says so
    [inc] = result.incidents
    init = next(h for h in inc.hypotheses if h.pattern == "bad-init")
    assert [o.panel for o in init.supported_by] == ["grad-norm"] and "dead" in init.supported_by[0].observation
    assert inc.confidence == "low"


# --- 5. "around the incident" is a line away on a sparse log --------------------------

def sparse_fp16_rows(every: int) -> list[dict]:
    """A line every `every` steps: the scale halves 4 times over the two lines before a NaN
    at line 7 and 5 times on the line after it."""
    scale = {5: 8192.0, 6: 4096.0, 7: 4096.0}
    rows = []
    for k in range(16):
        s = k * every
        rows.append({"step": s, "loss": float("nan") if k == 7 else 6.0 - 0.01 * k,
                     "loss_scale": scale.get(k, 65536.0 if k < 5 else 128.0)})
    return rows


def fp16_of_the_nan(result):
    [nan] = [i for i in result.incidents if i.kind == "nan"]
    return next(h for h in nan.hypotheses if h.pattern == "fp16-overflow")


def test_a_cascade_one_line_before_a_nan_of_a_sparse_log_is_around_it(tmp_path):
    fp16 = fp16_of_the_nan(analyze(write(tmp_path, sparse_fp16_rows(100), {"dtype": "fp16"})))
    assert any("65536 -> 4096 (4 halvings)" in o.observation for o in fp16.supported_by)
    assert not any("no loss-scale cascade" in o.observation for o in fp16.contradicted_by)


def test_the_chinese_transformer_xl_nan_at_700_sees_the_cascade_before_it(real_runs):
    fp16 = fp16_of_the_nan(analyze(read_run(real_runs / "issue-chinese-transformer-xl-7-lossscale-nan")))
    assert any("loss scale 64 -> 4" in o.observation for o in fp16.supported_by)
    assert not any("no loss-scale cascade" in o.observation for o in fp16.contradicted_by)


# --- 6. a fall of the loss scale across a hole in the log is no cascade ---------------

def holed_fp16_rows(cascade_at: int | None = None) -> list[dict]:
    """A scale logged every step, 65536 up to step 1000, no line from 1001 to 2999, 1024
    from step 3000 on; with `cascade_at`, a real cascade (a halving a step for 4 steps)."""
    rng = np.random.default_rng(0)
    rows = []
    for s in [*range(0, 1001), *range(3000, 4001)]:
        scale = 65536.0 if s <= 1000 else 1024.0
        if cascade_at is not None and s >= cascade_at:
            scale /= 2 ** min(s - cascade_at + 1, 4)
        rows.append({"step": s, "loss": float(3.0 + 0.02 * rng.standard_normal()), "loss_scale": scale})
    return rows


def test_a_scale_fallen_across_a_hole_in_the_log_is_no_incident_and_says_so(tmp_path):
    result = analyze(write(tmp_path, holed_fp16_rows(), {"dtype": "fp16"}))
    assert not [i for i in result.incidents if i.metric == "loss_scale"]
    b3 = checks(result)["B3"]
    assert b3.status == "pass" and "65536 -> 1024 (6 halvings) somewhere between step 1000 and step 3000" in b3.detail


def test_a_dense_cascade_beside_a_hole_is_still_one(tmp_path):
    result = analyze(write(tmp_path, holed_fp16_rows(cascade_at=3500), {"dtype": "fp16"}))
    [inc] = [i for i in result.incidents if i.metric == "loss_scale"]
    assert inc.step == 3500 and checks(result)["B3"].status == "fail"


def test_bloom_tr8b_scale_logged_2000_steps_apart_is_no_cascade(real_runs):
    result = analyze(read_run(real_runs / "bloom-tr8b-104B-chronicles"))
    assert not [i for i in result.incidents if i.step == 14000]
    assert "somewhere between step 12001 and step 14000" in checks(result)["B3"].detail


def test_a_cascade_of_a_sparse_log_says_between_which_lines_it_fell(tmp_path):
    fp16 = fp16_of_the_nan(analyze(write(tmp_path, sparse_fp16_rows(100), {"dtype": "fp16"})))
    assert any("between the lines at step 400 and step 600" in o.observation for o in fp16.supported_by)


def test_a_scale_still_falling_on_the_lines_after_a_hole_is_a_low_confidence_cascade(tmp_path):
    rows = holed_fp16_rows()
    for r in rows:               # after the hole: 4096 on the first line, then halving twice more
        if r["step"] >= 3000:
            r["loss_scale"] = {3000: 4096.0, 3001: 2048.0}.get(r["step"], 1024.0)
    [inc] = [i for i in analyze(write(tmp_path, rows, {"dtype": "fp16"})).incidents if i.metric == "loss_scale"]
    assert inc.step == 3000 and inc.confidence == "low"
    fp16 = next(h for h in inc.hypotheses if h.pattern == "fp16-overflow")
    assert any("between the lines at step 1000 and step 3002" in o.observation for o in fp16.supported_by)


# --- 7. a restart says how it shows, and the list names each or says how many more ----

def test_restarts_name_where_the_steps_went_back_from_and_count_the_rest(tmp_path):
    steps = [*range(0, 100), *range(90, 120), *range(110, 130), *range(125, 140), *range(135, 150), *range(140, 200)]
    rows = [{"step": s, "loss": 3.0} for s in steps]
    b0 = checks(analyze(write(tmp_path, rows)))["B0"]
    assert b0.detail.startswith("5 restart(s): step 90 (steps went back from 99 to 90), step 110 (steps went "
                                "back from 119 to 110)")
    assert b0.detail.endswith(" and 1 more")


def test_a_lightning_run_resumed_in_a_new_version_directory_says_so(real_runs):
    b0 = checks(analyze(read_run(real_runs / "lightning-slm-training")))["B0"]
    assert "step 140749 (resumed in a new log, version_5: steps carry on from 140739)" in b0.detail
    assert "went back" not in b0.detail


def test_the_mae_log_names_its_five_restarts(real_runs):
    b0 = checks(analyze(read_run(real_runs / "mae-logtxt-pretrain-resumes")))["B0"]
    assert b0.detail.startswith("5 restart(s): step 561 (steps went back from 569 to 561)")
    assert "from 634 to 621" in b0.detail and b0.detail.endswith("and 1 more")


def test_a_val_loss_is_compared_with_the_train_loss_of_its_own_segment(tmp_path):
    rows = [{"step": s, "loss": 2.0} for s in range(0, 301)] + [{"step": 300, "val_loss": 2.1}]
    rows += [{"step": s, "loss": 5.0} for s in range(250, 401)]          # a restart from step 250
    a7 = checks(analyze(write(tmp_path, rows)))["A7"]
    assert a7.status == "pass" and "vs train 2 at step 300 (the median train loss of steps 296-300)" in a7.detail


def test_bad_init_still_cites_the_weight_norm_growth_of_a8():
    """Only A5 is filtered by its leaf: A8 (leaf weight-decay) stays evidence of bad-init."""
    result = analyze(read_run(Path(__file__).resolve().parents[2] / "sample_runs" / "schedule-misconfigured"))
    a8 = checks(result)["A8"]
    assert a8.status == "fail"
    [div] = [i for i in result.incidents if i.kind == "divergence"]
    bad_init = next(h for h in div.hypotheses if h.pattern == "bad-init")
    assert a8.detail in [o.observation for o in bad_init.supported_by]
