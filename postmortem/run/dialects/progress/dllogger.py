"""NVIDIA DLLogger's lines, as NVIDIA/DeepLearningExamples' scripts print them.

Read from NVIDIA/dllogger v1.0.0 dllogger/logger.py: `StdOutBackend.log` prints
"{}{} {}".format(self.prefix_format(timestamp), self.step_format(step), " ".join(metric_format(m,
metadata, v))) with `default_prefix_format` "DLL {} - ".format(timestamp), `default_step_format`
`str(step)` (a tuple: `(0, 100)`) and `default_metric_format` "{} : {} {}".format(metric, value,
unit); `JSONStreamBackend.log` writes "DLLL {}\\n".format(json.dumps(dict(timestamp=...,
datetime=..., elapsedtime=..., type="LOG", step=step, data=data))). DeepLearningExamples
(729963d, 2024-04) PyTorch/LanguageModeling/BERT/utils.py `format_step`: "Training Epoch: {} " +
"Training Iteration: {} " (+ "Validation Iteration: {} "), run_pretraining.py logging
`step=(epoch, global_step)` with `average_loss`, `step_loss`, `learning_rate` (2020-2021) or
`average_loss`, `learning_rate`, `skipped_steps` (2022 on); PyTorch/SpeechSynthesis/Tacotron2/
train.py `step=(epoch, i)` (the batch within the epoch), one key a line (`train_loss`,
`train_items_per_sec`, ...) by the default step format; PyTorch/LanguageModeling/Transformer-XL/
pytorch/train.py `step=tuple([train_step])` with `epoch`, `train_batch`, `lr`, `train_loss`,
`train_perplexity`; PyTorch/Segmentation/nnUNet nn_unet.py `step=self.current_epoch` (an int) with
`Dice`, `Val Loss`, `Max Dice`, `Best epoch` (not the step), `Train Loss`. The scale lines are in
messages/dllogger.py.
"""

from __future__ import annotations

import json

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry
from postmortem.run.dialects.progress import TRAIN_BESIDE_VAL

_DLL = "NVIDIA/dllogger v1.0.0 dllogger/logger.py (StdOutBackend.log, default_*_format)"
_DLE = "NVIDIA/DeepLearningExamples 729963d"
_TS = "2020-06-01 12:00:00.000000"


def _format_step(step: tuple[int, ...]) -> str:
    """BERT's utils.py `format_step` (a tuple)."""
    s = ""
    if len(step) > 0:
        s += "Training Epoch: {} ".format(step[0])
    if len(step) > 1:
        s += "Training Iteration: {} ".format(step[1])
    if len(step) > 2:
        s += "Validation Iteration: {} ".format(step[2])
    return s


def _stdout(step: str, data: dict) -> str:
    return "DLL {} - ".format(_TS) + "{} {}".format(step, " ".join("{} : {} {}".format(k, v, "") for k, v in data.items()))


def _json(step, data: dict) -> str:
    return "DLLL {}".format(json.dumps(dict(timestamp="1591012800.0", datetime=_TS + "+00:00",
                                            elapsedtime="12.5", type="LOG", step=step, data=data)))


register(
    entry("dllogger.bert", "DLLogger", "progress",
          f"{_DLL}; {_DLE} PyTorch/LanguageModeling/BERT/utils.py (format_step), run_pretraining.py",
          '"{}{} {}".format("DLL {} - ".format(timestamp), format_step(step), " ".join("{} : {} {}"...))  '
          'format_step: "Training Epoch: {} " + "Training Iteration: {} "',
          r"\bDLL .{0,40}? - Training Epoch: (?P<epoch>\d+) Training Iteration: (?P<step>\d+)  ",
          (_stdout(_format_step((0, 100)), {"average_loss": 7.51234, "step_loss": 7.4123, "learning_rate": 0.0001}),
           _stdout(_format_step((1, 7038)), {"average_loss": 1.6123, "learning_rate": 0.004, "skipped_steps": 3})),
          ("DLL ",)),
    entry("dllogger.tuple", "DLLogger", "progress",
          f"{_DLL}; {_DLE} PyTorch/SpeechSynthesis/Tacotron2/train.py (step=(epoch, i)), "
          "PyTorch/LanguageModeling/Transformer-XL/pytorch/train.py (step=tuple([train_step]))",
          '"{}{} {}".format("DLL {} - ".format(timestamp), str(step), " ".join("{} : {} {}"...))',
          r"\bDLL .{0,40}? - \((?:(?P<epoch>\d+), (?P<step>\d+)|(?P<iter>\d+),)\) \w",
          (_stdout(str((3, 120)), {"train_loss": 0.51234}),
           _stdout(str((1000,)), {"epoch": 1, "train_batch": 1000, "lr": 0.00025, "train_loss": 5.23,
                                  "train_perplexity": 186.8})),
          ("DLL ",)),
    entry("dllogger.int", "DLLogger", "progress",
          f"{_DLL}; {_DLE} PyTorch/Segmentation/nnUNet/utils/logger.py (log_metrics), nnunet/nn_unet.py "
          "(validation_epoch_end: step=self.current_epoch)",
          '"{}{} {}".format("DLL {} - ".format(timestamp), str(step), " ".join("{} : {} {}"...))  # step an int',
          r"\bDLL .{0,40}? - (?P<step>\d+) (?=[A-Z][\w ]* : )",
          (_stdout(str(12), {"Dice": 87.12, "Val Loss": 0.3123, "Max Dice": 87.5, "Best epoch": 9,
                             "Train Loss": 0.2841}),),
          ("DLL ",)),
    entry("dllogger.json", "DLLogger", "progress",
          "NVIDIA/dllogger v1.0.0 dllogger/logger.py (JSONStreamBackend.log); " + _DLE
          + " BERT run_pretraining.py, Tacotron2 train.py, Transformer-XL train.py",
          '"DLLL {}\\n".format(json.dumps(dict(timestamp=..., datetime=..., elapsedtime=..., type="LOG", '
          'step=step, data=data)))',
          r'^DLLL \{.*"type": "LOG", "step": \[(?:(?P<epoch>\d+), )?(?P<step>\d+)\], "data": \{',
          (_json([0, 100], {"average_loss": 7.51234, "step_loss": 7.4123, "learning_rate": 0.0001}),
           _json([1000], {"epoch": 1, "train_batch": 1000, "lr": 0.00025, "train_loss": 5.23})),
          ("DLLL ",)),
    entry("dllogger.json_int", "DLLogger", "progress",
          "NVIDIA/dllogger v1.0.0 dllogger/logger.py (JSONStreamBackend.log); " + _DLE
          + " PyTorch/Segmentation/nnUNet/nnunet/nn_unet.py (step=self.current_epoch)",
          '"DLLL {}\\n".format(json.dumps(dict(..., type="LOG", step=step, data=data)))  # step an int',
          r'^DLLL \{.*"type": "LOG", "step": (?P<step>\d+), "data": \{',
          (_json(12, {"Dice": 87.12, "Val Loss": 0.3123, "Max Dice": 87.5, "Best epoch": 9, "Train Loss": 0.2841}),),
          ("DLLL ",)),
)

# nnUNet's `Train Loss` beside `Val Loss` is the epoch's mean train loss
TRAIN_BESIDE_VAL.update(("dllogger.int", "dllogger.json_int"))
