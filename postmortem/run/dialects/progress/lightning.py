"""Lightning's progress bars: TQDMProgressBar and RichProgressBar.

lightning/pytorch/callbacks/progress/tqdm_progress.py: the bar's description
`f"Epoch {current_epoch}"` and its postfix `get_metrics()` (`v_num`, `train_loss_step`,
`val_loss`, ...) as tqdm prints them: `Epoch 3:  45%|████▌     | 450/1000 [00:30<00:37,
14.8it/s, v_num=1, train_loss=2.340]`. rich_progress.py: `Epoch 3/9 ━━━━ 450/1000 0:00:30 •
0:00:37 14.80it/s v_num: 1 train_loss: 2.34 `. Read at Lightning-AI/pytorch-lightning 03f57f9
(2.x, tqdm_progress.py: `set_description(f"Epoch {trainer.current_epoch}")`, `set_postfix(self.get_metrics(..))`,
`Tqdm.format_num` pads floats to 5 characters) and the 1.5 RichProgressBar (`_get_train_description`:
`f"Epoch {current_epoch}"` padded with spaces to `Validation`'s width, no `/max`; 2.x adds
`f"/{max_epochs - 1}"`; `BatchesProcessedColumn` prints `{completed}/{total}` with `--` for an infinite total;
`MetricsTextColumn`: `f"{k}: {round(v, 3) if isinstance(v, float) else v} "`). Lightning 1.x's bar
postfix also held the running `loss=` before `v_num`.
NeMo's Megatron models log `reduced_train_loss`, `global_step` (a float: `99.0`) and
`consumed_samples` to the bar: the global step, not the bar's i/N, is the step.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("lightning-bar.tqdm", "Lightning", "progress",
          "Lightning-AI/pytorch-lightning 03f57f9 (2.x) src/lightning/pytorch/callbacks/progress/tqdm_progress.py "
          "(on_train_epoch_start, on_train_batch_end)",
          'desc=f"Epoch {current_epoch}"; postfix=self.get_metrics(trainer, pl_module)',
          # NeMo logs `global_step=99.0` in the postfix: that, not the bar's i/N, is the step
          r"^Epoch (?P<epoch>\d+):\s+\d+%\|.*\|\s*(?P<batch>\d+)/\d+ \["
          r"(?:(?=[^\]]*?\bglobal_step=(?P<step>\d+)(?:\.0)?[,\]]))?[^\]]*(?:v_num|_step=|_epoch=|loss=)",
          ("Epoch 3:  45%|████▌     | 450/1000 [00:30<00:37, 14.8it/s, v_num=1, train_loss_step=2.340]",
           # Lightning 1.x: the running loss first
           "Epoch 3:  45%|████▌     | 450/1000 [00:30<00:37, 14.8it/s, loss=2.34, v_num=1]",
           "Epoch 3: 100%|██████████| 1000/1000 [01:07<00:00, 14.8it/s, v_num=1, train_loss_step=2.100, "
           "val_loss=2.210, train_loss_epoch=2.300]",
           # NeMo (NVIDIA/NeMo nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py logs
           # reduced_train_loss, global_step, consumed_samples with prog_bar=True)
           "Epoch 0:  10%|█         | 100/1000 [00:50<07:30, 2.00it/s, v_num=0, reduced_train_loss=2.340, "
           "global_step=99.0, consumed_samples=51200.0, train_step_timing in s=0.5]"),
          ("Epoch",)),
    entry("lightning-bar.rich", "Lightning", "progress",
          "Lightning-AI/pytorch-lightning 2.x src/lightning/pytorch/callbacks/progress/rich_progress.py; "
          "1.5 pytorch_lightning/callbacks/progress/rich_progress.py (_get_train_description, MetricsTextColumn)",
          'f"Epoch {current_epoch}" [+ f"/{max_epochs - 1}"] + bar + f"{completed}/{total}" + '
          'f"{elapsed_delta} • {remaining_delta}" + f"{task_speed}it/s" + f"{k}: {round(v, 3)} " per metric',
          r"^Epoch (?P<epoch>\d+)(?:/\d+)?\s+[\u2500-\u257f]+\s+(?P<batch>\d+)/(?:\d+|--) .*(?:v_num|loss)",
          ("Epoch 3/9  ━━━━━━━━━━━━━━━━━━━━ 450/1000 0:00:30 • 0:00:37 14.80it/s "
           + "".join(f"{k}: {round(v, 3) if isinstance(v, float) else v} " for k, v in (("v_num", 1),
                                                                                        ("train_loss", 2.3401))),
           "Epoch 3     ━━━━━━━━━━━━━━━━━━━━ 450/-- 0:00:30 • -:--:-- 14.80it/s v_num: 1 loss: 2.34 "),
          ("Epoch",)),
)
