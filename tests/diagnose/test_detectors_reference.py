"""Each vectorised detector of tree B held to its plain reference (a loop over the rows, as
its checklist says it) on generated runs: random walks with injected spikes, NaNs, resumes
(segments whose steps go back), uneven logging and loss-scale falls."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from postmortem.diagnose.detectors.cascades import scaler_events, scaler_events_reference
from postmortem.diagnose.detectors.divergence import divergence, divergence_reference
from postmortem.diagnose.detectors.event import Event
from postmortem.diagnose.detectors.grad_norm_spikes import grad_norm_spikes, grad_norm_spikes_reference
from postmortem.diagnose.detectors.loss_spikes import loss_spikes, loss_spikes_reference
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import RunLog
from postmortem.run.model import Source

EXAMPLES = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def segment_series(draw, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One segment's loss, grad norm and loss scale: random walks with what detectors find
    injected (spikes, a ramp, NaN and inf, falls of the scale, skipped steps)."""
    level = draw(st.sampled_from([0.05, 1.0, 3.0, 8.0]))
    noise = draw(st.sampled_from([0.001, 0.01, 0.05, 0.2]))
    offset = draw(st.sampled_from([0.0, 0.0, 0.0, -level * 1.5]))        # now and then a negative loss
    loss = level * np.exp(np.cumsum(rng.normal(-0.001, noise / 4, n))) + noise * level * rng.standard_normal(n)
    ramp_at = draw(st.integers(0, n))
    loss[ramp_at:] += draw(st.sampled_from([0.0, 0.002, 0.02])) * level * np.arange(n - ramp_at)
    for _ in range(draw(st.integers(0, 4))):                       # spikes, some over a few points
        at, width = draw(st.integers(0, n - 1)), draw(st.integers(1, 4))
        loss[at:at + width] *= draw(st.floats(1.05, 30.0))
    gn = np.exp(rng.normal(0.0, draw(st.sampled_from([0.05, 0.3, 1.0])), n)) * draw(st.sampled_from([0.1, 1.0, 50.0]))
    for _ in range(draw(st.integers(0, 4))):
        gn[draw(st.integers(0, n - 1))] *= 10 ** draw(st.floats(0.3, 4.0))
    scale = np.full(n, 2.0 ** draw(st.integers(0, 16)))
    for _ in range(draw(st.integers(0, 6))):                       # falls (halvings) and regrowth
        at = draw(st.integers(0, n - 1))
        scale[at:] *= 2.0 ** draw(st.sampled_from([-1, -1, -2, -4, 1]))
    skipped = np.full(n, math.nan) if draw(st.booleans()) else np.zeros(n)    # the scaler's own count
    for _ in range(draw(st.integers(0, 6))):
        skipped[draw(st.integers(0, n - 1))] = draw(st.integers(1, 3))
    loss += offset
    for column in (loss, gn, scale):
        for _ in range(draw(st.integers(0, 3))):
            column[draw(st.integers(0, n - 1))] = draw(st.sampled_from([math.nan, math.inf]))
    return {"loss": loss, "grad_norm": gn, "loss_scale": scale, "skipped": skipped}


