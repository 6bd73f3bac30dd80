"""Reading the three table families from lines built with their own format strings
(`tables_logs`): Chainer's / pytorch-pfn-extras' PrintReport table (cells by position, an empty
cell not reported) and LogReport's JSON list `log`; ParlAI's `nice_report` tables (an empty cell
a NaN, `total_steps` the step, `fp16_loss_scalar` the loss scale) and its fp16 message; GluonNLP's
BERT lines (the loss mlm_loss + nsp_loss) and its scaler's warning."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from postmortem.run import read_run

sys.path.insert(0, str(Path(__file__).parent))
from tables_logs import (  # noqa: E402
    bert_line,
    chainer_observations,
    gluonnlp_overflow,
    log_report,
    parlai_eval,
    parlai_overflow,
    parlai_report,
    print_report,
    smooth,
)

sys.path.insert(0, str(Path(__file__).parents[1]))
from cli_run import one_line_error, postmortem  # noqa: E402


def _losses(n: int, nan_at: int | None = None) -> list[float]:
    return [float("nan") if nan_at is not None and k >= nan_at else smooth(k, n) for k in range(1, n + 1)]


# --- Chainer ------------------------------------------------------------------------------

@pytest.mark.parametrize("erase", [True, False], ids=["posix", "windows"])
def test_print_report_reads_every_row_by_position(tmp_path, erase):
    """399 rows, the validation cells empty on 9 rows of 10: every row read, the step the
    iteration, the empty cells not logged, a `nan` cell a logged NaN at its own iteration."""
    obs = chainer_observations(_losses(399, nan_at=300))
    text = print_report(obs)
    if not erase:                 # on Windows PrintReport erases with a console call, no `\033[J`
        text = text.replace("\033[J", "")
    p = tmp_path / "train.out"
    p.write_text(text)
    run = read_run(p)
    f = run.frame
    assert len(f) == 399 and f.step.tolist() == [100 * k for k in range(1, 400)]
    assert run.source.extras["step_from"].startswith("iteration")
    assert f.loss.iloc[:299].round(5).tolist() == [round(o["main/loss"], 5) for o in obs[:299]]
    assert np.isnan(f.loss.iloc[299:]).all() and f.step[run.logged_nan["loss"][0]] == 30000
    val = f.dropna(subset=["val_loss"])
    assert val.step.tolist() == [1000 * k for k in range(1, 30)]     # logged where reported, NaN after 300
    assert int(run.logged_mask("val_loss").sum()) == 39
    assert f["main/accuracy"].notna().all() and f["elapsed_time"].iloc[-1] == pytest.approx(399 * 3.25, rel=1e-5)


def test_print_report_header_far_above_and_a_bar_between(tmp_path):
    """The header is printed once: rows thousands of lines below it, with ProgressBar's lines
    between them (chainer/training/extensions/progress_bar.py), are still named by it."""
    obs = chainer_observations(_losses(200))
    lines = print_report(obs).splitlines()
    out = [lines[0]]
    for k, row in enumerate(lines[1:], 1):
        out.append(row)
        out.append(f"     total [{'#' * (k % 50):50}] {k / 2:6.2f}%")
        out.append(f"this epoch [{'#' * (k % 50):50}] {k % 100:6.2f}%")
        out.append(f"{k * 100:>8} iter, {k // 6} epoch / 34 epochs")
        out.append(f"{10.2:>10.5g} iters/sec. Estimated time to finish: 0:07:37.")
    p = tmp_path / "log.txt"
    p.write_text("\n".join(out) + "\n")
    f = read_run(p).frame
    assert f.dropna(subset=["loss"]).step.tolist() == [100 * k for k in range(1, 201)]


def test_ppe_print_report_with_its_own_entries(tmp_path):
    """pytorch-pfn-extras' `filter_and_sort_entries`: the iteration first (unit 'iteration'),
    `train/loss`, `lr`, `val/loss`, elapsed_time last."""
    entries = ["iteration", "epoch", "train/loss", "lr", "val/loss", "elapsed_time"]
    obs = [{"iteration": 50 * k, "epoch": k // 20, "train/loss": smooth(k, 100), "lr": 0.01,
            "elapsed_time": 0.5 * k, **({"val/loss": 1.5} if k % 20 == 0 else {})} for k in range(1, 101)]
    p = tmp_path / "train.log"
    p.write_text(print_report(obs, entries))
    run = read_run(p)
    assert run.frame.step.tolist() == [50 * k for k in range(1, 101)]
    assert run.frame.loss.notna().all() and int(run.logged_mask("val_loss").sum()) == 5
    assert run.frame.lr.eq(0.01).all()


def test_log_report_json_list_in_result(tmp_path):
    """LogReport's `log` (no suffix) in `result/`: a JSON list of the reports, NaN as `NaN`, the
    validation loss only in the reports that had one."""
    obs = chainer_observations(_losses(120, nan_at=100))
    result = tmp_path / "result"
    result.mkdir()
    (result / "log").write_text(log_report(obs))
    (result / "cg.dot").write_text("digraph Graph {}\n")
    r = postmortem("info", result, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["steps"] == {"rows": 120, "first": 100, "last": 12000}
    run = read_run(result)
    assert run.frame.step[run.logged_nan["loss"][0]] == 10000
    assert int(run.logged_mask("val_loss").sum()) == 12
    assert run.source.extras["loss_from"].startswith("main/loss")


def test_log_report_cut_short_is_one_line(tmp_path):
    obs = chainer_observations(_losses(10))
    p = tmp_path / "log"
    p.write_text(log_report(obs)[:-40])
    assert "not a complete JSON list" in one_line_error(postmortem("info", p))


# --- ParlAI -------------------------------------------------------------------------------

def test_parlai_report_tables(tmp_path):
    """Each report: the counters' line, then a table wrapped in two header/row blocks. The step
    is `total_steps`; a NaN loss is printed as an empty cell (`float_formatter`) and read as a
    logged NaN; `fp16_loss_scalar` is the loss scale."""
    steps = list(range(50, 5050, 50))
    text = "\n".join(parlai_report(s, float("nan") if s == 4000 else smooth(s // 50, 100), 128.0) for s in steps)
    assert "\\\n" in text                       # the table wraps at 88 columns
    p = tmp_path / "train.log"
    p.write_text(text)
    run = read_run(p)
    f = run.frame
    assert f.step.tolist() == steps
    assert run.source.extras["dialect"] == "parlai"
    assert f.step[run.logged_nan["loss"][0]] == 4000 and len(run.logged_nan["loss"]) == 1
    assert f.loss.drop(index=run.logged_nan["loss"]).notna().all()
    assert f.loss_scale.eq(128.0).all() and f.grad_norm.notna().all() and f.lr.eq(1e-5).all()
    assert f.total_train_updates.tolist() == steps


def test_parlai_overflow_message(tmp_path):
    lines = [parlai_report(50, 2.5, 128.0), parlai_overflow(64.0), parlai_report(100, 2.4, 64.0)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    f = read_run(p).frame.set_index("step")
    # the message belongs to the report printed after it, whose fp16_loss_scalar is its scale
    assert f.overflows.fillna(0).to_dict() == {50: 0, 100: 1}
    assert f.loss_scale.to_dict() == {50: 128.0, 100: 64.0}


# --- GluonNLP -----------------------------------------------------------------------------

def test_bert_loss_is_mlm_plus_nsp(tmp_path):
    """run_pretraining.py steps on `ls = ls1 + ls2`: the loss is their sum, and `info` says so."""
    lines = [bert_line(10 * k, 7.0 - k / 100, 0.69 - k / 1000) for k in range(1, 51)]
    lines[30] = bert_line(310, float("nan"), 0.6)
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    run = read_run(p)
    assert run.source.extras["loss_from"] == ("mlm_loss + nsp_loss (the sum of the component losses, "
                                              "as gluonnlp steps on it)")
    f = run.frame
    assert f.loss.iloc[0] == pytest.approx(round(7.0 - 0.01, 5) + round(0.69 - 0.001, 2))
    assert f.step[run.logged_nan["loss"][0]] == 310
    r = postmortem("info", p)
    assert "loss from mlm_loss + nsp_loss" in r.stdout


def test_gluonnlp_scaler_warning(tmp_path):
    lines = [bert_line(10, 7.0, 0.69), gluonnlp_overflow(0.5), bert_line(20, 6.9, 0.68)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    f = read_run(p).frame.set_index("step")
    # the message belongs to the step printed after it; the scale before it is twice the one
    # it prints (DynamicLossScaler's scale_factor), said on the step before
    assert f.overflows.fillna(0).to_dict() == {10: 0, 19: 0, 20: 1}
    assert f.loss_scale.dropna().to_dict() == {19: 1.0, 20: 0.5}
    assert not math.isnan(f.loss[20])


def test_parlai_eval_report_is_the_val_stream(tmp_path):
    """`_run_eval`'s table under `valid:` is the validation loss, never a second training loss."""
    lines = []
    for s in range(50, 1050, 50):
        lines.append(parlai_report(s, smooth(s // 50, 20), 128.0))
        if s % 500 == 0:
            lines.append(parlai_eval(s, 2.75))
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    run = read_run(p)
    f = run.frame
    assert f.step.tolist() == list(range(50, 1050, 50)) and len(run.source.warnings) == 0, run.source.warnings
    assert f.loss.round(3).tolist() == [round(smooth(s // 50, 20), 3) for s in range(50, 1050, 50)]
    assert f.set_index("step").val_loss.dropna().to_dict() == {500: 2.75, 1000: 2.75}


def test_a_log_list_with_an_integer_past_int64_is_one_line_and_exit_2(tmp_path):
    from test_cli import pm
    (tmp_path / "result").mkdir()
    log = tmp_path / "result" / "log"
    log.write_text(json.dumps([{"iteration": 1, "main/loss": 2.0}, {"iteration": 2, "main/loss": 10 ** 30}]))
    r = pm("info", log)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "do not make a table" in r.stderr, r.stderr
