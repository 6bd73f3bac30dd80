"""ParlAI's fp16 loss-scaler message (facebookresearch/ParlAI parlai/utils/fp16.py).

`SafeFP16Optimizer.clip_main_grads` / `MemoryEfficientFP16Optimizer.clip_main_grads`, on an
overflow after `self.scaler.update_scale(overflow)`: `logging.info(f'Overflow: setting loss
scale to {self.scaler.loss_scale}')` (v0.8.0 to v1.7.2; in `SafeFP16Optimizer` of v1.5.1 on it
stands after the `raise` of the minimum-scale branch and is never reached, the memory-efficient
optimizer's still prints it); the 2020 snapshots `warn_once(f'[ Overflow: setting loss scale to
{...} ]')` (once a run: only the first). The scale printed is after the cut: `DynamicLossScaler`
divides by `scale_factor` (2.0 by default). Its "Minimum loss scale reached" is fairseq's text
(`fairseq.minimum` reads it).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

register(
    entry("parlai.overflow", "ParlAI", "overflow",
          "facebookresearch/ParlAI v0.8.0..v1.7.2 parlai/utils/fp16.py (clip_main_grads); "
          "v0.1.20200416 warn_once",
          "logging.info(f'Overflow: setting loss scale to {self.scaler.loss_scale}')",
          r"(?<!\w)Overflow: setting loss scale to " + scale("scale"),
          ("12:01:13 | Overflow: setting loss scale to 64.0",
           "2020-11-02 12:01:13,204 INFO     | Overflow: setting loss scale to 0.5",
           "[ Overflow: setting loss scale to 32768.0 ]"),
          ("Overflow: setting loss scale",), prev_factor=2.0),
)