@st.composite
def runs(draw) -> RunLog:
    """A run of one to three segments, each resumed from a step at or before the last one's
    end (or carrying on), logged every step or sparsely and unevenly."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    parts, step = [], draw(st.integers(0, 100))
    for seg in range(draw(st.integers(1, 3))):
        n = draw(st.integers(2, 260))
        every = draw(st.sampled_from([1, 1, 2, 10, 50]))
        gaps = np.full(n, every) if draw(st.booleans()) else rng.integers(1, 2 * every + 1, n)
        if seg:
            step = max(0, step - draw(st.integers(0, 400)))
        steps = step + np.cumsum(gaps) - gaps[0]
        step = int(steps[-1])
        parts.append(pd.DataFrame({"segment": seg, "step": steps, **draw(segment_series(n, rng))}))
    frame = pd.concat(parts, ignore_index=True)
    frame["segment"] = frame.segment.astype(np.int64)
    frame["step"] = frame.step.astype(np.int64)
    return RunLog(frame, Source("jsonl", "generated"))


# the defaults, and settings a user may give with --set (windows, margins, gaps)
thresholds = st.builds(
    Thresholds,
    spike_window=st.sampled_from([100, 100, 30, 400]), spike_min_points=st.sampled_from([10, 10, 3, 20]),
    spike_min_history=st.sampled_from([3, 1]), merge_gap=st.sampled_from([10, 10, 0, 60]),
    spike_short_log=st.sampled_from([100, 100, 20, 400]), spike_short_quantile=st.sampled_from([0.9, 0.5]),
    grad_spike_min_ratio=st.sampled_from([5.0, 2.0]), divergence_window=st.sampled_from([200, 200, 50, 600]),
    divergence_smooth=st.sampled_from([50, 50, 10]), divergence_min_points=st.sampled_from([20, 8]),
    cascade_gap=st.sampled_from([10, 10, 3, 40]), cascade_halvings=st.sampled_from([3, 3, 2, 5]))


def close(a: float | None, b: float | None, rel: float = 1e-6) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-6)


def assert_same(fast: list[Event], plain: list[Event]) -> None:
    """The same events: where and what exactly, their measures to rounding."""
    def where(e: Event) -> tuple:
        return (e.kind, e.metric, e.step, e.segment, e.peak_step, e.peak, e.end_step, e.notes.sparse,
                e.notes.points, e.notes.confirmed_at, e.notes.after, e.notes.across_gap)
    assert [where(e) for e in fast] == [where(e) for e in plain]
    # a window's std from running sums (series.window_stats) keeps their rounding: on a window
    # of one point it is not 0 but up to ~1e-4 of the level (the reference's is 0), and on a
    # quiet window far from the series' median it is off by up to ~1e-5 of itself; what is
    # divided by it (z, a spike's severity) follows
    for f, p in zip(fast, plain):
        assert close(f.window_mean, p.window_mean), (f, p)
        assert close(f.window_std, p.window_std, 1e-3) \
            or abs(f.window_std - p.window_std) < 1e-3 * (abs(p.window_mean) + 1), (f, p)
        assert close(f.severity, p.severity, 1e-3), (f, p)
        assert close(f.notes.z, p.notes.z, 1e-3), (f, p)
        for name in ("noise", "ratio", "rise", "rising_share", "scale_from", "scale_to", "halvings", "skipped"):
            assert close(getattr(f.notes, name), getattr(p.notes, name)), (name, f, p)


@EXAMPLES
@given(runs(), thresholds)
def test_loss_spikes_equal_their_reference(log, th):
    unjudged_fast: list = []
    unjudged_plain: list = []
    assert_same(loss_spikes(log, th, unjudged=unjudged_fast), loss_spikes_reference(log, th, unjudged_plain))
    assert unjudged_fast == unjudged_plain


@EXAMPLES
@given(runs(), thresholds)
def test_grad_norm_spikes_equal_their_reference(log, th):
    assert_same(grad_norm_spikes(log, th), grad_norm_spikes_reference(log, th))


@EXAMPLES
@given(runs(), thresholds)
def test_divergence_equals_its_reference(log, th):
    assert_same(divergence(log, th), divergence_reference(log, th))


@EXAMPLES
@given(runs(), thresholds)
def test_scaler_events_equal_their_reference(log, th):
    cascades, probes, drops = scaler_events(log, th)
    plain_cascades, plain_probes, plain_drops = scaler_events_reference(log, th)
    assert_same(cascades, plain_cascades)
    assert (probes, drops) == (plain_probes, plain_drops)


def test_a_level_shift_is_judged_where_no_slow_rise_can_be():
    """Hypothesis' example: a 10-point log whose loss halves for 4 points and comes back up to
    stay. No smoothed rise can reach the slow rule's margin there; the level-shift rule must
    still judge it, in the fast detector as in the reference (the fast one skipped it)."""
    steps = [0, 2, 4, 5, 6, 7, 8, 9, 10, 12]
    loss = [0.099836, 0.099787, 0.049867, 0.049845, 0.049811, 0.049695, 0.099441, 0.099081, 0.099078, 0.099003]
    frame = pd.DataFrame({"segment": 0, "step": steps, "loss": loss, "loss_scale": 1.0, "skipped": 0.0})
    log = RunLog(frame=frame, source=Source(format="jsonl", path="generated"))
    th = Thresholds(spike_window=100, spike_min_points=10, spike_min_history=3, merge_gap=10,
                    divergence_window=200, divergence_smooth=50, divergence_min_points=20)
    fast, plain = divergence(log, th), divergence_reference(log, th)
    assert plain, "the reference judges the jump back up"
    assert_same(fast, plain)
