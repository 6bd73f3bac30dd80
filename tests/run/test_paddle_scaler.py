"""Paddle's GradScaler message read into the loss-scale series, and scaler messages after the
last step line dated one iteration each (blind set fresh4, issue-paddleclas-2457).

Paddle prints, in python/paddle/amp/grad_scaler.py `AmpScaler._update` (2.2..2.6; the same
words in python/paddle/fluid/dygraph/amp/loss_scaler.py before): `'Found inf or nan, current
scale is: {}, decrease to: {}*{}'.format(float(self._scale), float(self._scale),
float(self._decr_ratio))`, then `self._scale = self._scale * self._decr_ratio`: the new scale is
the printed product, X/2 for the default decr_ratio. The step lines are PaddleClas's
ppcls/engine/train/utils.py `log_info` line behind its logger prefix."""

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.run import read_run


def _paddle(scale: float, ratio: float = 0.5) -> str:
    return "Found inf or nan, current scale is: {}, decrease to: {}*{}".format(
        float(scale), float(scale), float(ratio))


def _ppcls(epoch: int, it: int, loss: float) -> str:
    """PaddleClas `log_info`: "[Train][Epoch {}/{}][Iter: {}/{}]{}, {}, {}, {}, {}" with the lr
    (`lr({}): {:.8f}`), the losses (`{}: {:.5f}`), batch_cost/reader_cost/ips and the eta."""
    return ("[2022/11/08 14:54:54] ppcls INFO: [Train][Epoch {}/{}][Iter: {}/{}]lr(LinearWarmup): {:.8f}, "
            "CELoss: {:.5f}, loss: {:.5f}, batch_cost: 0.54552s, reader_cost: 0.41536, "
            "ips: 117.31981 samples/s, eta: 1 day, 20:18:47").format(epoch, 800, it, 366, 0.05, loss, loss)


def _read(tmp_path, lines):
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return read_run(p)


@pytest.mark.parametrize("start,ratio,k", [(2.0 ** -15, 0.5, 10), (32768.0, 0.5, 4), (1024.0, 0.8, 6)])
def test_the_printed_product_is_the_new_scale(start, ratio, k, tmp_path):
    scales = [start * ratio ** n for n in range(k)]
    log = _read(tmp_path, [_ppcls(2, 0, 12.44)] + [_paddle(s, ratio) for s in scales])
    f = log.frame.set_index("step")
    # the scale before the first message (on the step line's step), then one per message
    assert f.loss_scale.dropna().tolist() == pytest.approx([start] + [s * ratio for s in scales])
    assert f.overflows.dropna().index.tolist() == list(range(1, k + 1))


def test_messages_after_the_last_step_line_are_one_iteration_each(tmp_path):
    log = _read(tmp_path, [_ppcls(1, it, 3.0 - it / 100) for it in range(0, 40, 10)]
                + [_paddle(8.0 / 2 ** n) for n in range(5)])
    f = log.frame.set_index("step")
    assert f.skipped.dropna().index.tolist() == [31, 32, 33, 34, 35]
    said = log.source.extras["events_placed"]
    assert "after the last step line L" in said and "L+1..L+5" in said


def test_messages_between_step_lines_keep_their_dating(tmp_path):
    lines = [_ppcls(1, 0, 3.0), _paddle(64.0), _paddle(32.0), _ppcls(1, 10, 2.9)]
    f = _read(tmp_path, lines).frame.set_index("step")
    assert f.skipped.dropna().index.tolist() == [9, 10]
    assert f.loss_scale.dropna().tolist() == [64.0, 32.0, 16.0]


def test_a_cascade_far_below_1_is_a_persistent_overflow(tmp_path):
    log = _read(tmp_path, [_ppcls(2, 0, 12.44)] + [_paddle(2.0 ** -15 / 2 ** n) for n in range(10)])
    report = analyze(log)
    b3 = next(c for c in report.checks if c.id == "B3")
    assert b3.status == "fail" and "persistent overflow" in b3.detail, b3.detail
    top = report.incidents[0]
    assert top.shown_kind == "cascade" and top.step == 0 and top.hypotheses[0].pattern == "fp16-overflow", top


def test_the_text_reader_dates_deepspeed_messages_after_the_last_dict_the_same(tmp_path):
    """HF Trainer's console dicts (`ProgressCallback.on_log`: `print(logs)` of
    `{'loss': ..., 'learning_rate': ..., 'epoch': ...}`) with DeepSpeed's ZeRO scaler message
    (deepspeed/runtime/fp16/loss_scaler.py: `[deepspeed] OVERFLOW! Rank {rank} Skipping step.
    Attempted loss scale: {int(self.cur_scale)}, reducing to {int(next_scale)}`) after the last
    dict: the general text reader's path, one iteration each."""
    lines = ["{'loss': 2.31, 'learning_rate': 4.9e-05, 'epoch': 0.01}",
             "{'loss': 2.2, 'learning_rate': 4.8e-05, 'epoch': 0.02}"]
    lines += ["[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: %d, reducing to %d"
              % (2 ** k, 2 ** (k - 1)) for k in range(16, 12, -1)]
    log = _read(tmp_path, lines)
    f = log.frame.set_index("step")
    assert f.skipped.dropna().index.tolist() == [3, 4, 5, 6]
    assert f.loss_scale.dropna().tolist() == [65536, 32768, 16384, 8192, 4096]
    assert "L+1..L+4" in log.source.extras["events_placed"]
