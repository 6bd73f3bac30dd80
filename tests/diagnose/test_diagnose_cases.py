"""The diagnosis on the cases of issue 13, each a small synthetic run written as a real log
file (metrics.jsonl, manifest.json) and read back: quiet on what is normal, loud on what is
not, the right step, metric and top cause."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.diagnose.catalog import BY_ID, CATALOG, remedies_for
from postmortem.diagnose.models import worst
from postmortem.diagnose.panels import PANELS
from postmortem.diagnose.patterns import lr_off_trend
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import read_run

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, rows: list[dict], manifest: dict | None = None):
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if manifest is not None:
        (path / "manifest.json").write_text(json.dumps(manifest))
    return read_run(path)


def checks(result) -> dict:
    return {c.id: c for c in result.checks}


def clean(n: int, level=3.5, sigma=0.3, seed=0) -> np.ndarray:
    """A clean loss: a slow decay and single-batch noise."""
    rng = np.random.default_rng(seed)
    return level + 0.5 * np.exp(-np.arange(n) / (n / 3)) + sigma * rng.standard_normal(n)


# --- 1. noise-aware detection ------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_noisy_clean_loss_has_no_spike(tmp_path, seed):
    loss = clean(5000, seed=seed)
    result = analyze(write(tmp_path, [{"step": s, "loss": float(v)} for s, v in enumerate(loss)]))
    assert result.incidents == []
    assert checks(result)["B2"].status == "pass"


def test_a_real_spike_in_noise_is_found_with_its_severity(tmp_path):
    loss = clean(3000, seed=4)
    loss[2000] += 4.0                             # 13 sigma of the single-batch noise
    result = analyze(write(tmp_path, [{"step": s, "loss": float(v)} for s, v in enumerate(loss)]))
    [inc] = result.incidents
    assert (inc.kind, inc.metric, inc.step) == ("spike", "loss", 2000)
    assert inc.severity > Thresholds().spike_sigma


# --- 2. loss-scaler semantics ---------------------------------------------------------

def fp16_rows(n=900, period=50, cascade_at=None, seed=0):
    """A GradScaler run logged every step: the scale doubles after `period` clean steps and
    the next step overflows once (grad norm inf, loss finite, step skipped, scale halved).
    With `cascade_at`: five overflows in a row, then the loss jumps and comes back."""
    rng = np.random.default_rng(seed)
    scale, clean_steps, rows = 2.0 ** 16, 0, []
    for s in range(n):
        loss = 2.5 + 0.05 * rng.standard_normal()
        gn = float(0.5 + 0.05 * rng.standard_normal())
        overflow = False
        if cascade_at is not None and cascade_at <= s < cascade_at + 5:
            overflow = True
        elif clean_steps == period:
            scale *= 2                            # the probe: doubled, and it overflows
            overflow = True
        if cascade_at is not None and cascade_at + 5 <= s < cascade_at + 25:
            loss += 1.5 * np.exp(-(s - cascade_at - 5) / 8)
        if overflow:
            scale /= 2
            clean_steps = 0
        else:
            clean_steps += 1
        rows.append({"step": s, "loss": float(loss), "grad_norm": float("inf") if overflow else gn,
                     "loss_scale": scale, "skipped": int(overflow)})
    return rows


def test_routine_fp16_probes_are_counted_never_incidents(tmp_path):
    result = analyze(write(tmp_path, fp16_rows(), {"dtype": "fp16"}))
    assert result.incidents == []
    c = checks(result)
    assert c["B3"].status == "pass" and "17 routine probe(s)" in c["B3"].detail
    assert c["B1"].status == "pass" and "17 grad norm(s) the loss scaler skipped" in c["B1"].detail


def test_a_cascade_and_the_loss_jump_after_it_are_one_fp16_incident(tmp_path):
    # the last routine probe is at step 611, 25 steps before the cascade
    result = analyze(write(tmp_path, fp16_rows(cascade_at=636), {"dtype": "fp16"}))
    [inc] = result.incidents
    assert inc.metric == "loss" and 636 <= inc.step <= 642
    assert inc.related == ["loss_scale cascade at step 636"]       # dated at its first skip
    top = inc.hypotheses[0]
    assert top.pattern == "fp16-overflow"
    assert not any("no loss-scale cascade" in o.observation for o in top.contradicted_by)
    assert checks(result)["B3"].status == "fail"


def test_an_inf_grad_norm_without_a_scaler_is_a_nan_of_the_grad_norm(tmp_path):
    rng = np.random.default_rng(0)
    rows = [{"step": s, "loss": float(2.5 + 0.05 * rng.standard_normal()), "grad_norm": 0.5} for s in range(300)]
    rows[200]["grad_norm"] = float("inf")
    [inc] = analyze(write(tmp_path, rows, {"dtype": "bf16"})).incidents
    assert (inc.kind, inc.metric, inc.step) == ("nan", "grad_norm", 200)


# --- 1. the headline -----------------------------------------------------------------

def test_a_warmup_grad_norm_blip_is_not_the_headline(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for s in range(400):
        rows.append({"step": s, "loss": float(4.0 - s / 400 + 0.03 * rng.standard_normal()),
                     "grad_norm": float(1.0 + 0.05 * rng.standard_normal()), "lr": 1e-3 * min(1, (s + 1) / 100)})
    rows[15]["grad_norm"] = 80.0
    for s in range(300, 340):                     # resumed without the moments: the loss jumps
        rows[s]["loss"] += 2.0 * np.exp(-(s - 300) / 5)
    log = write(tmp_path, rows[:300] + [dict(r, step=r["step"] - 40) for r in rows[300:]])
    result = analyze(log)
    head = result.incidents[worst(result.incidents)]
    assert (head.metric, head.segment) == ("loss", 1)
    assert head.hypotheses[0].pattern == "optimizer-reset"
    blip = next(i for i in result.incidents if i.metric == "grad_norm")
    assert blip.step == 15 and not blip.headline


# --- 3. schedules ----------------------------------------------------------------------

def test_a_linear_warmup_and_a_step_decay_follow_the_trend_a_jump_does_not():
    steps = np.arange(0, 60)
    warm = 1e-3 * (steps + 1) / 100                                # doubles from step 0 to 1
    assert lr_off_trend(steps, warm, 0, 59, 1.5, 100)[0] is None
    decay = np.where(steps < 30, 1e-3, 1e-4)                       # x0.1 at step 30 that holds
    assert lr_off_trend(steps, decay, 20, 40, 1.5, 0)[0] is None
    jump = np.full(60, 1e-3)
    jump[30:] = 2.5e-2                                              # up x25 after warmup
    assert lr_off_trend(steps, jump, 25, 35, 1.5, 0)[0][:1] == (30,)


def rising_lr_rows(n=1500, seed=0):
    """Warmup to 1e-3 by step 100, then the LR keeps rising (a cosine configured); the loss
    falls, then climbs slowly from about step 700."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n):
        lr = 1e-3 * min(1, (s + 1) / 100) * (1 + 4 * max(0, s - 100) / n)
        loss = 3.0 + 3.2 * np.exp(-s / 150) + 1.2 * max(0, s - 700) / 800 + 0.05 * rng.standard_normal()
        rows.append({"step": s, "loss": float(loss), "lr": lr})
    return rows


