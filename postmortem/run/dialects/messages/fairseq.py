"""fairseq's loss-scaler and checkpoint messages.

Read from facebookresearch/fairseq at v0.6.0, v0.9.0, v0.10.0 and 3d262bb (2025-09):
fairseq/trainer.py (`train_step`: the OverflowError's text after a prefix that changed
three times; `load_checkpoint`), fairseq/optim/dynamic_loss_scaler.py and
fp16_optimizer.py (`OverflowError("setting loss scale to: " + str(self.loss_scale))`,
`FloatingPointError("Minimum loss scale reached ({})...")`), fairseq/optim/amp_optimizer.py.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_FS = "facebookresearch/fairseq"

register(
    entry("fairseq.overflow", "fairseq", "overflow",
          f"{_FS} v0.6.0 / v0.9.0 / v0.10.0 / 3d262bb fairseq/trainer.py (train_step) + "
          f"fairseq/optim/dynamic_loss_scaler.py",
          'print("| WARNING: overflow detected, " + str(e))  (v0.6-v0.9)  |  logger.info("NOTE: overflow '
          'detected, " + str(e))  (v0.10)  |  logger.info(f"NOTE: gradient overflow detected, ignoring '
          'gradient, {str(e)}")  (v0.12+), e = OverflowError("setting loss scale to: " + str(loss_scale))',
          r"(?:gradient )?overflow detected, (?:ignoring gradient, )?setting loss scale to:?\s*" + scale("scale"),
          ("| WARNING: overflow detected, setting loss scale to: 64.0",
           "NOTE: overflow detected, setting loss scale to: 16384.0",
           "NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 0.5"),
          ("overflow detected",)),
    entry("fairseq.amp.overflow", "fairseq", "overflow",
          f"{_FS} 3d262bb fairseq/optim/amp_optimizer.py (clip_grad_norm)",
          '"AMP: overflow detected, setting scale to " f"to {new_loss_scale}"',
          r"AMP: overflow detected, setting scale to (?:to )?" + scale("scale"),
          ("AMP: overflow detected, setting scale to to 8192.0",),
          ("AMP: overflow",)),
    entry("fairseq.minimum", "fairseq", "skipped",
          f"{_FS} v0.6.0..3d262bb fairseq/optim/dynamic_loss_scaler.py, fp16_optimizer.py, "
          f"amp_optimizer.py (FloatingPointError: the run stops)",
          '"Minimum loss scale reached ({}). Your loss is probably exploding. Try lowering the learning '
          'rate, using gradient clipping or increasing the batch size.".format(self.min_loss_scale)',
          r"Minimum loss scale reached \(" + scale("scale") + r"\)",
          ("FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. "
           "Try lowering the learning rate, using gradient clipping or increasing the batch size.",
           "AMP: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try restarting "
           "training or use fp32. 5e-05"),
          ("Minimum loss scale reached",)),
    entry("fairseq.checkpoint", "fairseq", "resume",
          f"{_FS} v0.9.0 / v0.10.0 / 3d262bb fairseq/trainer.py (load_checkpoint)",
          '"Loaded checkpoint {} (epoch {} @ {} updates)".format(filename, epoch, self.get_num_updates())'
          '  (v0.9: "| loaded checkpoint ...", v0.10: "loaded checkpoint ...")',
          r"[Ll]oaded checkpoint (?P<path>\S+) \(epoch (?P<epoch>\d+) @ (?P<step>\d+) updates\)",
          ("| loaded checkpoint checkpoints/checkpoint_last.pt (epoch 3 @ 1200 updates)",
           "Loaded checkpoint checkpoints/checkpoint_last.pt (epoch 12 @ 45000 updates)"),
          ("oaded checkpoint",)),
)
