"""Issue 25 on runs of the second trainer (benchmarks/accuracy/trainer2.py, not the sample
runs): it trains for real, fails for real, and each run is written the way a trainer logs it
(JSONL, llm.c, Megatron, DeepSpeed, a Keras epoch CSV); the harness' own labels and scorer
say what the analysis had to find."""

import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy"))

import formats  # noqa: E402
import synthetic  # noqa: E402
from run import match  # noqa: E402
from trainer2 import Spec, train  # noqa: E402

from postmortem.diagnose.analyze import analyze  # noqa: E402
from postmortem.diagnose.models import worst  # noqa: E402
from postmortem.run import read_run  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")     # conftest: torch on one thread


_TRAINED: dict = {}


def trained(spec: Spec):
    if spec not in _TRAINED:
        _TRAINED[spec] = train(spec)
    return _TRAINED[spec]


def written(tmp_path, spec: Spec, fmt: str, interval: int = 1):
    """(analysis, label, score) of the run written in `fmt`."""
    result = trained(spec)
    d = tmp_path / f"{fmt}-{interval}"
    rows = formats.WRITERS[fmt](result.records, {**result.meta, "seed": spec.seed}, d, interval=interval)
    label = synthetic.label_for(d.name, fmt, interval, spec, result.records, rows)
    analysis = analyze(read_run(d))
    reports = [{"step": i.step, "segment": i.segment, "kind": i.kind,
                "top": i.hypotheses[0].pattern if i.hypotheses else None} for i in analysis.incidents]
    return analysis, label, match(label["incidents"], reports)


