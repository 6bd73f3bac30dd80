"""Ultralytics YOLO's console (ultralytics/engine/trainer.py, v8.1 on; ultralytics/yolo/engine/ before).

The format string was found verbatim (`find_string`) in trainer.py copies of 8.1+ (`_do_train`,
`pbar.set_description`), memory as `f"{self._get_memory():.3g}G"` (8.2+; earlier
`torch.cuda.memory_reserved() / 1E9`); the repository is too large to mirror here, so no tag was
walked.

A header `('\\n' + '%11s' * (4 + len(self.loss_names))) % ('Epoch', 'GPU_mem', *self.loss_names,
'Instances', 'Size')` then tqdm frames whose description is `('%11s' * 2 + '%11.4g' * (2 +
loss_len)) % (f'{epoch + 1}/{self.epochs}', mem, *losses, instances, imgsz)`: the values by
position under the header's names. The general reader reads the numbers; the header names them.
The trainer steps on the sum of the parts (`loss.sum() * batch_size`, v8 utils/loss.py): the
loss is their sum.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry
from postmortem.run.dialects.progress import LOSS_IS_SUM_OF_PARTS

LOSS_IS_SUM_OF_PARTS.add("ultralytics")

register(
    entry("ultralytics.epoch", "Ultralytics", "progress",
          "ultralytics/ultralytics 8.x ultralytics/engine/trainer.py (BaseTrainer._do_train: pbar.set_description; "
          "header: progress_string)",
          "('%11s' * 2 + '%11.4g' * (2 + loss_len)) % (f'{epoch + 1}/{self.epochs}', mem, *losses, "
          "batch['cls'].shape[0], batch['img'].shape[-1])",
          # '%11.4g' prints a negative loss (`-0.2335`), an exponent (`1.234e-05`), nan and inf
          r"^\s*(?P<epoch>\d+)/\d+\s+[\d.]+G(?:\s+(?:[-+]?[\d.]+(?:e[-+]?\d+)?|nan|inf)){3,}:\s+\d+%\|",
          (("%11s" * 2 + "%11.4g" * 5) % ("3/100", "2.51G", 1.234, 2.345, 1.456, 32, 640)
           + ": 100%|██████████| 10/10 [00:05<00:00,  1.9it/s]",
           ("%11s" * 2 + "%11.4g" * 5) % ("12/300", "0G", -0.2335, 1.234e-05, float("nan"), 7, 640)
           + ":  43%|████▎     | 337/787 [01:02<01:23,  5.41it/s]",
           # classify: one loss (ClassificationTrainer `self.loss_names = ["loss"]`)
           ("%11s" * 2 + "%11.4g" * 3) % ("3/100", "1.02G", 0.8123, 64, 224)
           + ": 100%|██████████| 10/10 [00:05<00:00,  1.9it/s]")),
)

# `self.loss_names` of each task's trainer (ultralytics/models/yolo/*/train.py get_validator;
# classify: ClassificationTrainer `self.loss_names = ["loss"]`): a console pasted from mid-run
# has no header above its rows, and the count of loss cells names them. Three are detect's (and
# obb's) names; RT-DETR's three (giou_loss, cls_loss, l1_loss) cannot be told from them, and the
# loss, their sum, is the same.
LOSS_NAMES_BY_COUNT = {1: ("loss",), 3: ("box_loss", "cls_loss", "dfl_loss"),
                       4: ("box_loss", "seg_loss", "cls_loss", "dfl_loss"),
                       5: ("box_loss", "pose_loss", "kobj_loss", "cls_loss", "dfl_loss")}


def header_of(cells: int) -> list[str] | None:
    """The header `progress_string` prints above a row of `cells` cells, None if no task has it."""
    losses = LOSS_NAMES_BY_COUNT.get(cells - 4)
    return ["Epoch", "GPU_mem", *losses, "Instances", "Size"] if losses else None
