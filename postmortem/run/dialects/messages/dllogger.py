"""The loss scale as NVIDIA/DeepLearningExamples' scripts log it through DLLogger, GNMT's scaler
and Tacotron2's NaN.

BERT (NVIDIA/DeepLearningExamples 729963d PyTorch/LanguageModeling/BERT/run_pretraining.py
`train`): after an overflow (`stats.host_stat_value('skip_optimizer_step') > 0.`)
`dllogger.log(step="PARAMETER", data={"loss_scale": grad_scaler._get_scale_async().item()})`;
before a9e2c1d (2022-03) `take_optimizer_step`: `if had_overflow: dllogger.log(step="PARAMETER",
data={"loss_scale": scaler.loss_scale()})`: the scale after the overflow's halving. NVIDIA/dllogger
v1.0.0 prints it `"DLL {} - ".format(timestamp) + "PARAMETER" + " loss_scale : 32768.0 "` (a string
step is printed as is) and writes `DLLL {"timestamp": ..., "type": "LOG", "step": "PARAMETER",
"data": {"loss_scale": 32768.0}}`. GNMT (PyTorch/Translation/GNMT/seq2seq/train/fp_optimizers.py
`FP16Optimizer.step`): `logging.info(f'Skipped batch, new scale: {self.loss_scale}')` on an
overflow (the scale divided by `dls_downscale`, 2). Tacotron2 (PyTorch/SpeechSynthesis/Tacotron2/
train.py): `if np.isnan(reduced_loss): raise Exception("loss is NaN")` before the step's loss is
logged: a NaN said in words, at the step after the last one logged.
"""

import json

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_DLE = "NVIDIA/DeepLearningExamples 729963d"

register(
    entry("dllogger.loss_scale", "DLLogger", "overflow",
          f"{_DLE} PyTorch/LanguageModeling/BERT/run_pretraining.py (train; take_optimizer_step before a9e2c1d); "
          "NVIDIA/dllogger v1.0.0 dllogger/logger.py (StdOutBackend.log)",
          'dllogger.log(step="PARAMETER", data={"loss_scale": grad_scaler._get_scale_async().item()})',
          r"\bPARAMETER loss_scale : " + scale("scale"),
          ("DLL {} - ".format("2020-06-01 12:00:00.000000") + "{} {}".format("PARAMETER", "{} : {} {}".format(
              "loss_scale", 32768.0, "")),),
          ("PARAMETER loss_scale",), after_step_line=True),
    entry("dllogger.json_loss_scale", "DLLogger", "overflow",
          f"{_DLE} PyTorch/LanguageModeling/BERT/run_pretraining.py (train); "
          "NVIDIA/dllogger v1.0.0 dllogger/logger.py (JSONStreamBackend.log)",
          '"DLLL {}\\n".format(json.dumps(dict(..., type="LOG", step="PARAMETER", data={"loss_scale": ...})))',
          r'"step": "PARAMETER", "data": \{"loss_scale": ' + scale("scale") + r"\}",
          ("DLLL " + json.dumps(dict(timestamp="1591012800.0", datetime="2020-06-01 12:00:00.000000+00:00",
                                     elapsedtime="12.5", type="LOG", step="PARAMETER", data={"loss_scale": 16384.0})),),
          ('"PARAMETER", "data": {"loss_scale"',), after_step_line=True),
    entry("gnmt.skipped", "GNMT", "overflow",
          f"{_DLE} PyTorch/Translation/GNMT/seq2seq/train/fp_optimizers.py (FP16Optimizer.step)",
          "logging.info(f'Skipped batch, new scale: {self.loss_scale}')",
          r"\bSkipped batch, new scale: " + scale("scale"),
          (f"Skipped batch, new scale: {4096.0}", "0: " + f"Skipped batch, new scale: {1024.0}"),
          ("Skipped batch, new scale",)),
    entry("tacotron2.nan", "Tacotron2", "nan_loss",
          f"{_DLE} PyTorch/SpeechSynthesis/Tacotron2/train.py (main)",
          'if np.isnan(reduced_loss): raise Exception("loss is NaN")',
          r"^Exception: loss is (?P<nan>NaN)\s*$",
          ("Exception: loss is NaN",),
          ("loss is NaN",)),
)
