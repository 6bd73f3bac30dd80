"""A jump that stays is dated at the first step that left the band before it, never at the
last step inside it (blind set fresh4, issue-tf-yolov4-tflite-7: STEP 1 at 10.57, STEPs 2-10 at
98-136, was dated at 1, the lowest point of the smoothed loss). Lines are the TF2 YOLO
trainers' own (YunYang1994/TensorFlow2.0-Examples and hunglc007/tensorflow-yolov4-tflite
train.py: `tf.print("=> STEP %4d   lr: %.6f   giou_loss: %4.2f   conf_loss: %4.2f   "
"prob_loss: %4.2f   total_loss: %4.2f" % (...))`), the losses synthetic: a level with batch
noise, then a jump that stays, over several seeds, noise levels and jump sizes."""

import numpy as np
import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.diagnose.detectors.divergence import divergence, divergence_reference
from postmortem.diagnose.thresholds import Thresholds
from postmortem.run import read_run


def _line(step: int, total: float) -> str:
    giou, conf = 0.3 * total, 0.6 * total
    return ("=> STEP %4d   lr: %.6f   giou_loss: %4.2f   conf_loss: %4.2f   "
            "prob_loss: %4.2f   total_loss: %4.2f" % (step, 1e-3, giou, conf, total - giou - conf, total))


def _log(tmp_path, losses):
    p = tmp_path / "train.log"
    p.write_text("\n".join(_line(s, v) for s, v in enumerate(losses, start=1)) + "\n")
    return read_run(p)


def _divergences(log):
    return [i for i in analyze(log).incidents if i.kind == "divergence"]


def test_a_first_row_then_a_level_that_stays_is_dated_at_the_second_row(tmp_path):
    losses = [10.57, 99.71, 98.46, 128.05, 133.45, 103.46, 136.20, 125.27, 109.28, 125.71]
    [inc] = _divergences(_log(tmp_path, losses))
    assert inc.step == 2, inc


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("noise", [0.01, 0.04])
@pytest.mark.parametrize("jump", [0.6, 3.0, 9.0])
def test_a_jump_is_never_dated_before_it_left_the_band(seed, noise, jump, tmp_path):
    rng = np.random.default_rng(seed)
    n0, n1 = int(rng.integers(6, 25)), int(rng.integers(8, 30))
    level = 2.0 + rng.random()
    losses = np.r_[level * (1 + noise * rng.standard_normal(n0)),
                   level * (1 + jump) * (1 + noise * rng.standard_normal(n1))]
    losses = np.round(losses, 2)
    log = _log(tmp_path, losses)
    found = _divergences(log)
    assert found, (seed, noise, jump)
    # the jump is 15 to 900 noises: its first step is the first one out of the band
    assert found[0].step == n0 + 1, (found[0].step, n0 + 1, losses[:n0 + 2])
    # the one-point-at-a-time reference dates it the same
    th = Thresholds()
    assert [e.step for e in divergence(log, th)] == [e.step for e in divergence_reference(log, th)]
