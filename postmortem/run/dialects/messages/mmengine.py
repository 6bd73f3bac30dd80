"""mmengine's and mmcv's resume (mmdet, mmpretrain, mmseg... print through them).

Read from open-mmlab/mmengine mmengine/runner/runner.py (`resume`: "resumed epoch: {self.epoch},
iter: {self.iter}") and open-mmlab/mmcv 1.x mmcv/runner/base_runner.py (`resume`:
`self.logger.info('resumed epoch %d, iter %d', self.epoch, self.iter)`). The iteration is
the step the run goes on from.

Loss scale: mmcv 1.x's legacy `Fp16OptimizerHook` (mmcv/runner/hooks/optimizer.py, used where
torch < 1.6 or parrots; v1.3.0..v1.7.2) warns "Check overflow, downscale loss scale to
{cur_scale}" after `update_scale`, so the scale it names is the new one; its
`GradientCumulativeFp16OptimizerHook` warns the same words before `update_scale` (the scale
before the halving). With torch >= 1.6 both hooks step through torch's GradScaler and print
nothing, as mmengine's `AmpOptimWrapper` (mmengine/optim/optimizer/amp_optimizer_wrapper.py:
`loss_scaler.step` / `update`, no log call) does: a skipped fp16 step leaves no words there.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

register(
    entry("mmengine.resumed", "mmengine", "resume",
          "open-mmlab/mmengine v0.x mmengine/runner/runner.py (Runner.resume); open-mmlab/mmcv 1.x "
          "mmcv/runner/base_runner.py (BaseRunner.resume)",
          "self.logger.info(f'resumed epoch: {self.epoch}, iter: {self.iter}')  |  "
          "self.logger.info('resumed epoch %d, iter %d', self.epoch, self.iter)",
          r"resumed epoch:? (?P<epoch>\d+), iter:? (?P<step>\d+)",
          ("resumed epoch: 12, iter: 4800", "resumed epoch 3, iter 1500"),
          ("resumed epoch",)),
)

register(
    entry("mmengine.load_checkpoint", "mmengine", "checkpoint",
          "open-mmlab/mmengine v0.x mmengine/runner/runner.py (Runner.load_checkpoint); open-mmlab/mmcv v1.x "
          "mmcv/runner/base_runner.py (BaseRunner.load_checkpoint)",
          "self.logger.info(f'Load checkpoint from {filename}')  |  "
          "self.logger.info('load checkpoint from %s', filename)",
          r"\b[Ll]oad checkpoint from (?P<path>\S+)",
          ("Load checkpoint from work_dirs/faster-rcnn/epoch_12.pth",
           "load checkpoint from work_dirs/latest.pth"),
          ("oad checkpoint from",)),
    entry("mmcv.fp16.overflow", "mmcv", "overflow",
          "open-mmlab/mmcv v1.3.0..v1.7.2 (4c01b02) mmcv/runner/hooks/optimizer.py "
          "(Fp16OptimizerHook.after_train_iter, legacy; GradientCumulativeFp16OptimizerHook)",
          "runner.logger.warning('Check overflow, downscale loss scale ' f'to {self.loss_scaler.cur_scale}')",
          r"Check overflow, downscale loss scale to " + scale("scale"),
          ("Check overflow, downscale loss scale to 256.0",),
          ("Check overflow",)),
)
