"""Divergences of shapes the earlier sets did not name (issue 25b): a jump to a level that
stays until the LR is cut (pytorch-wordlm's epoch 4), and a loss that falls through warmup
and climbs back to the unigram plateau as the LR nears its peak, on the second trainer's
real runs logged every step, every 50 steps or as Megatron averages; their controls (the
same run at half the LR: a bump as warmup ends that comes back) stay quiet."""

import sys
from pathlib import Path

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "real_runs"
WORDLM = SHARED / "pytorch-wordlm-rnntanh-diverge-anneal"


@pytest.mark.skipif(not WORDLM.exists(), reason="shared real runs not here")
def test_a_blow_up_to_a_plateau_that_the_lr_cut_ends_is_a_divergence_of_its_own():
    # epoch 4 with lr 20: 12.21 at batch 1600 -> 13.96 -> 15.97 -> 17.21 -> 17.34, held until
    # the script quarters the LR at epoch 5 (INDEX.md); the earlier climb of epochs 1-2 came
    # back down by itself first, so it does not swallow this one
    analysis = analyze(read_run(WORDLM))
    later = [i for i in analysis.incidents if i.step > 9149]
    assert [i.kind for i in later] == ["divergence"]
    inc = later[0]
    assert 10549 <= inc.step <= 10749          # the first point above the band before it
    top = inc.hypotheses[0]
    assert top.pattern == "lr-too-high" and top.score > 0
    assert any("LR cut to 5" in o.observation for o in top.supported_by)
    b4 = next(c for c in analysis.checks if c.id == "B4")
    assert b4.status == "fail" and "to 17.34 from step 10749 and stayed above" in b4.detail, b4.detail


@pytest.mark.skipif(not (SHARED / "issue-simmim-15-gradnorm-avg-nan").exists(), reason="shared real runs not here")
def test_two_pasted_excerpts_far_apart_are_no_jump():
    # SimMIM #15: lines 8406-8857 (loss 0.44-0.47), then 13761-14361 (0.49-0.53), 4,900 steps
    # later: the later window is not a jump from the earlier one, and by itself it is flat
    analysis = analyze(read_run(SHARED / "issue-simmim-15-gradnorm-avg-nan"))
    assert [i for i in analysis.incidents if i.kind == "divergence"] == []
    assert next(c for c in analysis.checks if c.id == "B4").status == "pass"


torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy"))

import formats  # noqa: E402
from trainer2 import Spec, train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")     # conftest: torch on one thread

_TRAINED: dict = {}


def _run(tmp_path, spec: Spec, fmt: str, interval: int):
    if spec not in _TRAINED:
        _TRAINED[spec] = train(spec)
    result = _TRAINED[spec]
    d = tmp_path / f"{fmt}-{interval}"
    formats.WRITERS[fmt](result.records, {**result.meta, "seed": spec.seed}, d, interval=interval)
    return analyze(read_run(d))


def _sgd(lr: float, seed: int) -> Spec:
    """SGD with Nesterov momentum, 100 steps of warmup to `lr`, linear decay: at 4 the loss
    falls to about 2.2 by step 60 and climbs to the unigram plateau (about 3 nats) for good;
    at 2 it bumps as warmup ends and comes back."""
    return Spec(kind="lr-too-high", optimizer="sgd", steps=800, warmup=100, lr=lr, min_lr=lr / 10, seed=seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed,fmt,interval,lo,hi", [(22, "jsonl", 1, 50, 150), (22, "jsonl", 50, 50, 150),
                                                  (21, "megatron", 50, 50, 150), (21, "epochs", 50, 1, 2)])
def test_a_loss_that_climbs_back_to_the_unigram_plateau_after_warmup_is_a_divergence(tmp_path, seed, fmt, interval,
                                                                                     lo, hi):
    analysis = _run(tmp_path, _sgd(4.0, seed), fmt, interval)
    assert [i.kind for i in analysis.incidents] == ["divergence"]
    inc = analysis.incidents[0]
    # the lowest loss is near step 60-80; the first logged point above the band after it
    assert lo <= inc.step <= hi, inc.step          # (an epoch log: epoch 1 or 2 of 16)
    assert inc.hypotheses[0].pattern == "lr-too-high" and inc.hypotheses[0].score > 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [21, 22])
@pytest.mark.parametrize("fmt,interval", [("jsonl", 1), ("jsonl", 50), ("jsonl", 100), ("megatron", 50),
                                          ("epochs", 50)])
def test_a_bump_as_warmup_ends_that_comes_back_is_no_incident(tmp_path, seed, fmt, interval):
    spec = _sgd(2.0, seed)
    analysis = _run(tmp_path, Spec(**{**spec.__dict__, "kind": "healthy"}), fmt, interval)
    assert analysis.incidents == []
