"""The families of the fourth blind set whose NaN rows were lost while reading, each built from
the framework's own format strings: PaddleDetection's LogPrinter row whose every value is `nan`
(read as prose: its `nan`s counted as words)."""

import math

import numpy as np

from postmortem.run import read_run


def _read(tmp_path, lines, name="train.log"):
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return read_run(log)


def _ppdet_row(epoch, step, steps_per_epoch, losses, space_fmt=None):
    # PaddlePaddle/PaddleDetection 2.1..2.5 ppdet/engine/callbacks.py (LogPrinter.on_step_end):
    # ' '.join(['Epoch: [{}]', '[{' + space_fmt + '}/{}]', 'learning_rate: {lr:.6f}', '{meters}',
    # 'eta: {eta}', 'batch_cost: {btime}', 'data_cost: {dtime}', 'ips: {ips:.4f} images/s']) with
    # space_fmt = ':' + str(len(str(steps_per_epoch))) + 'd' (release/2.6: '{:>4}'), meters from
    # ppdet/utils/stats.py TrainingStats.log(): ' '.join("{}: {}".format(k, format(median, '.6f')))
    space_fmt = space_fmt or ':' + str(len(str(steps_per_epoch))) + 'd'
    fmt = ' '.join(['Epoch: [{}]', '[{' + space_fmt + '}/{}]', 'learning_rate: {lr:.6f}', '{meters}',
                    'eta: {eta}', 'batch_cost: {btime}', 'data_cost: {dtime}', 'ips: {ips:.4f} images/s'])
    meters = ' '.join("{}: {}".format(k, format(v, '.6f')) for k, v in losses.items())
    line = fmt.format(epoch, step, steps_per_epoch, lr=step * 1.5e-7, meters=meters, eta="2 days, 10:30:59",
                      btime="{:.4f}".format(0.6293), dtime="{:.4f}".format(0.0067), ips=12.7126)
    # ppdet/utils/logger.py setup_logger: '[%(asctime)s] %(name)s %(levelname)s: %(message)s', '%m/%d %H:%M:%S'
    return "[07/01 17:48:%02d] ppdet.engine INFO: " % step + line


YOLO_LOSSES = ("loss_xy", "loss_wh", "loss_iou", "loss_iou_aware", "loss_obj", "loss_cls", "loss")


def test_ppdet_row_whose_every_loss_is_nan_is_a_row(tmp_path):
    nan = float("nan")
    for space_fmt in (None, ':>4'):
        rows = [_ppdet_row(0, 0, 800, dict(zip(YOLO_LOSSES, (10.9, 38.6, 45.0, 6.03, 30990.1, 55.9, 31146.6))),
                           space_fmt),
                _ppdet_row(0, 20, 800, dict.fromkeys(YOLO_LOSSES, nan), space_fmt)]
        f = _read(tmp_path, ["ppyolov2_r50:"] + rows).frame.set_index("step")
        assert list(f.index) == [0, 20], space_fmt
        assert f.loss.iloc[0] == 31146.6 and math.isnan(f.loss.iloc[1])
        assert np.isnan(f.loss_obj.iloc[1]) and f.lr.iloc[1] > 0
