"""The accuracy benchmark's second trainer, its log writers, its labels and its scorer."""

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy"))

import formats  # noqa: E402
import synthetic  # noqa: E402
from run import match  # noqa: E402
from trainer2 import VOCAB, Spec, applied_lr, scheduled_lr, train  # noqa: E402

from postmortem.run import read_run  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")     # conftest: torch on one thread


SMALL = Spec(steps=120, batch=64, hidden=64, warmup=10, eval_every=40)


@pytest.fixture(scope="module")
def healthy():
    return train(SMALL)


def losses(result):
    return np.array([r["loss"] for r in result.records])


@pytest.mark.slow
def test_healthy_run_learns(healthy):
    loss = losses(healthy)
    assert loss[0] == pytest.approx(math.log(VOCAB), abs=0.15)      # uniform at the start
    assert loss[-20:].mean() < loss[:5].mean() - 1.0
    assert all(math.isfinite(r["grad_norm"]) for r in healthy.records)
    assert healthy.records[0]["val_loss"] > healthy.records[-1]["val_loss"]


@pytest.mark.slow
def test_gradscaler_probes_are_isolated_skips_that_halve_the_scale():
    # Start near the ceiling so the routine probes come within a short run.
    r = train(replace(SMALL, dtype="fp16", init_scale=2.0 ** 18, growth_interval=10, steps=90))
    rec = r.records
    skips = [i for i, x in enumerate(rec) if x["skipped"]]
    probes = synthetic.probes(rec)
    assert len(probes) >= 2 and set(probes) <= set(skips)
    for i in probes:
        assert not math.isfinite(rec[i]["grad_norm"]) and math.isfinite(rec[i]["loss"])
        assert rec[i + 1]["loss_scale"] == rec[i]["loss_scale"] / 2
    # the scaler's probe: the scale doubles after `growth_interval` clean steps, the next overflows
    assert any(rec[i]["loss_scale"] == 2 * rec[i - 1]["loss_scale"] for i in probes)


@pytest.mark.slow
def test_overflow_cascade_is_several_skips_in_a_row_and_the_loss_jumps():
    spec = replace(SMALL, kind="fp16-overflow", dtype="fp16", optimizer="sgd", lr=0.3, min_lr=0.03,
                   at=80, length=12, factor=1.0, growth_interval=1000)
    rec = train(spec).records
    sk = [x["skipped"] for x in rec]
    assert sk[80:84] == [1, 1, 1, 1] and not any(sk[:80])
    assert rec[95]["loss_scale"] <= rec[79]["loss_scale"] / 16
    assert max(x["loss"] for x in rec[85:100]) > 1.5 * np.mean([x["loss"] for x in rec[60:80]])


@pytest.mark.slow
def test_injections_show_in_the_records(healthy):
    base = losses(healthy)
    lt = losses(train(replace(SMALL, kind="long-tail-token", at=80, factor=0.5)))
    assert lt[80] > base[80] + 1.0 and abs(lt[79] - base[79]) < 1e-6

    nan = losses(train(replace(SMALL, kind="numerics", at=70)))
    assert np.isfinite(nan[:70]).all() and np.isnan(nan[70:]).all()

    reset = train(replace(SMALL, kind="optimizer-reset", at=70, resume_from=50))
    steps = [x["step"] for x in reset.records]
    assert steps[70] == 50 and len(steps) == 140     # the log goes back to the checkpoint

    spec = replace(SMALL, kind="lr-discontinuity", at=60, length=5, factor=25)
    assert applied_lr(spec, 62) == pytest.approx(25 * scheduled_lr(spec, 62))
    assert applied_lr(spec, 65) == pytest.approx(scheduled_lr(spec, 65))

    sched = replace(SMALL, kind="schedule-misconfigured", factor=20)
    lrs = [applied_lr(sched, s) for s in range(sched.steps)]
    assert lrs[-1] > 10 * sched.lr and scheduled_lr(sched, sched.steps - 1) < sched.lr


@pytest.mark.slow
def test_fine_tune_starts_far_below_ln_v(healthy):
    ft = train(replace(SMALL, kind="fine-tune", warmup=0, lr=1e-3, steps=20), base=healthy.model)
    assert ft.records[0]["loss"] < math.log(VOCAB) - 1.0


@pytest.mark.slow
def test_noisy_control_has_the_noise_of_small_batches(healthy):
    noisy = losses(train(replace(SMALL, batch=16)))
    assert np.diff(noisy[60:]).std() > 1.3 * np.diff(losses(healthy)[60:]).std()


