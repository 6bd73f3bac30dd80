"""MindSpore's loss-scale callbacks: `TrainOneStepWithLossScaleCell` returns (loss, overflow,
scale), and the model zoo's `LossCallBack`s print all three each step.

Read from mindspore-ai/models (r1.8..r2.2) official/nlp/Pangu_alpha/src/callbacks.py and the
recipes that copy it (`print("time: {} local_rank: {}, epoch: {}, step: {}, loss is {}, overflow
is {}, loss scale is {}".format(...))`, the last two `.asnumpy()`: `True` / `False` and `65536.0`).
An overflowing step is skipped (the cell's `if not overflow: optimizer(grads)`) and the
`DynamicLossScaleUpdateCell` divides the scale by its `scale_factor`.

The BERT recipes (mindspore-ai/models official/nlp/Bert/src/utils.py `LossCallBack.step_end`, and
mindspore's model_zoo before r1.3) print the three outputs as the cell returns them: `print("epoch:
{}, step: {}, outputs are {}".format(epoch, step, str(cb_params.net_outputs)))`, each a Tensor's
str: `Tensor(shape=[], dtype=Bool, value= True)` (`value=` since MindSpore 1.1; before, the value
alone).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import NUM, entry, scale

_ZOO = "mindspore-ai/models r1.8..r2.2 official/nlp/Pangu_alpha/src/callbacks.py (LossCallBack.step_end)"
_FMT = ('print("time: {} local_rank: {}, epoch: {}, step: {}, loss is {}, overflow is {}, loss scale is {}"'
        '.format(date, local_rank, epoch, cur_step_num, loss_value, overflow, scale))')


def _line(step, overflow, value):
    return ("time: {} local_rank: {}, epoch: {}, step: {}, loss is {}, overflow is {}, loss scale is {}"
            .format("2022-03-01 10:00:00", 0, 1, step, 7.25, overflow, value))


# the callback's loss: `np.mean(loss.asnumpy())`, a float (a copy printing the array: `[7.25]`),
# read as the row's loss (the line is the run's metric line: `pairs.parse`)
_LOSS = r"\[?\s*(?P<loss>" + NUM + r")\s*\]?"

_BERT = ("mindspore-ai/models r1.5..r2.2 official/nlp/Bert/src/utils.py (LossCallBack.step_end); "
         "mindspore-ai/mindspore r1.0..r1.2 model_zoo/official/nlp/bert/src/utils.py")
_BERT_FMT = ('print("epoch: {}, step: {}, outputs are {}".format(cb_params.cur_epoch_num, cb_params.cur_step_num, '
             'str(cb_params.net_outputs)))  # (loss, overflow, scale) Tensors')
_TENSOR = r"Tensor\(shape=\[\d*\], dtype=\w+, (?:value=\s*)?"


def _outputs(step, overflow, value, word="value= "):
    return (f"epoch: 1, step: {step}, outputs are (Tensor(shape=[1], dtype=Float32, {word}[ 7.25000000e+00]), "
            f"Tensor(shape=[], dtype=Bool, {word}{overflow}), Tensor(shape=[], dtype=Float32, {word}{value}))")


def _bert(flag: str) -> str:
    return (r"step: (?P<step>\d+), outputs are \(" + _TENSOR + r"[^)]*\), " + _TENSOR + flag + r"\), "
            + _TENSOR + scale("scale") + r"\)\)")


register(
    entry("mindspore.outputs.overflow", "MindSpore", "overflow", _BERT, _BERT_FMT, _bert("True"),
          (_outputs(120, True, 32768), _outputs(7, True, "65536.0", word="")),
          ("value= True), Tensor", "Bool, True), Tensor")),
    entry("mindspore.outputs.scale", "MindSpore", "scale", _BERT, _BERT_FMT, _bert("False"),
          (_outputs(121, False, 32768),),
          ("value= False), Tensor", "Bool, False), Tensor")),
    entry("mindspore.overflow", "MindSpore", "overflow", _ZOO, _FMT,
          r"step: (?P<step>\d+), loss is " + _LOSS + r", overflow is True, loss scale is " + scale("scale"),
          (_line(120, True, 32768.0),),
          ("overflow is True",)),
    entry("mindspore.scale", "MindSpore", "scale", _ZOO, _FMT,
          r"step: (?P<step>\d+), loss is " + _LOSS + r", overflow is False, loss scale is " + scale("scale"),
          (_line(121, False, 32768.0),),
          ("overflow is False",)),
)
