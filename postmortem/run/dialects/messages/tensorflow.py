"""A NaN loss said only in words: TensorFlow's NanTensorHook and the trainers that copy it.

tensorflow/tensorflow r1.0 to v2.15 tensorflow/python/training/basic_session_run_hooks.py
(`NanTensorHook.after_run`): `failure_message = "Model diverged with loss = NaN."`, then
`logging.error(failure_message)` and `raise NanLossDuringTrainingError` (fail_on_nan_loss, the
default: tf.estimator's and tensor2tensor's runs end there), else `logging.warning`. Under
tf.logging it reads `ERROR:tensorflow:Model diverged with loss = NaN.`, under absl
`E1108 10:00:00.123456 140 basic_session_run_hooks.py:760] Model diverged with loss = NaN.`;
tf.contrib.learn's `NanLoss` monitor (r1.0 to r1.15 contrib/learn/python/learn/monitors.py)
prints the same words; the error's own text is "NaN loss during training."
(`NanLossDuringTrainingError.__str__`). OpenNMT-tf 2.x (opennmt/training.py `Trainer._steps`,
v2.0.0 to v2.32.0) raises `RuntimeError("Model diverged with loss = NaN.")`, so the words end
a traceback; TF's CIFAR-10 tutorial and its copies `assert not np.isnan(loss_value), 'Model
diverged with loss = NaN'`. The hook checks the loss of the step it ran, which the trainer
never logs: the NaN belongs to the step after the last one logged (`pairs.said_nan`).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("tensorflow.nan_hook", "TensorFlow", "nan_loss",
          "tensorflow/tensorflow r1.0-v2.15 tensorflow/python/training/basic_session_run_hooks.py "
          "(NanTensorHook.after_run); r1.15 tensorflow/contrib/learn/python/learn/monitors.py (NanLoss); "
          "OpenNMT/OpenNMT-tf v2.0.0-v2.32.0 opennmt/training.py (Trainer._steps)",
          'failure_message = "Model diverged with loss = NaN."; logging.error(failure_message)',
          r"\bModel diverged with loss = (?P<nan>NaN)\b",
          ("ERROR:tensorflow:Model diverged with loss = NaN.",
           "E1108 10:00:00.123456 140 basic_session_run_hooks.py:760] Model diverged with loss = NaN.",
           "RuntimeError: Model diverged with loss = NaN.",
           "AssertionError: Model diverged with loss = NaN"),
          ("Model diverged",)),
    entry("tensorflow.nan_error", "TensorFlow", "nan_loss",
          "tensorflow/tensorflow r1.0-v2.15 tensorflow/python/training/basic_session_run_hooks.py "
          "(NanLossDuringTrainingError.__str__)",
          'return "NaN loss during training."',
          r"\b(?P<nan>NaN) loss during training\.",
          ("tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: "
           "NaN loss during training.",),
          ("NaN loss during",)),
)

# A checkpoint's weights loaded: an event, no segment of its own (the run may go on from it
# or start its counters again).
register(
    entry("tensorflow.restore", "TensorFlow", "checkpoint",
          "tensorflow/tensorflow r1.0-v2.15 tensorflow/python/training/saver.py (Saver.restore); "
          "OpenNMT/OpenNMT-tf v1.x opennmt/runner.py",
          'logging.info("Restoring parameters from %s", save_path)',
          r"\bRestoring parameters from (?P<path>\S+)",
          ("INFO:tensorflow:Restoring parameters from /tmp/t2t_train/model.ckpt-31622",),
          ("Restoring parameters from",)),
)