# --- the writers read back ------------------------------------------------------------------

def _records(n=60, fp16=True, resume=None):
    rng = np.random.default_rng(0)
    steps = list(range(n)) if resume is None else list(range(resume[0])) + list(range(resume[1], n))
    out = []
    for s in steps:
        r = {"step": s, "loss": round(3.0 - s / 50 + 0.01 * rng.standard_normal(), 6),
             "grad_norm": float("inf") if s == 33 else round(1 + 0.1 * rng.random(), 6),
             "lr": 1e-3 * (1 - s / 100), "tokens": (s + 1) * 64, "time_ms": 2.5}
        if fp16:
            r["loss_scale"] = 1024.0 if s < 33 else 512.0
            r["skipped"] = int(s == 33)
        if s % 20 == 0:
            r["val_loss"] = 3.1 - s / 50
        out.append(r)
    return out


META = {"dtype": "fp16", "vocab_size": VOCAB, "seed": 0,
        "config": {"lr_max": 1e-3, "min_lr": 1e-4, "warmup_steps": 0, "schedule": "linear",
                   "total_steps": 60, "batch_size": 64, "betas": [0.8, 0.99]}}


@pytest.mark.parametrize("fmt,interval", [("jsonl", 1), ("csv", 1), ("tensorboard", 1), ("llm.c", 1),
                                          ("nanogpt", 5), ("megatron", 5), ("hf-trainer-state", 5),
                                          ("hf-console", 5)])
def test_written_formats_read_back_with_the_same_values(tmp_path, fmt, interval):
    rec = _records()
    rows = formats.WRITERS[fmt](rec, META, tmp_path / "run", interval=interval)
    log = read_run(tmp_path / "run")
    f = log.frame[log.frame.loss.notna() | log.nan_mask("loss")]
    assert list(f.step) == [step for step, _ in rows]
    mean = formats.FORMATS[fmt][0]
    for (step, covered), got in zip(rows, f.loss):
        vals = [rec[i]["loss"] for i in covered if not rec[i].get("skipped")]
        want = np.mean(vals) if mean else rec[covered[-1]]["loss"]
        assert got == pytest.approx(want, abs=1e-4), (step, covered)    # 4 places in the terse logs
    if fmt in ("jsonl", "csv", "tensorboard", "llm.c"):
        g = log.frame.set_index("step").grad_norm
        assert math.isinf(g[33]) and g[34] == pytest.approx(rec[34]["grad_norm"], abs=1e-4)
    if fmt in ("jsonl", "csv", "tensorboard", "megatron"):
        assert log.frame.loss_scale.dropna().iloc[0] == 1024.0 and log.frame.loss_scale.dropna().iloc[-1] == 512.0
    if fmt == "jsonl":
        assert log.manifest.config.schedule == "linear" and log.dtype == "fp16"


def test_the_epoch_and_deepspeed_writers_read_back(tmp_path):
    """Keras' epoch CSV: one row per epoch, numbered from 0, the epoch's mean loss; DeepSpeed's
    engine log: no loss, the skipped steps counted and the scale its OVERFLOW lines reduce to."""
    rec = _records()
    rows = formats.WRITERS["epochs"](rec, META, tmp_path / "ep", interval=10)
    log = read_run(tmp_path / "ep")
    assert list(log.frame.step) == list(range(len(rows))) == [e for e, _ in rows]
    want = [np.mean([rec[i]["loss"] for i in g if not rec[i].get("skipped")]) for _, g in rows]
    assert np.allclose(log.frame.loss, want, atol=1e-5)
    formats.WRITERS["deepspeed"](rec, META, tmp_path / "ds", interval=10)
    log = read_run(tmp_path / "ds")
    assert "loss" not in log.metrics
    skipped = sum(r.get("skipped", 0) for r in rec)
    assert skipped and (tmp_path / "ds" / "deepspeed.log").read_text().count("OVERFLOW!") == skipped
    assert "loss_scale" in log.metrics and log.frame.loss_scale.dropna().iloc[-1] == 512.0


def test_a_resumed_run_goes_back_in_steps_where_the_format_keeps_it(tmp_path):
    rec = _records(resume=(40, 30))
    for fmt, segments in (("jsonl", 2), ("llm.c", 2), ("hf-trainer-state", 1)):
        formats.WRITERS[fmt](rec, META, tmp_path / fmt, interval=1 if fmt != "hf-trainer-state" else 5)
        log = read_run(tmp_path / fmt)
        assert log.frame.segment.nunique() == segments, fmt