COSINE = {"vocab_size": 512, "config": {"lr_max": 1e-3, "warmup_steps": 100, "schedule": "cosine",
                                        "total_steps": 1500}}


def test_an_lr_rising_against_a_configured_cosine_is_a_misconfigured_schedule(tmp_path):
    result = analyze(write(tmp_path, rising_lr_rows(), COSINE))
    a41 = checks(result)["A4.1"]
    assert a41.status == "fail" and a41.leaf == "schedule-misconfigured"
    [inc] = result.incidents
    assert inc.kind == "divergence" and 600 <= inc.step <= 1000
    assert inc.hypotheses[0].pattern == "schedule-misconfigured"


def test_without_a_configured_schedule_the_decay_check_says_why(tmp_path):
    result = analyze(write(tmp_path, rising_lr_rows()))
    assert checks(result)["A4.1"].status == "skipped"
    assert "no schedule configured" in checks(result)["A4.1"].detail


def test_a_short_log_is_judged_on_what_it_has_and_too_short_a_one_says_why(tmp_path):
    """Issue 25: a 62-step climb is a divergence (windows of half the log), not 'needs 200'; a
    log of 5 losses cannot be judged and says so with the numbers."""
    rows = [{"step": s, "loss": 3.0 + 0.01 * s} for s in range(62)]
    result = analyze(write(tmp_path, rows))
    assert checks(result)["B4"].status == "fail"
    assert [i.kind for i in result.incidents] == ["divergence"]
    b4 = checks(analyze(write(tmp_path / "five", rows[:5])))["B4"]
    assert b4.status == "skipped" and b4.detail == "skipped: 5 losses logged, needs 8"


# --- 4. restarts and fine-tunes -----------------------------------------------------------

