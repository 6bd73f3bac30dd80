"""detectron2's (fvcore's) checkpoint load: weights loaded, a resume or a pretrained start
alike (the words do not tell them apart), so an event and no segment.

Read from facebookresearch/fvcore fvcore/common/checkpoint.py (`Checkpointer.load`:
`self.logger.info("[Checkpointer] Loading from {} ...".format(path))`), which
detectron2's DetectionCheckpointer inherits.

detectron2's fp16 (detectron2/engine/train_loop.py `AMPTrainer.run_step`: `grad_scaler.scale`,
`step`, `update`) prints no overflow or skipped-step words: torch's GradScaler skips silently
(AMPTrainer as read in the code index's copies of train_loop.py).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.messages._shared import entry

register(
    entry("detectron2.checkpoint", "detectron2", "checkpoint",
          "facebookresearch/fvcore fvcore/common/checkpoint.py (Checkpointer.load)",
          'self.logger.info("[Checkpointer] Loading from {} ...".format(path))',
          r"\[Checkpointer\] Loading from (?P<path>\S+) \.\.\.",
          ("[Checkpointer] Loading from",),
          ("[Checkpointer] Loading from output/model_0004999.pth ...",)),
)
