"""A loss scale read on one logged row is judged, not said as 'no scale logged' (blind set
fresh2, family 7). No scaler starts below 1 (torch GradScaler's init_scale 2^16, DeepSpeed's
initial_scale_power 16 or 32, Megatron's initial_loss_scale 2^32): one value far below 1 is a
persistent overflow, the halvings it implies said with the start assumed. Every step of the
first interval skipped down to a power of two is the scaler's start-up search (Megatron: 2^32
less 9 halvings with hysteresis 2 after 10 skips is 2^23); the same counter later is a cascade.
Lines are built from the frameworks' format strings behind their logger prefixes."""

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run


def _icefall(batch: int, scale: float, loss: str = "0.6675", release: str = "zipformer") -> str:
    """icefall's batch line (k2-fsa/icefall egs/librispeech/ASR/zipformer/train.py and
    pruned_transducer_stateless7/train.py `train_one_epoch`: f"Epoch {params.cur_epoch}, batch
    {batch_idx}, loss[{loss_info}], tot_loss[{tot_loss}], batch size: {batch_size}, lr: {cur_lr:.2e}, "
    + (f"grad_scale: {scaler._scale.item()}" if params.use_fp16 else "")), behind its
    `logging` prefix; vall-e v0.4.0's trainer.py copies it as `train_loss[...]`."""
    prefix = {"zipformer": "2025-05-20 02:38:47,195 INFO [train.py:1056] (7/8) ",
              "valle": "2023-03-06 12:41:16,653 INFO [trainer.py:694] (2/4) "}[release]
    name = "train_loss" if release == "valle" else "loss"
    return (f"{prefix}Epoch 1, batch {batch}, {name}[loss={loss}, simple_loss=0.6511, over 19153.00 frames. ], "
            f"tot_loss[loss={loss}, simple_loss=0.5909, over 37589436.30 frames. ], batch size: 130, "
            f"lr: {2.73e-02:.2e}, grad_scale: {scale}")


def _megatron(it: int, scale: float, skipped: int) -> str:
    """Megatron-LM's training_log line (megatron/training.py, v2.5..core: `loss scale: {:.1f}`,
    `number of skipped iterations: {:3d}`, the skips since the line before)."""
    return (" iteration {:8d}/{:8d} |".format(it, 1000000) + " consumed samples: {:12d} |".format(it * 4)
            + " elapsed time per iteration (ms): 356.2 |" + " learning rate: {:.3E} |".format(0.0)
            + " global batch size: {:5d} |".format(4) + " loss scale: {:.1f} |".format(scale)
            + " number of skipped iterations: {:3d} |".format(skipped) + " number of nan iterations: {:3d} |".format(0))


def _b3(lines, tmp_path):
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    report = analyze(read_run(p))
    return next(c for c in report.checks if c.id == "B3"), report.incidents


@pytest.mark.parametrize("scale,halvings", [(6.103515625e-05, "at least 14 halvings"), (2.0 ** -20, "at least 20")])
def test_one_scale_far_below_1_is_a_persistent_overflow(scale, halvings, tmp_path):
    """icefall's scale at 2^-14 on its one logged batch line: ~30 halvings in a row from 2^16."""
    b3, incidents = _b3([_icefall(14300, scale)], tmp_path)
    assert b3.status == "fail", b3.detail
    assert "persistent overflow" in b3.detail and halvings in b3.detail and "2^16, assumed" in b3.detail
    assert "no scale logged" not in b3.detail
    assert [(i.step, i.hypotheses[0].pattern) for i in incidents] == [(14300, "fp16-overflow")]


def test_one_scale_printed_as_0_with_a_nan_loss(tmp_path):
    """vall-e's `grad_scale: 0.0` beside a NaN loss: a persistent overflow, the NaN on fp16."""
    b3, incidents = _b3([_icefall(8500, 0.0, loss="nan", release="valle")], tmp_path)
    assert b3.status == "fail" and "persistent overflow" in b3.detail and "0 as printed" in b3.detail, b3.detail
    assert "no scale logged" not in b3.detail
    assert [(i.kind, i.step, i.hypotheses[0].pattern) for i in incidents] == [("nan", 8500, "fp16-overflow")]


def test_megatron_first_interval_all_skipped_is_the_start_up_search(tmp_path):
    """10 of 10 iterations skipped by iteration 10 with the scale at 2^23: quiet, and said so."""
    b3, incidents = _b3([_megatron(10, 2.0 ** 23, 10)], tmp_path)
    assert b3.status == "pass" and "start-up search" in b3.detail and "2^23" in b3.detail, b3.detail
    assert "no scale logged" not in b3.detail
    assert incidents == []


def test_megatron_interval_all_skipped_later_is_a_cascade(tmp_path):
    """The same counter at iteration 5000, all 10 of the interval skipped: a cascade."""
    b3, _ = _b3([_megatron(5000, 2.0 ** 10, 10)], tmp_path)
    assert b3.status == "fail" and "10 skipped" in b3.detail, b3.detail
    assert "no scale logged" not in b3.detail


def test_one_ordinary_scale_is_quiet_and_said(tmp_path):
    """Control: icefall's usual scale (32.0) on one line: no cascade, the value said."""
    b3, incidents = _b3([_icefall(14300, 32.0)], tmp_path)
    assert b3.status == "pass" and "1 logged value(s) of the loss scale, 32" in b3.detail, b3.detail
    assert incidents == []
