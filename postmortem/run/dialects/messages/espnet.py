"""ESPnet's skipped update: a grad norm that is not finite (under fp16, GradScaler's overflow;
`scaler.step` / `scaler.update` still run, so the scale halves).

Read from espnet/espnet v0.9.0 .. v202402 espnet2/train/trainer.py (`train_one_epoch`:
`logging.warning(f"The grad norm is {grad_norm}. Skipping updating the model.")`, `grad_norm`
a tensor from PyTorch 1.5: `tensor(inf, device='cuda:0')`; v0.8 printed `nan` alone; only rank 0
logs below ERROR: espnet2/tasks/abs_task.py `main_worker`) and
espnet/asr/pytorch_backend/asr.py (ESPnet1 `CustomUpdater.update_core`: `logging.warning("grad
norm is nan. Do not update model.")`).
FunASR prints the same words (modelscope/FunASR v1.3.2..v1.4.3 funasr/train_utils/trainer.py and
trainer_ds.py, when `clip_grad_norm_` returns a non-finite norm: `logging.warning(f"The grad norm is
{grad_norm}. Skipping updating the model.")`, a 0-dim tensor formatted as its item: `nan`), in fp32
runs too. The norm the message names is read as the step's `grad_norm`
(`metriclines/overflow.py` `said_norm`); the skip counts as a scaler's only where the log prints a
loss scale.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("espnet.skip", "ESPnet", "skipped",
          "espnet/espnet v0.9.0..v202402 espnet2/train/trainer.py (train_one_epoch); modelscope/FunASR "
          "v1.3.2..v1.4.3 funasr/train_utils/trainer.py, trainer_ds.py (the same words)",
          'logging.warning(f"The grad norm is {grad_norm}. Skipping updating the model.")',
          r"The grad norm is (?P<norm>.+?)\.? Skipping updating the model",
          ("The grad norm is nan. Skipping updating the model.",
           "The grad norm is tensor(inf, device='cuda:0'). Skipping updating the model.",
           "The grad norm is inf. Skipping updating the model."),
          ("Skipping updating the model",),
          # espnet2/tasks/abs_task.py main_worker: ranks other than 0 log at ERROR only
          one_rank=True),
    entry("espnet1.skip", "ESPnet", "skipped",
          "espnet/espnet v0.9.0 espnet/asr/pytorch_backend/asr.py (CustomUpdater.update_core)",
          'logging.warning("grad norm is nan. Do not update model.")',
          r"grad norm is (?P<norm>\S+)\. Do not update model",
          ("grad norm is nan. Do not update model.",),
          ("Do not update model",), one_rank=True),
)
