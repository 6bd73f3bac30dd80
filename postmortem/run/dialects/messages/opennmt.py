"""OpenNMT-py's checkpoint load, and the loss-scaler words its fp16 modes print.

Read from OpenNMT/OpenNMT-py 1.2.0 (onmt/train_single.py, onmt/bin/train.py), 2.3.0 and
v3.5.1 / 97111d9 (2024-06, onmt/models/model_saver.py `load_checkpoint`): "Loading
checkpoint from %s" is said by training with `-train_from` and by translation alike
(onmt/model_builder.py `load_test_model` calls the same function), so it is a checkpoint
event, no segment. levanter (src/levanter/checkpoint.py `load_checkpoint`) prints the same
words; torchtune's and OLMo's, which tell a resume, have their own entries.
OpenNMT-py's own code prints no overflow message (onmt/utils/optimizers.py at 1.2.0 and
97111d9): `-model_dtype fp16 -apex_opt_level ""` ("legacy") wraps apex.contrib's
FP16_Optimizer, whose `_update_scale` prints "Grad overflow on iteration N" then "Using
dynamic loss scale of X" (the scale before it is halved; catalogued as apex's), or
"Using static loss scale of X" with a static scale (below); the "amp" mode uses torch's
GradScaler, which says nothing when it skips a step.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

register(
    entry("opennmt.checkpoint", "OpenNMT-py", "checkpoint",
          "OpenNMT/OpenNMT-py 1.2.0 onmt/train_single.py; 2.3.0, v3.5.1 onmt/models/model_saver.py "
          "(load_checkpoint); stanford-crfm/levanter 9263f81 src/levanter/checkpoint.py",
          'logger.info("Loading checkpoint from %s" % ckpt_path)',
          r"Loading checkpoint from (?P<path>\S+)",
          ("Loading checkpoint from models/wmt_step_20000.pt",),
          ("Loading checkpoint from",)),
    entry("opennmt.apex_static", "OpenNMT-py", "skipped",
          "NVIDIA/apex 6424da3 apex/contrib/optimizers/fp16_optimizer.py (_update_scale, a static "
          "scale), as OpenNMT-py's legacy fp16 mode prints it",
          'print("\\nGrad overflow on iteration", self.cur_iter); print("Using static loss scale of", '
          'self.cur_scale)',
          r"Using static loss scale of:? " + scale("scale"),
          ("Using static loss scale of 128.0",),
          ("Using static loss scale of",)),
)
