"""Custom trainers without a framework of their own: `| step: N | key: v |` tables
(DeepSpeed-Chat's RLHF loop and many scripts) and loguru-style consoles.

DeepSpeed-Chat applications/DeepSpeed-Chat/training/step3_rlhf_finetuning/main.py prints
`f'Epoch: {epoch} | Step: {step} | PPO Epoch: {ppo_ep+1} | Actor Loss: {actor_loss} | Critic
Loss: {critic_loss} | Unsupervised Loss: {unsup_loss}'`; many scripts print `| step: N |` tables.
loguru's default format (Delgan/loguru loguru/_defaults.py LOGURU_FORMAT, read at 0.3.0, 0.7.2,
0.7.3 and master 2a17be7): `{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} -
{message}`; master (f3830e1, 2025-01, after 0.7.3) adds the UTC offset: `{time:YYYY-MM-DD HH:mm:ss.SSS Z}`
(`+00:00`). The message is the trainer's own `step ... loss ...`: the general reader reads it.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("kv-pipe.step", "custom", "progress",
          "microsoft/DeepSpeedExamples applications/DeepSpeed-Chat/training/step3_rlhf_finetuning/main.py",
          "f'| step: {step} | loss: {loss} | lr: {lr} |'",
          r"(?:^|\|)\s*step:\s*(?P<step>\d+)\s*\|(?P<fields>.*)$",
          ("| step: {} | loss: {} | lr: {} |".format(120, 2.3456, 1e-4),), ("step:",)),
    entry("loguru.message", "loguru", "progress",
          "Delgan/loguru 0.7.3 loguru/_defaults.py (LOGURU_FORMAT); master f3830e1 adds ' Z'",
          "<green>{time:YYYY-MM-DD HH:mm:ss.SSS}</green> | <level>{level: <8}</level> | "
          "<cyan>{name}</cyan>:<cyan>{function}</cyan>:<cyan>{line}</cyan> - <level>{message}</level>",
          r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}(?: [+-]\d\d:\d\d)? \| (?:INFO|DEBUG|SUCCESS|WARNING)\s*\| "
          r"[\w.<>]+:[\w<>]+:\d+ - (?=.*\b(?:loss|Loss)\b)",
          ("{} | {: <8} | {}:{}:{} - {}".format("2024-05-01 10:00:00.123", "INFO", "__main__", "train", 42,
                                                "step 120 | loss 2.3456 | lr 1.0e-04"),
           "{} | {: <8} | {}:{}:{} - {}".format("2025-02-01 10:00:00.123 +00:00", "SUCCESS", "trainer", "<module>",
                                                7, "Epoch 3 step 130 loss=2.3312")),
          (" | ",)),
)
