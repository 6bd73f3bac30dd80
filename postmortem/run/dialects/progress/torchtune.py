"""torchtune's recipes: the tqdm description of every recipe's train loop.

pytorch/torchtune recipes/full_finetune_single_device.py, lora_finetune_single_device.py,
*_distributed.py (v0.2 to v0.5): `pbar.set_description(f"{curr_epoch + 1}|{self.global_step}|Loss:
{loss_to_log}")`: the epoch (from 1), then the global step, then the loss. The step is the
second counter, not the first.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import NUM, entry

register(
    entry("torchtune.pbar", "torchtune", "progress",
          "pytorch/torchtune v0.4.0 recipes/full_finetune_single_device.py (train)",
          'pbar.set_description(f"{curr_epoch + 1}|{self.global_step}|Loss: {loss_to_log}")',
          r"(?:^|\s)(?P<epoch>\d+)\|(?P<step>\d+)\|Loss: (?P<loss>" + NUM + r")",
          (f"{0 + 1}|{120}|Loss: {1.2345678}" + ":  24%|██▍       | 120/500 [01:02<03:20,  1.9it/s]",),
          ("|Loss:",)),
)
