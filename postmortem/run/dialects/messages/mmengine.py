"""mmengine's and mmcv's resume (mmdet, mmpretrain, mmseg... print through them).

Read from open-mmlab/mmengine mmengine/runner/runner.py (`resume`: "resumed epoch: {self.epoch},
iter: {self.iter}") and open-mmlab/mmcv 1.x mmcv/runner/base_runner.py (`resume`:
`self.logger.info('resumed epoch %d, iter %d', self.epoch, self.iter)`). The iteration is
the step the run goes on from.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.messages._shared import entry

register(
    entry("mmengine.resumed", "mmengine", "resume",
          "open-mmlab/mmengine v0.x mmengine/runner/runner.py (Runner.resume); open-mmlab/mmcv 1.x "
          "mmcv/runner/base_runner.py (BaseRunner.resume)",
          "self.logger.info(f'resumed epoch: {self.epoch}, iter: {self.iter}')  |  "
          "self.logger.info('resumed epoch %d, iter %d', self.epoch, self.iter)",
          r"resumed epoch:? (?P<epoch>\d+), iter:? (?P<step>\d+)",
          ("resumed epoch",),
          ("resumed epoch: 12, iter: 4800", "resumed epoch 3, iter 1500")),
)
