"""MindSpore's loss-scale callbacks: `TrainOneStepWithLossScaleCell` returns (loss, overflow,
scale), and the model zoo's `LossCallBack`s print all three each step.

Read from mindspore-ai/models (r1.8..r2.2) official/nlp/Pangu_alpha/src/callbacks.py and the
recipes that copy it (`print("time: {} local_rank: {}, epoch: {}, step: {}, loss is {}, overflow
is {}, loss scale is {}".format(...))`, the last two `.asnumpy()`: `True` / `False` and `65536.0`).
An overflowing step is skipped (the cell's `if not overflow: optimizer(grads)`) and the
`DynamicLossScaleUpdateCell` divides the scale by its `scale_factor`.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_ZOO = "mindspore-ai/models r1.8..r2.2 official/nlp/Pangu_alpha/src/callbacks.py (LossCallBack.step_end)"
_FMT = ('print("time: {} local_rank: {}, epoch: {}, step: {}, loss is {}, overflow is {}, loss scale is {}"'
        '.format(date, local_rank, epoch, cur_step_num, loss_value, overflow, scale))')


def _line(step, overflow, value):
    return ("time: {} local_rank: {}, epoch: {}, step: {}, loss is {}, overflow is {}, loss scale is {}"
            .format("2022-03-01 10:00:00", 0, 1, step, 7.25, overflow, value))


register(
    entry("mindspore.overflow", "MindSpore", "overflow", _ZOO, _FMT,
          r"step: (?P<step>\d+), loss is .*?, overflow is True, loss scale is " + scale("scale"),
          (_line(120, True, 32768.0),),
          ("overflow is True",)),
    entry("mindspore.scale", "MindSpore", "scale", _ZOO, _FMT,
          r"step: (?P<step>\d+), loss is .*?, overflow is False, loss scale is " + scale("scale"),
          (_line(121, False, 32768.0),),
          ("overflow is False",)),
)
