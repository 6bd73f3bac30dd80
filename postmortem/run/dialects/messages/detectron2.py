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
from postmortem.run.dialects.entries import entry

register(
    entry("detectron2.checkpoint", "detectron2", "checkpoint",
          "facebookresearch/fvcore v0.1.5 (the release detectron2 v0.6 pins) fvcore/common/checkpoint.py (Checkpointer.load)",
          'self.logger.info("[Checkpointer] Loading from {} ...".format(path))',
          r"\[Checkpointer\] Loading from (?P<path>\S+) \.\.\.",
          ("[Checkpointer] Loading from output/model_0004999.pth ...",),
          ("[Checkpointer] Loading from",)),
    # each checkpointable the file holds, after the model (DefaultTrainer: optimizer, scheduler)
    entry("detectron2.checkpointable", "detectron2", "checkpoint",
          "facebookresearch/fvcore v0.1.5 fvcore/common/checkpoint.py (Checkpointer.load, the checkpointables)",
          'self.logger.info("Loading {} from {} ...".format(key, path))',
          r"\bLoading (?P<what>\w+) from (?P<path>\S+) \.\.\.",
          # DefaultTrainer's checkpointables (engine/defaults.py: the optimizer, the scheduler,
          # the trainer's own state); other keys print the same words and are read too
          ("Loading optimizer from output/model_0039999.pth ...",
           "Loading scheduler from output/model_0039999.pth ..."),
          ("Loading optimizer from", "Loading scheduler from", "Loading trainer from")),
    # the loop's start: iteration N >= 1 after `resume_or_load(resume=True)` found a checkpoint
    # (`checkpoint.get("iteration", -1) + 1`); 0 is a fresh start and no event
    entry("detectron2.start_iter", "detectron2", "resume",
          "facebookresearch/detectron2 v0.6 detectron2/engine/train_loop.py (TrainerBase.train); "
          "tools/plain_train_net.py (do_train)",
          'logger.info("Starting training from iteration {}".format(self.start_iter))',
          r"Starting training from iteration (?P<step>[1-9]\d*)",
          ("Starting training from iteration 40000",),
          ("Starting training from iteration",)),
)