def test_an_epoch_counter_going_back_is_a_restart(tmp_path):
    rng = np.random.default_rng(0)
    rows = [{"step": s, "epoch": s / 200, "loss": float(3.0 + 0.05 * rng.standard_normal())} for s in range(600)]
    for r in rows[400:]:
        r["epoch"] -= 1.0                         # resumed from the epoch-1 checkpoint
    b0 = checks(analyze(write(tmp_path, rows)))["B0"]
    assert b0.status == "fail" and "step 400 (epoch went back to 1)" in b0.detail


def wall_rows(n=500, gap_at=None):
    rng = np.random.default_rng(0)
    rows, t = [], 0.0
    for s in range(n):
        t += 1.0 + (3600.0 if s == gap_at else 0.0)
        rows.append({"step": s, "loss": float(3.0 + 0.05 * rng.standard_normal()), "wall_time": t})
    return rows


def test_a_final_eval_row_after_a_long_pause_is_not_a_restart(tmp_path):
    rows = wall_rows() + [{"step": 500, "val_loss": 3.1, "wall_time": 500.0 + 7200}]
    assert checks(analyze(write(tmp_path, rows)))["B0"].status == "pass"


def test_a_wall_clock_gap_mid_run_is_a_restart(tmp_path):
    b0 = checks(analyze(write(tmp_path, wall_rows(gap_at=300))))["B0"]
    assert b0.status == "fail" and "step 300 (wall-clock gap" in b0.detail


def finetune_rows(n=300, seed=0):
    rng = np.random.default_rng(seed)
    rows = [{"step": s, "loss": float(1.8 - 0.2 * s / n + 0.05 * rng.standard_normal()),
             "grad_norm": float(1.0 + 0.1 * rng.standard_normal())} for s in range(n)]
    rows[0]["grad_norm"] = 15.0                   # a LoRA run's first step
    return rows


def test_a_fine_tune_is_not_a_bad_start(tmp_path):
    result = analyze(write(tmp_path, finetune_rows(), {"vocab_size": 32000}))
    c = checks(result)
    for cid in ("A1", "A2"):
        assert c[cid].status == "skipped" and "starts from a trained model" in c[cid].detail
    assert result.incidents == []


def test_a_fine_tune_said_by_the_config_skips_the_start_checks(tmp_path):
    result = analyze(write(tmp_path, finetune_rows(), {"config": {"peft": "lora"}}))
    assert checks(result)["A2"].detail == "the run starts from a trained model (its config)"
    assert result.incidents == []


# --- 5. short pastes ------------------------------------------------------------------------

def test_a_huge_grad_norm_in_a_nine_row_paste_is_a_low_confidence_incident(tmp_path):
    gn = [8.1, 7.9, 8.3, 8.0, 11140.0, 8.2, 7.7, 8.4, 8.0]
    rows = [{"step": 1000 + i, "loss": 2.1 + 0.01 * (i % 3), "grad_norm": g} for i, g in enumerate(gn)]
    [inc] = analyze(write(tmp_path, rows)).incidents
    assert (inc.kind, inc.metric, inc.step, inc.confidence) == ("spike", "grad_norm", 1004, "low")


# --- 6. honest evidence ---------------------------------------------------------------------

def test_an_observation_names_the_step_its_value_is_at(tmp_path):
    rng = np.random.default_rng(0)
    rows = [{"step": s, "loss": float(3.0 + 0.02 * rng.standard_normal()),
             "grad_norm": float(0.3 + 0.01 * rng.standard_normal())} for s in range(400)]
    for s, v in zip(range(251, 256), (4.5, 4.6, 4.7, 4.8, 4.9)):
        rows[s]["loss"] = v
    rows[253]["grad_norm"] = 4.79                 # the window's largest grad norm, 2 steps later
    inc = next(i for i in analyze(write(tmp_path, rows)).incidents if i.step == 251)
    said = [o.observation for h in inc.hypotheses for o in h.supported_by + h.contradicted_by]
    assert any("grad norm 4.79 at step 253" in t for t in said)
    assert any("-> 4.9 at step 255" in t for t in said)
    assert not any("at step 251" in t and "4.79" in t for t in said)


def test_a_ranking_with_nothing_convincing_says_so(tmp_path):
    from postmortem.cli.report import print_analysis
    rows = [{"step": s, "val_loss": 3.0} for s in range(5)]
    rows += [{"step": 5, "loss": float("nan")}]
    result = analyze(write(tmp_path, rows))
    for inc in result.incidents:
        inc.hypotheses = [h.model_copy(update={"score": 0.0, "supported_by": []}) for h in inc.hypotheses]
    import io
    from contextlib import redirect_stdout
    buf = io.StringIO()
    with redirect_stdout(buf):
        print_analysis(result)
    assert "no convincing cause" in buf.getvalue() and "next:" not in buf.getvalue()


# --- 7. patterns as data ------------------------------------------------------------------

