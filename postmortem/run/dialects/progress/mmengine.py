"""OpenMMLab's text logs: mmengine's LogProcessor and mmcv's TextLoggerHook (mmdet, mmseg,
mmpretrain, mmpose ... print through them).

mmengine/runner/log_processor.py (v0.7-v0.10) `get_log_after_iter`: by epoch
`f'Epoch({mode}) [{cur_epoch}][{cur_iter:>{n}}/{dataloader_len}]  '`, by iteration
`f'Iter({mode}) [{cur_iter:>{n}}/{max_iters}]  '`, then `lr: {:.4e}  eta: ...  time: ...
data_time: ...  memory: ...  loss: ...  loss_cls: ...` (two spaces apart); epochs from 1.
mmcv/runner/hooks/logger/text.py (mmcv 1.x) `_log_info`: `f'Epoch [{epoch}][{i}/{n}]\t'`
or `f'Iter [{i}/{max_iters}]\t'`, then `lr: ..., eta: ..., time: ..., loss: ...` (comma apart).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("mmengine.epoch", "mmengine", "progress",
          "open-mmlab/mmengine v0.10.3 mmengine/runner/log_processor.py (get_log_after_iter); "
          "open-mmlab/mmcv v1.7.1 mmcv/runner/hooks/logger/text.py (_log_info)",
          "f'Epoch({mode}) [{cur_epoch}][{cur_iter:>{n}}/{dataloader_len}]  '  |  "
          "f'Epoch [{epoch}][{inner_iter}/{len(data_loader)}]\\t'",
          r"Epoch(?:\((?P<mode>\w+)\))?\s*\[(?P<epoch>\d+)\]\[\s*(?P<batch>\d+)/\d+\]",
          ("2023/05/01 10:00:00 - mmengine - INFO - " + "Epoch({}) [{}][{:>4}/{}]  ".format("train", 3, 120, 1250)
           + "lr: 1.0000e-02  eta: 1:02:03  time: 0.4012  data_time: 0.0101  memory: 3456  loss: 1.2345  "
           "loss_cls: 0.4567  loss_bbox: 0.7778",
           "2021-05-01 10:00:00,000 - mmdet - INFO - " + "Epoch [{}][{}/{}]\t".format(3, 120, 1250)
           + "lr: 2.000e-02, eta: 1:02:03, time: 0.401, data_time: 0.010, memory: 3456, loss_cls: 0.4567, "
           "loss_bbox: 0.7778, loss: 1.2345")),
    entry("mmengine.iter", "mmengine", "progress",
          "open-mmlab/mmengine v0.10.3 mmengine/runner/log_processor.py; open-mmlab/mmcv v1.7.1 text.py",
          "f'Iter({mode}) [{cur_iter:>{n}}/{max_iters}]  '  |  f'Iter [{iter}/{max_iters}]\\t'",
          r"\bIter(?:\((?P<mode>\w+)\))?\s*\[\s*(?P<step>\d+)/\d+\]",
          ("Iter({}) [{:>5}/{}]  ".format("train", 1200, 80000) + "lr: 1.0000e-02  eta: 5:00:00  time: 0.3  "
           "data_time: 0.01  memory: 3456  loss: 0.8123  decode.loss_ce: 0.8123",),
          ("Iter",)),
)
