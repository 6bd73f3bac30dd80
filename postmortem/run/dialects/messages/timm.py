"""timm's resume (its train.py `--resume`).

Read from huggingface/pytorch-image-models timm/models/_helpers.py (`resume_checkpoint`:
`_logger.info('Restoring model state from checkpoint...')`, then the optimizer's and the
scaler's states), called by train.py only when resuming.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("timm.resume", "timm", "resume",
          "huggingface/pytorch-image-models timm/models/_helpers.py (resume_checkpoint)",
          "_logger.info('Restoring model state from checkpoint...')",
          r"Restoring model state from checkpoint\.\.\.",
          ("Restoring model state from checkpoint...",),
          ("Restoring model state from checkpoint",)),
)
