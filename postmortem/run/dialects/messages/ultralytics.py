"""Ultralytics YOLO's and YOLOv5's resume messages (the epochs go on from the checkpoint's).

Read with `find_string` in copies of ultralytics/ultralytics 8.x ultralytics/engine/trainer.py
(`BaseTrainer.resume_training`; ultralytics/yolo/engine/trainer.py before 8.1) and
ultralytics/yolov5 v7.0 train.py (`main`: `LOGGER.info(f'Resuming training from {ckpt}')`, ckpt
`last.pt` under `weights/`) and utils/torch_utils.py (`smart_resume`); the repositories are too
large to mirror here, so no tag was walked. litgpt's `Resuming training from {resume}` shares
the words: its entry leaves these two shapes to this module.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("ultralytics.resume", "Ultralytics", "resume",
          "ultralytics/ultralytics 8.x ultralytics/engine/trainer.py (BaseTrainer.resume_training)",
          'LOGGER.info(f"Resuming training {self.args.model} from epoch {start_epoch + 1} to '
          '{self.epochs} total epochs")',
          r"Resuming training (?!from )(?P<path>\S+) from epoch (?P<epoch>\d+) to \d+ total epochs",
          ("Resuming training runs/detect/train/weights/last.pt from epoch 4 to 100 total epochs",),
          ("Resuming training ",)),
    entry("yolov5.resume", "YOLOv5", "resume",
          "ultralytics/yolov5 v7.0 train.py (main), utils/torch_utils.py (smart_resume)",
          "LOGGER.info(f'Resuming training from {ckpt}')  |  "
          "LOGGER.info(f'Resuming training from {weights} from epoch {start_epoch} to {epochs} total epochs')",
          r"Resuming training from (?P<path>\S+\.pt)(?: from epoch (?P<epoch>\d+) to \d+ total epochs"
          r"|(?<=/last\.pt)\s*$)",
          ("Resuming training from runs/train/exp/weights/last.pt",
           "Resuming training from runs/train/exp/weights/last.pt from epoch 4 to 300 total epochs"),
          ("Resuming training from",)),
)