def test_labels_are_put_in_the_formats_own_steps(tmp_path):
    """Step 30 of the trainer is step 30 in a JSONL log, iteration 35 in Megatron's 5-step
    lines (1-based, the interval that holds it) and in HF's console (its bar's counter)."""
    spec = replace(SMALL, kind="long-tail-token", at=30)
    rec = _records(fp16=False)
    for fmt, interval, step in (("jsonl", 1, 30), ("megatron", 5, 35), ("hf-console", 5, 35)):
        rows = formats.WRITERS[fmt](rec, META, tmp_path / fmt, interval=interval)
        lab = synthetic.label_for("x", fmt, interval, spec, rec, rows)
        assert lab["incidents"][0]["step"] == step, fmt
        f = read_run(tmp_path / fmt).frame
        assert step in set(f.step), fmt


# --- the scorer -----------------------------------------------------------------------------

def test_scorer_on_a_hand_made_case():
    labels = [
        {"kind": "spike", "cause": "long-tail-token", "step": 100, "range": [100, 102], "tolerance": 3, "step_tolerance": 1},
        {"kind": "nan", "cause": "numerics", "step": 300, "range": [300, 300], "tolerance": 3, "step_tolerance": 1},
        {"kind": "spike", "cause": None, "step": 500, "range": [500, 500], "tolerance": 3, "step_tolerance": 1},
        {"kind": "spike", "cause": "fp16-overflow", "step": 700, "range": [700, 700], "tolerance": 3,
         "step_tolerance": 1, "optional": True},
    ]
    reports = [
        {"step": 101, "kind": "spike", "top": "long-tail-token"},   # found, right step, right cause
        {"step": 104, "kind": "spike", "top": "long-tail-token"},   # same event again: false
        {"step": 303, "kind": "nan", "top": "fp16-overflow"},       # found, step off by 3, wrong cause
        {"step": 702, "kind": "spike", "top": "fp16-overflow"},     # the optional one: neither way
        {"step": 900, "kind": "spike", "top": "lr-discontinuity"},  # false
    ]
    s = match(labels, reports)
    assert (s.found, s.missed, s.false) == (2, 1, 2)
    assert (s.right_step, s.right_cause, s.with_cause, s.optional_found) == (1, 1, 2, 1)
    # segment: a report in the crashed segment is not the resumed run's incident
    seg = [{"kind": "spike", "cause": None, "step": 200, "range": [200, 210], "tolerance": 3,
            "step_tolerance": 2, "segment": 1}]
    s = match(seg, [{"step": 201, "segment": 0, "kind": "spike"}])
    assert (s.found, s.missed, s.false) == (0, 1, 1)


def test_the_two_sets_are_kept_apart():
    import json

    here = Path(synthetic.__file__).parent
    sets = json.loads((here / "sets.json").read_text())
    tune, rep = sets["tuning"], sets["reporting"]
    assert all(s % 2 == 0 for s in tune["lab2_seeds"]) and all(s % 2 == 1 for s in rep["lab2_seeds"])
    assert not set(tune["real_runs_sections"]) & set(rep["real_runs_sections"])
    real = json.loads((here / "labels" / "real_runs.json").read_text())["runs"]
    for lab in real:
        assert (lab["section"] in tune["real_runs_sections"]) != (lab["section"] in rep["real_runs_sections"])
    assert {lab["section"] for lab in real if lab["section"] in rep["real_runs_sections"]} == {7}


def test_a_reset_below_the_noise_is_not_a_required_incident():
    rng = np.random.default_rng(1)
    def run(bump):
        rec = [{"step": s, "loss": 2 + 0.1 * rng.standard_normal()} for s in range(120)]
        return rec + [{"step": s, "loss": rec[s]["loss"] + bump} for s in range(100, 120)]
    assert not synthetic.reset_visible(run(0.0), 120)
    assert synthetic.reset_visible(run(0.5), 120)


def test_scorer_takes_an_epoch_numbered_step_either_way():
    """`Epoch [1][150/5808]` is global step 150, or 5958 for a reader counting epochs from 0."""
    lab = [{"kind": "nan", "cause": None, "step": 150, "range": [150, 150], "tolerance": 0,
            "step_tolerance": 1, "shifts": [5808]}]
    for step in (150, 5958):
        s = match(lab, [{"step": step, "kind": "nan"}])
        assert (s.found, s.false, s.right_step) == (1, 0, 1), step
    s = match(lab, [{"step": 3000, "kind": "nan"}])
    assert (s.found, s.missed, s.false) == (0, 1, 1)