def test_every_pattern_is_one_catalog_entry_with_all_it_needs():
    from postmortem.replay.arms import BY_NAME
    th = Thresholds()
    for p in CATALOG:
        assert p.title and p.discriminate and p.remedies and remedies_for(p.id) == p.remedies
        assert p.panels and set(p.panels) <= set(PANELS)
        assert set(p.arms) <= set(BY_NAME)
        for arm in p.arms:
            assert p.id in BY_NAME[arm].tests
    src = (ROOT / "postmortem" / "diagnose" / "catalog.py").read_text()
    for name in {w for w in type(th).model_fields if w.startswith("w_")}:
        assert f'"{name}"' in src, f"weight {name} is used by no rule"
    assert BY_ID["fp16-overflow"].arms == ("fp32",)


@pytest.mark.slow
def test_the_catalog_and_what_reads_it_import_neither_numpy_nor_the_analysis():
    """The linter and the editor read pattern ids and remedies from the catalog: importing
    it (and the models) loads no numpy, pandas nor the analysis."""
    code = ("import sys, postmortem.diagnose.catalog, postmortem.diagnose.models, postmortem.document.lint; "
            "print(sorted(m for m in ('numpy', 'pandas', 'postmortem.diagnose.context') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "[]", (out.stdout, out.stderr)


@pytest.mark.slow
def test_checklist_questions_print_the_thresholds_in_force(tmp_path):
    rows = [{"step": s, "loss": 3.0 + 0.01 * np.sin(s)} for s in range(300)]
    run = tmp_path / "run"
    write(run, rows)
    out = subprocess.run([sys.executable, "-m", "postmortem", "analyze", str(run), "--json",
                          "--set", "spike_sigma=4"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    b2 = next(c for c in json.loads(out.stdout)["checks"] if c["id"] == "B2")
    assert "4 x the noise" in b2["question"] and "3 std" not in b2["question"]
    assert "spike_sigma=4.0" in b2["threshold"]


def observations(analysis: dict) -> list[str]:
    return [o["observation"] for inc in analysis["incidents"] for h in inc["hypotheses"]
            for o in h["supported_by"] + h["contradicted_by"]]


@pytest.mark.slow
def test_observations_say_the_batch_windows_in_force():
    """The batch windows are settings: `--set` changes what is counted and what the text says
    (the defaults say 50 and 100, as they always did)."""
    run = ROOT / "sample_runs" / "bad-data"
    said = {}
    for name, sets in (("default", ()), ("set", ("--set", "batch_repeat_window=30", "--set", "batch_index_window=60"))):
        out = subprocess.run([sys.executable, "-m", "postmortem", "analyze", str(run), "--json", *sets],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        said[name] = observations(json.loads(out.stdout))
    assert "the batch of step 240 is unique among the 50 before it" in said["default"]
    assert "39 repeated batch index(es) in the 100 steps up to 240, first at step 201" in said["default"]
    assert "the batch of step 240 is unique among the 30 before it" in said["set"]
    repeated = [o for o in said["set"] if "repeated batch index(es)" in o]
    assert repeated and all("in the 60 steps up to 240" in o for o in repeated), repeated
    assert not any(" 50 " in o or " 100 " in o for o in said["set"] if "batch" in o)


# --- 8. a long run: exactly the planted incident -----------------------------------------------

@pytest.mark.slow
def test_a_million_step_run_with_one_planted_spike_has_one_incident(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from make_runs import synthetic
    df = synthetic(1_000_000)
    df.to_parquet(tmp_path / "metrics.parquet")
    [inc] = analyze(read_run(tmp_path / "metrics.parquet")).incidents
    assert (inc.kind, inc.metric, inc.step) == ("spike", "loss", 500_000)


def test_an_observation_writes_the_runs_values_as_the_document_does():
    """'grad norm 13.17 at step 250': the value at the step it names, in the 4 significant
    digits of postmortem.numbers, the same text the post-mortem's Symptoms and the check use."""
    import re

    from postmortem.numbers import number
    log = read_run(str(ROOT / "sample_runs" / "long-tail-token"))
    top = analyze(log).incidents[0].hypotheses[0]
    texts = [o.observation for o in top.supported_by]
    frame = log.frame.set_index("step")
    grad = next(re.match(r"grad norm (\S+) at step (\d+)", t) for t in texts if t.startswith("grad norm"))
    assert grad.group(1) == number(float(frame.grad_norm[int(grad.group(2))])) == "13.17"
    loss = next(re.match(r"loss (\S+) -> (\S+) at step (\d+)", t) for t in texts if t.startswith("loss "))
    assert loss.group(2) == number(float(frame.loss[int(loss.group(3))])) == "5.157"
