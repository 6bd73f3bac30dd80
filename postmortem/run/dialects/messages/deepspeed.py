"""DeepSpeed's loss-scaler messages: every scaler and ZeRO stage, and its checkpoint load.

Read from microsoft/DeepSpeed at v0.3.0, v0.5.0, v0.8.0, v0.10.0 and v0.16.4 (38327e0):
deepspeed/runtime/fp16/loss_scaler.py (`DynamicLossScaler.update_scale`, used by ZeRO 1/2/3
since v0.10), fp16/fused_optimizer.py and fp16/unfused_optimizer.py (`step`,
`_update_scale`), zero/stage2.py / stage_1_and_2.py / stage3.py (before v0.10).
`[deepscale]` is the v0.3-v0.5 ZeRO wording; v0.3's ZeRO stage 1 (zero/stage1.py) wrote
`[deepspeed] fp16 dynamic loss scale overflow! Rank N Skipping step. ...`.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_DS = "microsoft/DeepSpeed"

register(
    entry("deepspeed.overflow.rank", "DeepSpeed", "overflow",
          f"{_DS} v0.10.0..v0.16.4 deepspeed/runtime/fp16/loss_scaler.py; v0.3.0 zero/stage2.py, "
          f"v0.8.0 zero/stage_1_and_2.py, zero/stage3.py",
          '[deepspeed] OVERFLOW! Rank {dist.get_rank()} Skipping step. Attempted loss scale: '
          '{int(self.cur_scale)}, reducing to {int(next_scale)}',
          r"\[deep(?:speed|scale)\] OVERFLOW! Rank (?P<rank>\d+) Skipping step\.(?: Attempted loss scale: "
          + scale("prev_scale") + r", reducing to " + scale("scale") + r")?(?! Attempted loss scale: [^,]*, but)",
          ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
           "[deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 262144, reducing to 131072.0",
           "[deepspeed] OVERFLOW! Rank 0 Skipping step."),
          ("OVERFLOW!",)),
    entry("deepspeed.overflow.hysteresis", "DeepSpeed", "skipped",
          f"{_DS} v0.10.0..v0.16.4 deepspeed/runtime/fp16/loss_scaler.py",
          '[deepspeed] OVERFLOW! Rank {dist.get_rank()} Skipping step. Attempted loss scale: '
          '{int(self.cur_scale)}, but hysteresis is {self.cur_hysteresis}. Reducing hysteresis to '
          '{self.cur_hysteresis-1}',
          r"\[deep(?:speed|scale)\] OVERFLOW! Rank (?P<rank>\d+) Skipping step\. Attempted loss scale: "
          + scale("prev_scale") + r", but hysteresis is (?P<hysteresis>\d+)",
          ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis "
           "is 2. Reducing hysteresis to 1",),
          ("hysteresis is",)),
    entry("deepspeed.overflow.optimizer", "DeepSpeed", "overflow",
          f"{_DS} v0.5.0..v0.16.4 deepspeed/runtime/fp16/fused_optimizer.py, unfused_optimizer.py "
          f"(step); v0.3.0 wrote `[deepspeed] OVERFLOW! Skipping step.`",
          '[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: {}, '
          'reducing to {}',
          r"\[deepspeed\] (?:fp16 dynamic loss scale overflow|OVERFLOW)! Skipping step\. Attempted loss "
          r"scale: " + scale("prev_scale") + r", reducing to " + scale("scale"),
          ("[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: "
           "65536.0, reducing to 32768.0",
           "[deepspeed] OVERFLOW! Skipping step. Attempted loss scale: 4294967296, reducing to 2147483648"),
          ("overflow! Skipping", "OVERFLOW! Skipping")),
    entry("deepspeed.overflow.fp16_rank", "DeepSpeed", "overflow",
          f"{_DS} v0.3.0..v0.3.16 deepspeed/runtime/zero/stage1.py (FP16_DeepSpeedZeroOptimizer_Stage1.step)",
          '"[deepspeed] fp16 dynamic loss scale overflow! Rank {} Skipping step. Attempted loss scale: {}, '
          'reducing to {}".format(dist.get_rank(), prev_scale, self.loss_scale)',
          r"\[deepspeed\] fp16 dynamic loss scale overflow! Rank (?P<rank>\d+) Skipping step\. Attempted loss "
          r"scale: " + scale("prev_scale") + r", reducing to " + scale("scale"),
          ("[deepspeed] fp16 dynamic loss scale overflow! Rank 0 Skipping step. Attempted loss scale: "
           "65536, reducing to 32768.0",),
          ("overflow! Rank",)),
    entry("deepspeed.overflow.log_dist", "DeepSpeed", "overflow",
          f"{_DS} v0.5.0..v0.16.4 deepspeed/runtime/fp16/fused_optimizer.py (step, log_dist ranks=[0])",
          'Overflow detected. Skipping step. Attempted loss scale: {prev_scale}, reducing to {self.cur_scale}',
          r"Overflow detected\. Skipping step\. Attempted loss scale: " + scale("prev_scale")
          + r", reducing to " + scale("scale"),
          ("[Rank 0] Overflow detected. Skipping step. Attempted loss scale: 65536, reducing to 32768.0",),
          ("Overflow detected. Skipping",)),
    entry("deepspeed.reduce", "DeepSpeed", "overflow",
          f"{_DS} v0.3.0..v0.16.4 deepspeed/runtime/fp16/fused_optimizer.py, unfused_optimizer.py "
          f"(_update_scale, verbose)",
          'Reducing dynamic loss scale from {prev_scale} to {self.cur_scale}',
          r"Reducing dynamic loss scale from " + scale("prev_scale") + r" to " + scale("scale"),
          ("Reducing dynamic loss scale from 65536 to 32768.0",),
          ("Reducing dynamic loss scale",)),
    entry("deepspeed.grad_overflow", "DeepSpeed", "overflow",
          f"{_DS} v0.3.0..v0.16.4 deepspeed/runtime/fp16/fused_optimizer.py, unfused_optimizer.py "
          f"(_update_scale): the optimizer's own counter, printed before the scale line",
          'Grad overflow on iteration {self.cur_iter}  |  Grad overflow on iteration: %s',
          r"Grad overflow on iteration:? (?P<iteration>\d+)",
          ("Grad overflow on iteration 0", "Grad overflow on iteration: 4"),
          ("Grad overflow on iteration",)),
    entry("deepspeed.increase", "DeepSpeed", "scale",
          f"{_DS} v0.3.0..v0.16.4 deepspeed/runtime/fp16/fused_optimizer.py, unfused_optimizer.py",
          'Increasing dynamic loss scale from {prev_scale} to {self.cur_scale}',
          r"Increasing dynamic loss scale from " + scale("prev_scale") + r" to " + scale("scale"),
          ("Increasing dynamic loss scale from 32768.0 to 65536.0",),
          ("Increasing dynamic loss scale",)),
    entry("deepspeed.minimum", "DeepSpeed", "skipped",
          f"{_DS} v0.10.0..v0.16.4 deepspeed/runtime/fp16/loss_scaler.py (raised: the run stops)",
          'Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.',
          r"Current loss scale already at minimum",
          ("Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",),
          ("already at minimum",)),
    entry("deepspeed.checkpoint", "DeepSpeed", "checkpoint",
          f"{_DS} v0.8.0..v0.16.4 deepspeed/runtime/engine.py (_load_zero_checkpoint)",
          'loading {len(zero_sd_list)} zero partition checkpoints for rank {self.global_rank}',
          r"loading (?P<count>\d+) zero partition checkpoints for rank (?P<rank>\d+)",
          ("loading 8 zero partition checkpoints for rank 0",),
          ("zero partition checkpoints",)),
)