SHORT = Spec(kind="short", steps=60, warmup=3, batch=64, hidden=96, at=4, length=1, factor=10.0, climb_from=30,
             climb_factor=8.0, optimizer="sgd", lr=0.5, min_lr=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
@pytest.mark.parametrize("fmt", ["jsonl", "llm.c", "megatron"])
def test_a_60_step_log_finds_its_early_spike_and_its_later_climb(tmp_path, seed, fmt):
    analysis, label, score = written(tmp_path, replace(SHORT, seed=seed), fmt)
    required = [i for i in label["incidents"] if not i.get("optional")]
    assert score.found == len(required) and score.false == 0, score.details
    assert score.right_step == score.found, score.details
    spike = min(analysis.incidents, key=lambda i: i.step)
    assert spike.step <= 6 and spike.kind == "spike"


@pytest.mark.slow
@pytest.mark.parametrize("seed,batch", [(11, 12), (12, 64)])
@pytest.mark.parametrize("fmt", ["jsonl", "megatron"])
def test_clean_60_step_logs_stay_quiet_at_every_noise_level(tmp_path, seed, batch, fmt):
    spec = Spec(kind="healthy", steps=60, warmup=3, batch=batch, hidden=96, seed=seed)
    analysis, _, _ = written(tmp_path, spec, fmt)
    assert analysis.incidents == []
    b4 = next(c for c in analysis.checks if c.id == "B4")
    assert b4.status == "pass" and "over 29 steps" in b4.detail        # judged on half the log


EPOCHS = Spec(kind="schedule-misconfigured", schedule="cosine", steps=360, hidden=96, factor=30.0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_a_12_epoch_log_that_climbs_is_a_divergence_and_a_clean_one_is_not(tmp_path, seed):
    analysis, label, score = written(tmp_path, replace(EPOCHS, seed=seed), "epochs", 30)
    assert score.found == 1 and score.false == 0, score.details
    [inc] = analysis.incidents
    assert inc.kind == "divergence" and inc.hypotheses[0].score > 0
    clean, _, _ = written(tmp_path / "clean", Spec(kind="healthy", schedule="cosine", steps=360, hidden=96,
                                                   batch=48, seed=seed), "epochs", 30)
    assert clean.incidents == []


@pytest.mark.slow
@pytest.mark.parametrize("fmt,interval", [("jsonl", 1), ("megatron", 10)])
def test_an_lr_rising_against_cosine_is_the_incident_with_its_cause(tmp_path, fmt, interval):
    spec = Spec(kind="schedule-misconfigured", schedule="cosine", steps=400, hidden=96, factor=25.0, seed=11)
    analysis, _, score = written(tmp_path, spec, fmt, interval)
    assert score.found == 1 and score.false == 0, score.details
    top = analysis.incidents[worst(analysis.incidents)]
    assert top.kind == "divergence" and top.hypotheses[0].pattern == "schedule-misconfigured"
    # what it is weighed on is there: the LR over it, and the config it climbs against
    said = [o.observation for o in top.hypotheses[0].supported_by]
    assert any("the config says cosine" in s for s in said)
    assert any(o.observation.startswith("LR ") and "over the incident" in o.observation
               for h in top.hypotheses for o in h.supported_by + h.contradicted_by) or any(
        "LR x" in s and "over the divergence" in s for s in said)


STATIC = dict(dtype="fp16", scale_growth=1.0, scale_backoff=1.0, init_scale=2.0 ** 16)


@pytest.mark.slow
@pytest.mark.parametrize("fmt,interval", [("jsonl", 1), ("megatron", 10)])
def test_a_static_loss_scale_is_said_static_and_its_skips_are_the_incident(tmp_path, fmt, interval):
    spec = Spec(kind="fp16-overflow", optimizer="sgd", at=120, length=12, factor=0.2, steps=220, hidden=96,
                lr=0.3, min_lr=0.03, seed=11, **STATIC)
    analysis, _, score = written(tmp_path, spec, fmt, interval)
    assert score.found == 1 and score.false == 0 and score.right_step == 1, score.details
    inc = analysis.incidents[0]
    said = [o.observation for h in inc.hypotheses for o in h.supported_by + h.contradicted_by]
    assert inc.hypotheses[0].pattern == "fp16-overflow"
    assert any("static loss scale of 65536" in s for s in said)
    assert not any("dynamic loss scaling" in s for s in said)
    b3 = next(c for c in analysis.checks if c.id == "B3")
    assert b3.status == "fail" and "dynamic scaling is not engaged" in b3.detail


@pytest.mark.slow
def test_a_static_scale_with_no_overflow_is_quiet_and_still_called_static(tmp_path):
    spec = Spec(kind="healthy", steps=200, hidden=96, seed=12, **STATIC)
    analysis, _, _ = written(tmp_path, spec, "jsonl")
    b3 = next(c for c in analysis.checks if c.id == "B3")
    assert analysis.incidents == [] and b3.status == "pass" and "static loss scale of 65536" in b3.detail


@pytest.mark.slow
@pytest.mark.parametrize("fmt,interval", [("jsonl", 1), ("megatron", 10), ("deepspeed", 10)])
def test_steps_skipped_at_the_scales_floor_are_a_persistent_overflow(tmp_path, fmt, interval):
    spec = Spec(kind="fp16-persistent", dtype="fp16", at=120, steps=220, hidden=96, overflow_share=0.6,
                scale_floor=1.0, seed=11)
    analysis, _, score = written(tmp_path, spec, fmt, interval)
    assert score.found == 1 and score.false == 0, score.details
    b3 = next(c for c in analysis.checks if c.id == "B3")
    assert "persistent overflow" in b3.detail and analysis.incidents[0].hypotheses[0].pattern == "fp16-overflow"


@pytest.mark.slow
@pytest.mark.parametrize("power", [8, 14])
@pytest.mark.parametrize("fmt,interval", [("jsonl", 1), ("megatron", 10)])
def test_a_scale_far_below_1_when_the_log_begins_is_one_incident_at_its_start(tmp_path, power, fmt, interval):
    spec = Spec(kind="fp16-persistent", dtype="fp16", at=0, steps=200, hidden=96, overflow_share=0.1,
                init_scale=2.0 ** -power, seed=12)
    analysis, label, score = written(tmp_path, spec, fmt, interval)
    assert score.found == 1 and score.false == 0 and score.right_step == 1, score.details
    first = analysis.incidents[0]
    assert first.step == label["incidents"][0]["step"]
    assert any("when the log begins" in o.observation for o in first.hypotheses[0].supported_by)


@pytest.mark.slow
def test_a_cascade_with_no_loss_logged_is_an_fp16_overflow_incident(tmp_path):
    spec = Spec(kind="fp16-overflow", dtype="fp16", optimizer="sgd", at=150, length=12, factor=0.15, steps=260,
                hidden=96, lr=0.3, min_lr=0.03, seed=11)
    analysis, _, score = written(tmp_path, spec, "deepspeed", 10)
    assert "loss" not in read_run(tmp_path / "deepspeed-10").metrics
    assert score.found == 1 and score.false == 0, score.details
    inc = analysis.incidents[0]
    assert inc.hypotheses[0].pattern == "fp16-overflow"
    # dynamic scaling, said with what shows it (the scale read from the 'reducing to' messages)
    assert any("dynamic loss scaling (" in o.observation for o in inc.hypotheses[0].supported_by)


@pytest.mark.slow
@pytest.mark.parametrize("fmt,interval", [("jsonl", 1), ("deepspeed", 10)])
def test_a_sawtooth_of_routine_probes_stays_routine(tmp_path, fmt, interval):
    spec = Spec(kind="healthy", dtype="fp16", steps=300, hidden=96, growth_interval=20, seed=11)
    analysis, _, _ = written(tmp_path, spec, fmt, interval)
    b3 = next(c for c in analysis.checks if c.id == "B3")
    assert analysis.incidents == [] and b3.status == "pass" and "dynamic loss scaling" in b3.detail


@pytest.mark.slow
def test_the_divergence_an_lr_rising_against_cosine_causes_is_picked_over_an_early_grad_norm_blip(tmp_path):
    import json

    spec = Spec(kind="schedule-misconfigured", schedule="cosine", steps=400, hidden=96, factor=25.0, seed=12)
    written(tmp_path, spec, "jsonl")
    path = tmp_path / "jsonl-1" / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[60]["grad_norm"] *= 30                       # one batch's gradient, the loss unmoved
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    analysis = analyze(read_run(tmp_path / "jsonl-1"))
    assert {i.metric for i in analysis.incidents} == {"grad_norm", "loss"}
    top = analysis.incidents[worst(analysis.incidents)]
    assert top.kind == "divergence" and top.hypotheses[0].pattern == "schedule-misconfigured"
