"""ColossalAI's skipped step: its low-level ZeRO, Gemini and hybrid-parallel optimizers say
it without a scale (the scale is its GradScaler's, not printed).

Read from hpcaitech/ColossalAI: colossalai/zero/low_level/low_level_optim.py and
colossalai/zero/gemini/gemini_optimizer.py (`step`: `if self._verbose:
self._logger.info(f"Found overflow. Skip step")`), colossalai/nn/optimizer/zero_optimizer.py
(older releases, printed unconditionally).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("colossalai.overflow", "ColossalAI", "skipped",
          "hpcaitech/ColossalAI colossalai/zero/low_level/low_level_optim.py, "
          "colossalai/zero/gemini/gemini_optimizer.py, colossalai/nn/optimizer/zero_optimizer.py (step)",
          "self._logger.info(f'Found overflow. Skip step')",
          r"Found overflow\. Skip step",
          ("Found overflow. Skip step",),
          ("Found overflow",)),
)
