"""Custom trainers without a framework of their own: `| step: N | key: v |` tables
(DeepSpeed-Chat's RLHF loop and many scripts) and loguru-style consoles.

DeepSpeed-Chat applications/DeepSpeed-Chat/training/step3_rlhf_finetuning/main.py prints
`f'Epoch: {epoch} | Step: {step} | PPO Epoch: {ppo_ep+1} | Actor Loss: {actor_loss} | Critic
Loss: {critic_loss} | Unsupervised Loss: {unsup_loss}'`; many scripts print `| step: N |` tables.
loguru's default format (Delgan/loguru loguru/_defaults.py LOGURU_FORMAT):
`{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} - {message}`, the
message being the trainer's own `step ... loss ...`: the general reader reads it.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.progress._entry import entry

register(
    entry("kv-pipe.step", "custom", "progress",
          "microsoft/DeepSpeedExamples applications/DeepSpeed-Chat/training/step3_rlhf_finetuning/main.py",
          "f'| step: {step} | loss: {loss} | lr: {lr} |'",
          r"(?:^|\|)\s*step:\s*(?P<step>\d+)\s*\|(?P<fields>.*)$",
          ("| step: {} | loss: {} | lr: {} |".format(120, 2.3456, 1e-4),), ("step:",)),
    entry("loguru.message", "loguru", "progress",
          "Delgan/loguru 0.7 loguru/_defaults.py (LOGURU_FORMAT)",
          "{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} - {message}",
          r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \| (?:INFO|DEBUG|SUCCESS|WARNING)\s*\| [\w.<>]+:[\w<>]+:\d+ - "
          r"(?=.*\b(?:loss|Loss)\b)",
          ("2024-05-01 10:00:00.123 | INFO     | __main__:train:42 - step 120 | loss 2.3456 | lr 1.0e-04",),
          (" | ",)),
)
