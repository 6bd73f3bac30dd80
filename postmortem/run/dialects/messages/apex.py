"""apex's loss-scaler messages: amp (O1/O2, and its first API), fp16_utils.FP16_Optimizer, contrib FP16_Optimizer.

Read from NVIDIA/apex at 0ce8ad3 (2019-12) and 6424da3 (25.09): apex/amp/handle.py
(`scale_loss`, also printed by apex.amp users such as detectron2-era and torchvision
reference scripts), apex/fp16_utils/fp16_optimizer.py (`step`), apex/fp16_utils/loss_scaler.py,
apex/contrib/optimizers/fp16_optimizer.py (`_update_scale`).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

register(
    entry("apex.amp.overflow", "apex", "overflow",
          "NVIDIA/apex 0ce8ad3..6424da3 apex/amp/handle.py (scale_loss)",
          '"Gradient overflow.  Skipping step, loss scaler " + "{} reducing loss scale to {}".format('
          'loss_id, loss_scaler.loss_scale())',
          r"Gradient overflow\.\s+Skipping step, loss scaler (?P<loss_id>\d+) reducing loss scale to "
          + scale("scale"),
          ("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",),
          ("Gradient overflow",),
          # apex/amp/scaler.py LossScaler.update_scale, before the message: `self._loss_scale/2.`
          # (max(min_loss_scale, ...) only where a min_loss_scale is set; default None)
          prev_factor=2.0),
    entry("apex.fp16_utils.overflow", "apex", "overflow",
          "NVIDIA/apex 0ce8ad3 apex/fp16_utils/fp16_optimizer.py (FP16_Optimizer.step; _step_with_closure "
          "retrying the closure while it overflows)",
          '"Gradient overflow.  Skipping step, reducing " + "loss scale to {}".format('
          'self.loss_scaler.loss_scale())  |  print("OVERFLOW within closure! Skipping step, reducing loss '
          'scale to {}".format(self.loss_scaler.loss_scale()))',
          r"(?:Gradient overflow\.|OVERFLOW within closure!)\s+Skipping step, reducing loss scale to " + scale("scale"),
          ("Gradient overflow.  Skipping step, reducing loss scale to 1024.0",
           "OVERFLOW within closure! Skipping step, reducing loss scale to 512.0"),
          ("Gradient overflow", "OVERFLOW within closure!")),
    entry("apex.fp16_utils.attempted", "apex", "overflow",
          "NVIDIA/Megatron-LM 22c0e30 (v1.x) megatron/fp16/fp16.py (FP16_Optimizer.step, maybe_print; "
          "also `OVERFLOW within closure!`), EleutherAI/gpt-neox 8b6d515 megatron/fp16/fp16.py (the same "
          "copy); apex's 2018 fp16_utils/fp16_optimizer.py printed the first half alone",
          'self.maybe_print("OVERFLOW! Skipping step. Attempted loss scale: {}, reducing to {}".format('
          'scale, self.loss_scale))  |  print("OVERFLOW! Skipping step. Attempted loss scale: {}".format(scale))',
          r"OVERFLOW(?: within closure)?! Skipping step\. Attempted loss scale: " + scale("prev_scale")
          + r"(?:, reducing to " + scale("scale") + r")?",
          ("OVERFLOW! Skipping step. Attempted loss scale: 65536.0, reducing to 32768.0",
           "OVERFLOW! Skipping step. Attempted loss scale: 4096.0",
           "OVERFLOW within closure! Skipping step. Attempted loss scale: 1024.0, reducing to 512.0"),
          ("OVERFLOW! Skipping", "OVERFLOW within closure!")),
    # amp's first API (2018, `amp.init()` / `handle.scale_loss(loss, optimizer)`, before amp.initialize):
    # the scale halves with no word of it; the skip is said when the patched step runs
    entry("apex.amp.old_api", "apex", "overflow",
          "NVIDIA/apex e733e78 (2018, apex/amp/_C/scale_lib era) apex/amp/handle.py (AmpHandle.scale_loss: "
          "logging.info); later releases apex/amp/handle.py and apex/amp/opt.py (OptimWrapper: maybe_print)",
          "logging.info('Gradient overflow, skipping update')  |  maybe_print('Gradient overflow, skipping update')",
          r"Gradient overflow, skipping update",
          ("Gradient overflow, skipping update", "INFO:root:Gradient overflow, skipping update"),
          ("Gradient overflow, skipping update",)),
    entry("apex.fp16_utils.bare", "apex", "overflow",
          "NVIDIA/apex 0ce8ad3 apex/fp16_utils/loss_scaler.py (DynamicLossScaler.update_scale debug)",
          "print('OVERFLOW!')",
          r"(?:^|[\s\]:|])OVERFLOW!\s*$",
          ("OVERFLOW!",),
          ("OVERFLOW!",)),
    entry("apex.contrib.grad_overflow", "apex", "overflow",
          "NVIDIA/apex 6424da3 apex/contrib/optimizers/fp16_optimizer.py (_update_scale, verbose)",
          'print("\\nGrad overflow on iteration", self.cur_iter); print("Using dynamic loss scale of", '
          'self.cur_scale)',
          r"Using dynamic loss scale of:? " + scale("prev_scale"),
          ("Using dynamic loss scale of 65536.0",),
          ("Using dynamic loss scale of",)),
)
