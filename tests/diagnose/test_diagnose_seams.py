"""What crosses between the detectors, the Context and the patterns is named: a restart is a
Resume, a fall of the scale across a hole a ScaleDrop, the scaler's events a ScalerEvents,
another run an OtherRun, and rank's scores are read by name."""

import numpy as np
from test_diagnose_cases import write
from test_diagnose_partial_logs import holed_fp16_rows

from postmortem.diagnose.context import Context, OtherRun
from postmortem.diagnose.detectors.cascades import ScaleDrop, ScalerEvents
from postmortem.diagnose.detectors.resumes import Resume
from postmortem.diagnose.patterns import measure
from postmortem.run import read_run


def test_a_restart_is_a_resume_with_its_step_how_and_segment(tmp_path):
    steps = [*range(0, 100), *range(90, 200)]
    ctx = Context(write(tmp_path, [{"step": s, "loss": 3.0} for s in steps]))
    assert ctx.resumes == [Resume(90, "steps went back from 99 to 90", 1)]


def test_a_scale_fallen_across_a_hole_is_a_scale_drop_among_the_scalers_events(tmp_path):
    ctx = Context(write(tmp_path, holed_fp16_rows(), {"dtype": "fp16"}))
    assert isinstance(ctx.scaler, ScalerEvents) and ctx.cascades == ctx.scaler.cascades == []
    assert ctx.scale_drops == [ScaleDrop(after=1000, step=3000, scale_from=65536.0, scale_to=1024.0,
                                         halvings=6.0, segment=0)]


def test_another_run_is_matched_by_name_and_its_spike_at_the_same_step_is_found(tmp_path):
    rng = np.random.default_rng(0)
    rows = [{"step": s, "loss": float(3.0 + 0.02 * rng.standard_normal()) + (4.0 if s == 300 else 0.0)}
            for s in range(600)]
    mine, theirs = Context(write(tmp_path / "a", rows)), Context(write(tmp_path / "b", rows))
    other = theirs.as_other()
    assert isinstance(other, OtherRun) and (other.first_step, other.last_step) == (0, 599)
    assert [e.step for e in other.spikes] == [300]
    ctx = Context(mine.log, others=[other])
    [spike] = [e for e in ctx.loss_spikes if e.step == 300]
    assert measure(ctx, spike).same_step[0].startswith(f"{other.run_id} spikes at step 300 too")


def test_the_mae_logs_restarts_are_resumes_in_step_order(real_runs):
    resumes = Context(read_run(real_runs / "mae-logtxt-pretrain-resumes")).resumes
    assert len(resumes) == 5 and all(isinstance(r, Resume) for r in resumes)
    assert resumes[0] == Resume(561, "steps went back from 569 to 561", 1)
