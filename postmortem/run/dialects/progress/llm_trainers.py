"""Other LLM trainers' progress lines: torchtitan, GPT-NeoX, ColossalAI, mlx-lm.

torchtitan (pytorch/torchtitan train.py, 2024): `logger.info(f"{color.cyan}step: {train_state.step:2}
{color.green}loss: {global_avg_loss:7.4f}  {color.yellow}memory: ...GiB  {color.blue}wps:
{round(wps):,}  {color.magenta}mfu: {mfu:.2f}%{color.reset}")` behind `[titan] <time> - root - INFO - `.
GPT-NeoX (EleutherAI/gpt-neox megatron/training.py `training_log`): `f" samples/sec: {samples_per_sec:.3f} |"`
then `f" {key}: {value:.6E} |"` for `lm_loss`, `learning_rate`, `loss_scale`. ColossalAI's
legacy trainer hooks (colossalai/legacy/trainer/hooks/_log_hook.py): `f'[Epoch {trainer.cur_epoch} / Train]:
{msg}'` with msg `Loss = 2.3456, Accuracy = 0.5123` (`_format_number`: `{:.5g}`).
mlx-lm (ml-explore/mlx-lm mlx_lm/tuner/trainer.py):
`f"Iter {it}: Train loss {train_loss:.3f}, Learning Rate {lr:.3e}, It/sec ..."` and `Val loss`.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.progress._entry import NUM, entry

register(
    entry("torchtitan.step", "torchtitan", "progress", "pytorch/torchtitan v0.1 torchtitan/train.py (train)",
          'f"step: {step:2}  loss: {loss:7.4f}  memory: {mem:5.2f}GiB({pct:.2f}%)  wps: {round(wps):,}  "'
          'mfu: {mfu:.2f}%"',
          r"\bstep:\s*(?P<step>\d+)\s+(?P<fields>loss:\s*" + NUM + r".*)$",
          ("[rank0]:[titan] 2024-10-01 10:00:00,000 - root - INFO - " + f"step: {120:2}  loss: {3.4567:7.4f}  "
           f"memory: {30.12:5.2f}GiB({38.01:.2f}%)  wps: {round(7123.4):,}  mfu: {41.23:.2f}%",),
          ("step:",)),
    entry("gpt-neox.iteration", "GPT-NeoX", "progress",
          "EleutherAI/gpt-neox v2.0 megatron/training.py (training_log)",
          'f" samples/sec: {samples_per_sec:.3f} |" + f" {key}: {value:.6E} |" (lm_loss, learning_rate, loss_scale)',
          r"samples/sec: [\d.]+ \|(?=.{0,2000}?\blm_loss: )|\blm_loss: [^|]{0,40}\|(?=.{0,2000}?samples/sec)",
          (" samples/sec: {:.3f} |".format(101.234) + " iteration {:8d}/{:8d} |".format(120, 320000)
           + "".join(" {}: {:.6E} |".format(k, v) for k, v in (("learning_rate", 6e-5), ("lm_loss", 2.3456),
                                                                ("loss_scale", 65536.0))),),
          ("lm_loss",)),
    entry("colossalai.epoch", "ColossalAI", "progress",
          "hpcaitech/ColossalAI v0.3.6 colossalai/legacy/trainer/hooks/_log_hook.py (LogMetricByEpochHook)",
          "f'[Epoch {trainer.cur_epoch} / Train]: {msg}' with msg ', '.join(f'{metric_name} = "
          "{_format_number(value)}')  (and '/ Test]')",
          r"\[Epoch (?P<epoch>\d+) / (?P<mode>Train|Test)\]: (?P<fields>(?=.{0,400}?\bLoss = ).*)$",
          (f"[Epoch {3} / Train]: " + ", ".join(f"{k} = {v:.5g}" for k, v in (("Loss", 2.34561), ("Accuracy", 0.5123))),
           f"[Epoch {3} / Test]: " + ", ".join(f"{k} = {v:.5g}" for k, v in (("Loss", 2.40112), ("Accuracy", 0.5012)))),
          ("[Epoch",)),
    entry("mlx-lm.iter", "mlx-lm", "progress", "ml-explore/mlx-lm v0.19 mlx_lm/tuner/trainer.py (train)",
          'f"Iter {it}: Train loss {train_loss:.3f}, Learning Rate {learning_rate:.3e}, It/sec {it_sec:.3f}, ..."',
          r"^Iter (?P<step>\d+): (?:Train|Val) loss",
          (f"Iter {100}: Train loss {1.234:.3f}, Learning Rate {1e-5:.3e}, It/sec {0.812:.3f}, "
           f"Tokens/sec {412.5:.3f}, Trained Tokens {51200}, Peak mem {7.1:.3f} GB",
           f"Iter {200}: Val loss {1.301:.3f}, Val took {12.3:.3f}s")),
)
