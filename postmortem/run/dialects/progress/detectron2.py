"""detectron2's CommonMetricPrinter (detectron2/utils/events.py, v0.6).

`logger.info(str.join("", [f" {eta}", f"iter: {iteration}  ", f"{losses}  ", ...,
f"lr: {lr}  ", f"max_mem: {max_mem_mb:.0f}M"]))` with losses as
`"{}: {:.4g}".format(k, v.median(window))` (`total_loss`, `loss_cls`, ...), behind the logger
prefix `[MM/DD HH:MM:SS d2.utils.events]: `. Its COCO evaluation prints pycocotools'
summary (`Average Precision (AP) @[ IoU=... ] = 0.372`): an eval summary, not a progress line.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("detectron2.iter", "detectron2", "progress",
          "facebookresearch/detectron2 v0.6 detectron2/utils/events.py (CommonMetricPrinter.write)",
          '" {eta}iter: {iter}  {losses}  {non_losses}  {avg_time}{last_time}{avg_data_time}lr: {lr}  {memory}"',
          r"(?<![\w.])iter: (?P<step>\d+)\s\s(?:total_loss: (?P<loss>\S+))?(?=.{0,1500}?\blr: )",
          ("[05/01 10:00:00 d2.utils.events]:  eta: 1:02:03  iter: {}  {}  time: 0.4012  data_time: 0.0101  "
           "lr: {}  max_mem: {:.0f}M".format(1199, "  ".join("{}: {:.4g}".format(k, v) for k, v in
                                                               (("total_loss", 0.8123), ("loss_cls", 0.2345),
                                                                ("loss_box_reg", 0.3456))), 0.02, 3456),),
          ("iter: ",)),
)
