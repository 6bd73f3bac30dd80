"""SpeechBrain's non-finite losses and its checkpoint loads.

Read from speechbrain/speechbrain v1.0.0 .. v1.1.0 speechbrain/core.py
(`Brain.check_loss_isfinite`): a non-finite loss skips its batch with `logger.warning("Patience
not yet exhausted.")` until `nonfinite_patience` (3) are spent in an epoch, then `raise
ValueError("Loss is not finite and patience is exhausted. To debug, ...")`; v0.5.x
(`check_gradients`) says `logger.warn(f"Loss is {loss}.")` then `logger.warn("Patience not yet
exhausted, ignoring this batch.")`, and raises the same ValueError. The epoch's train loss is a
running mean of the finite losses only (`update_average`: `if torch.isfinite(loss)`), so these
words are the only NaN such a run shows: a NaN loss in the epoch under way, the step after the
last one logged (`metriclines/nanwords.py`). speechbrain/utils/checkpoints.py
(`Checkpointer.load_checkpoint` / `recover_if_possible`): `logger.info(f"Loading a checkpoint from
{checkpoint.path}")`, v0.5 and v1 the same. Behind log-config.yaml's "%(asctime)s - %(name)s -
%(levelname)s - %(message)s" (log.txt) or "%(name)s - %(message)s" (the console).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_CORE = "speechbrain/speechbrain v1.0.0..v1.1.0 speechbrain/core.py (check_loss_isfinite); v0.5.13 (check_gradients)"

register(
    entry("speechbrain.patience_exhausted", "SpeechBrain", "nan_loss", _CORE,
          'raise ValueError("Loss is not finite and patience is exhausted. " "To debug, wrap `fit()` with " ...)',
          r"\bLoss is (?P<nan>not finite) and patience is exhausted",
          ("ValueError: Loss is not finite and patience is exhausted. To debug, wrap `fit()` with "
           "autograd's `detect_anomaly()`, e.g.",),
          ("patience is exhausted",)),
    entry("speechbrain.patience", "SpeechBrain", "nan_loss", _CORE,
          'logger.warning("Patience not yet exhausted.")  (v0.5: logger.warn("Patience not yet exhausted, '
          'ignoring this batch."))',
          r"\b(?P<nan>Patience) not yet exhausted",
          ("2024-05-02 10:11:12,345 - speechbrain.core - WARNING - " + "Patience not yet exhausted.",
           "speechbrain.core - " + "Patience not yet exhausted, ignoring this batch."),
          ("not yet exhausted",)),
    entry("speechbrain.load", "SpeechBrain", "checkpoint",
          "speechbrain/speechbrain v0.5.13 / v1.1.0 speechbrain/utils/checkpoints.py (Checkpointer.load_checkpoint)",
          'logger.info(f"Loading a checkpoint from {checkpoint.path}")',
          r"\bLoading a checkpoint from (?P<path>\S+)",
          ("2024-05-02 10:00:00,000 - speechbrain.utils.checkpoints - INFO - "
           + f"Loading a checkpoint from {'results/conformer/1986/save/CKPT+2024-05-01+22-10-11+00'}",),
          ("Loading a checkpoint from",)),
)
