"""The three table families judged end to end, on logs built with their own format strings
(`tests/run/tables_logs.py`): Chainer's PrintReport table and LogReport `log`, ParlAI's report
tables, GluonNLP's BERT lines. Each: a NaN found at its step, a one-report spike found, a clean
run quiet; where the family prints a loss scale (ParlAI's `fp16_loss_scalar` and Overflow
message, GluonNLP's DynamicLossScaler warning), a real GradScaler cascade (`tests/scale_logs.py`)
is an fp16-overflow incident at its first skip."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parents[1] / "run"))
from scale_logs import CASCADE_AT, record  # noqa: E402
from tables_logs import (  # noqa: E402
    bert_line,
    chainer_observations,
    gluonnlp_overflow,
    log_report,
    parlai_overflow,
    parlai_report,
    print_report,
    smooth,
)

N = 300
AT = 200          # the report where the NaN or the spike is


def _losses(kind: str) -> list[float]:
    out = [smooth(k, N) for k in range(1, N + 1)]
    if kind == "nan":
        out[AT - 1:] = [float("nan")] * (N - AT + 1)
    elif kind == "spike":
        out[AT - 1] *= 4
    return out


# each family: its file name, its log of the losses (one report each), the step of report k
FAMILIES: dict[str, tuple[str, Callable[[list[float]], str], Callable[[int], int]]] = {
    "chainer-print-report": ("train.out", lambda ls: print_report(chainer_observations(ls)), lambda k: 100 * k),
    "chainer-log-report": ("log", lambda ls: log_report(chainer_observations(ls)), lambda k: 100 * k),
    "parlai": ("train.log", lambda ls: "\n".join(parlai_report(50 * k, x, 128.0) for k, x in enumerate(ls, 1)),
               lambda k: 50 * k),
    "gluonnlp-bert": ("train.log", lambda ls: "\n".join(bert_line(10 * k, 0.8 * x, 0.2 * x)
                                                       for k, x in enumerate(ls, 1)) + "\n", lambda k: 10 * k),
}


def _judge(tmp_path: Path, family: str, kind: str):
    name, write, step = FAMILIES[family]
    p = tmp_path / name
    p.write_text(write(_losses(kind)))
    run = read_run(p)
    assert run.frame.loss.notna().sum() >= AT - 1        # the loss is read, every report of it
    return analyze(run), step(AT)


@pytest.mark.parametrize("family", FAMILIES)
def test_nan_found_at_its_step(tmp_path, family):
    result, at = _judge(tmp_path, family, "nan")
    assert [(i.kind, i.metric, i.step) for i in result.incidents] == [("nan", "loss", at)]


@pytest.mark.parametrize("family", FAMILIES)
def test_spike_found_at_its_step(tmp_path, family):
    result, at = _judge(tmp_path, family, "spike")
    assert [(i.kind, i.metric, i.step) for i in result.incidents] == [("spike", "loss", at)]


@pytest.mark.parametrize("family", FAMILIES)
def test_clean_run_is_quiet(tmp_path, family):
    result, _ = _judge(tmp_path, family, "clean")
    assert result.incidents == []


def _parlai_scaled(rows: list[dict]) -> str:
    """A report a step (`-tstep 1`-like logging), the scaler's message before the step it skipped."""
    lines = []
    for r in rows:
        if r["skipped"]:
            lines.append(parlai_overflow(r["after"]))
        lines.append(parlai_report(r["step"] + 1, r["loss"], r["scale"]))
    return "\n".join(lines) + "\n"


# GluonNLP's scaler starts at 2**10 (run_pretraining.py `init_scale`) and warns only below 1: the
# real scaler's scales divided by 2**14 (its cascade from 64 down to 1/16), the warnings those below 1
_GLUON_SHIFT = 2 ** 14


def _gluonnlp_scaled(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        if r["skipped"] and r["after"] / _GLUON_SHIFT < 1:
            lines.append(gluonnlp_overflow(r["after"] / _GLUON_SHIFT))
        lines.append(bert_line(r["step"] + 1, 0.8 * r["loss"], 0.2 * r["loss"]))
    return "\n".join(lines) + "\n"


def _first_printed(rows: list[dict], printed: Callable[[dict], bool]) -> int:
    return next(r["step"] + 1 for r in rows if r["step"] >= CASCADE_AT and r["skipped"] and printed(r))


@pytest.mark.parametrize("family,write,printed", [
    ("parlai", _parlai_scaled, lambda r: True),
    ("gluonnlp", _gluonnlp_scaled, lambda r: r["after"] / _GLUON_SHIFT < 1),
])
def test_scale_cascade_is_fp16_overflow(tmp_path, family, write, printed):
    rows = record("overflow")
    p = tmp_path / "train.log"
    p.write_text(write(rows))
    result = analyze(read_run(p))
    assert len(result.incidents) == 1
    inc = result.incidents[0]
    assert inc.step == _first_printed(rows, printed) and inc.hypotheses[0].pattern == "fp16-overflow"
    b3 = next(c for c in result.checks if c.id == "B3")
    assert b3.status == "fail"


def test_parlai_routine_probes_are_quiet(tmp_path):
    p = tmp_path / "train.log"
    rows = record("healthy")
    p.write_text(_parlai_scaled(rows))
    run = read_run(p)
    # the probes are read (each skip, the scale of every report) and judged routine
    assert run.frame.overflows.sum() == sum(r["skipped"] for r in rows) > 0
    assert run.frame.loss_scale.notna().sum() >= len(rows)
    assert analyze(run).incidents == []
