"""Lightning's progress bars: TQDMProgressBar and RichProgressBar.

lightning/pytorch/callbacks/progress/tqdm_progress.py: the bar's description
`f"Epoch {current_epoch}"` and its postfix `get_metrics()` (`v_num`, `train_loss_step`,
`val_loss`, ...) as tqdm prints them: `Epoch 3:  45%|████▌     | 450/1000 [00:30<00:37,
14.8it/s, v_num=1, train_loss=2.340]`. rich_progress.py: `Epoch 3/9 ━━━━ 450/1000 0:00:30 •
0:00:37 14.80it/s v_num: 1 train_loss: 2.340`. Read at Lightning-AI/pytorch-lightning 2.2.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.progress._entry import entry

register(
    entry("lightning-bar.tqdm", "Lightning", "progress",
          "Lightning-AI/pytorch-lightning 2.2 src/lightning/pytorch/callbacks/progress/tqdm_progress.py",
          'desc=f"Epoch {current_epoch}"; postfix=self.get_metrics(trainer, pl_module)',
          r"^Epoch (?P<epoch>\d+):\s+\d+%\|.*\|\s*(?P<batch>\d+)/\d+ \[[^\]]*(?:v_num|_step=|_epoch=|loss=)",
          ("Epoch 3:  45%|████▌     | 450/1000 [00:30<00:37, 14.8it/s, v_num=1, train_loss_step=2.340]",
           "Epoch 3: 100%|██████████| 1000/1000 [01:07<00:00, 14.8it/s, v_num=1, train_loss_step=2.100, "
           "val_loss=2.210, train_loss_epoch=2.300]"),
          ("Epoch",)),
    entry("lightning-bar.rich", "Lightning", "progress",
          "Lightning-AI/pytorch-lightning 2.2 src/lightning/pytorch/callbacks/progress/rich_progress.py",
          '"Epoch {current_epoch}/{max_epochs - 1}" + bar + metrics as "name: value"',
          r"^Epoch (?P<epoch>\d+)/\d+\s+[\u2500-\u257f]+\s+(?P<batch>\d+)/\d+ .*(?:v_num|loss)",
          ("Epoch 3/9  ━━━━━━━━━━━━━━━━━━━━ 450/1000 0:00:30 • 0:00:37 14.80it/s v_num: 1 train_loss: 2.340",),
          ("Epoch",)),
)
