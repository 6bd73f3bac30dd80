"""Lightning's progress bars: TQDMProgressBar and RichProgressBar.

lightning/pytorch/callbacks/progress/tqdm_progress.py: the bar's description
`f"Epoch {current_epoch}"` and its postfix `get_metrics()` (`v_num`, `train_loss_step`,
`val_loss`, ...) as tqdm prints them: `Epoch 3:  45%|████▌     | 450/1000 [00:30<00:37,
14.8it/s, v_num=1, train_loss=2.340]`. rich_progress.py: `Epoch 3/9 ━━━━ 450/1000 0:00:30 •
0:00:37 14.80it/s v_num: 1 train_loss: 2.340`. Read at Lightning-AI/pytorch-lightning 2.2.
NeMo's Megatron models log `reduced_train_loss`, `global_step` (a float: `99.0`) and
`consumed_samples` to the bar: the global step, not the bar's i/N, is the step.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.progress._entry import entry

register(
    entry("lightning-bar.tqdm", "Lightning", "progress",
          "Lightning-AI/pytorch-lightning 2.2 src/lightning/pytorch/callbacks/progress/tqdm_progress.py",
          'desc=f"Epoch {current_epoch}"; postfix=self.get_metrics(trainer, pl_module)',
          # NeMo logs `global_step=99.0` in the postfix: that, not the bar's i/N, is the step
          r"^Epoch (?P<epoch>\d+):\s+\d+%\|.*\|\s*(?P<batch>\d+)/\d+ \["
          r"(?:(?=[^\]]*?\bglobal_step=(?P<step>\d+)(?:\.0)?[,\]]))?[^\]]*(?:v_num|_step=|_epoch=|loss=)",
          ("Epoch 3:  45%|████▌     | 450/1000 [00:30<00:37, 14.8it/s, v_num=1, train_loss_step=2.340]",
           "Epoch 3: 100%|██████████| 1000/1000 [01:07<00:00, 14.8it/s, v_num=1, train_loss_step=2.100, "
           "val_loss=2.210, train_loss_epoch=2.300]",
           # NeMo (NVIDIA/NeMo nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py logs
           # reduced_train_loss, global_step, consumed_samples with prog_bar=True)
           "Epoch 0:  10%|█         | 100/1000 [00:50<07:30, 2.00it/s, v_num=0, reduced_train_loss=2.340, "
           "global_step=99.0, consumed_samples=51200.0, train_step_timing in s=0.5]"),
          ("Epoch",)),
    entry("lightning-bar.rich", "Lightning", "progress",
          "Lightning-AI/pytorch-lightning 2.2 src/lightning/pytorch/callbacks/progress/rich_progress.py",
          '"Epoch {current_epoch}/{max_epochs - 1}" + bar + metrics as "name: value"',
          r"^Epoch (?P<epoch>\d+)/\d+\s+[\u2500-\u257f]+\s+(?P<batch>\d+)/\d+ .*(?:v_num|loss)",
          ("Epoch 3/9  ━━━━━━━━━━━━━━━━━━━━ 450/1000 0:00:30 • 0:00:37 14.80it/s v_num: 1 train_loss: 2.340",),
          ("Epoch",)),
)
