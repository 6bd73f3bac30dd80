"""ColossalAI's (and InternLM's / InternEvo's) loss-scaler messages.

- The skipped step: its low-level ZeRO, Gemini and hybrid-parallel optimizers say it without a
  scale. Read from hpcaitech/ColossalAI colossalai/zero/low_level/low_level_optim.py and
  colossalai/zero/gemini/gemini_optimizer.py (`step`: `if self._verbose:
  self._logger.info(f"Found overflow. Skip step")`), colossalai/nn/optimizer/zero_optimizer.py
  (older releases, printed unconditionally).
- The scale itself: `DynamicGradScaler.update` (hpcaitech/ColossalAI v0.1.x..v0.4.x
  colossalai/amp/naive_amp/grad_scaler/dynamic_grad_scaler.py, `self.log(..., ranks=[0])`,
  printed only with `verbose=True` before v0.2; InternLM/InternLM v0.2.x and InternLM/InternEvo
  internlm/solver/optimizer/... `DynamicGradScaler`, copied from it, `logger.warning` on the
  logging rank) prints the scale after it halved (once every `hysteresis` overflows: 2 by
  default) and after it doubled (every `growth_interval` clean steps).
- InternLM's `HybridZeroOptimizer.step` (InternLM/InternLM v0.2.x
  internlm/solver/optimizer/hybrid_zero_optim.py; InternLM/InternEvo the same file) says each
  skipped step after the scaler's update, without a scale.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_SCALER = ("hpcaitech/ColossalAI v0.1.0..v0.4.9 colossalai/amp/naive_amp/grad_scaler/dynamic_grad_scaler.py "
           "(DynamicGradScaler.update); InternLM/InternLM v0.2.0 and InternLM/InternEvo "
           "internlm/solver/optimizer/... DynamicGradScaler (the same words, logger.warning)")

register(
    entry("colossalai.overflow", "ColossalAI", "skipped",
          "hpcaitech/ColossalAI colossalai/zero/low_level/low_level_optim.py, "
          "colossalai/zero/gemini/gemini_optimizer.py, colossalai/nn/optimizer/zero_optimizer.py (step)",
          "self._logger.info(f'Found overflow. Skip step')",
          r"Found overflow\. Skip step",
          ("Found overflow. Skip step",),
          ("Found overflow",)),           # (DistributedLogger.info, ranks=None: every rank prints it)
    # a scale, not a skip: with hysteresis 2 only every other overflow prints it; the skips
    # are the optimizer's own messages
    entry("colossalai.scale.backoff", "ColossalAI", "scale",
          _SCALER,
          'self.log(f"Overflow occurs, the loss scale is adjusted to {self.scale.item()}", ranks=[0])',
          r"Overflow occurs, the loss scale is adjusted to " + scale("scale"),
          (f"Overflow occurs, the loss scale is adjusted to {32768.0}",),
          ("the loss scale is adjusted",),
          prev_factor=2.0),            # backoff_factor 0.5 by default
    entry("colossalai.scale.growth", "ColossalAI", "scale",
          _SCALER,
          'self.log(f"No overflow for consecutive {self._growth_interval} steps, " f"the loss scale is '
          'adjusted to {self.scale.item()}", ranks=[0])',
          r"No overflow for consecutive (?P<interval>\d+) steps, the loss scale is adjusted to " + scale("scale"),
          (f"No overflow for consecutive {1000} steps, the loss scale is adjusted to {65536.0}",),
          ("the loss scale is adjusted",),
          prev_factor=0.5),            # growth_factor 2 by default
    entry("internlm.overflow", "InternLM", "skipped",
          "InternLM/InternLM v0.2.0 internlm/solver/optimizer/hybrid_zero_optim.py (HybridZeroOptimizer.step); "
          "InternLM/InternEvo internlm/solver/optimizer/hybrid_zero_optim.py",
          'logger.warning("Overflow occurs, please check it.")',
          r"Overflow occurs, please check it\.",
          ("Overflow occurs, please check it.",),
          ("Overflow occurs, please",),
          one_rank=True),                # `if gpc.is_rank_for_log():`
)
