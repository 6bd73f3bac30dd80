"""torchtitan's checkpoint load: the whole train state (model, optimizer, LR scheduler,
dataloader, `train_state`'s step) restored from `step-N`, so the run goes on from step N.
Step 0 is the seed checkpoint (the model's initial weights only, `states = {"model": ...}
if step == 0`): a start, no resume, so the pattern reads N >= 1.

Read from pytorch/torchtitan v0.1.0 and v0.2.0 (torchtitan/components/checkpoint.py,
`CheckpointManager.load`) and its first releases' torchtitan/checkpoint.py (the same words).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("torchtitan.load", "torchtitan", "resume",
          "pytorch/torchtitan v0.1.0, v0.2.0 torchtitan/components/checkpoint.py; "
          "earlier torchtitan/checkpoint.py (CheckpointManager.load)",
          'logger.info(f"Loading the checkpoint at step {step}.")',
          r"Loading the checkpoint at step (?P<step>[1-9]\d*)\.",
          ('[rank0]:[titan] 2025-03-01 10:00:00,000 - root - INFO - '
           + "Loading the checkpoint at step {}.".format(3000),),
          ("Loading the checkpoint at step",)),
)
