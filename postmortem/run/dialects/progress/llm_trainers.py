"""Other LLM trainers' progress lines: torchtitan, GPT-NeoX, ColossalAI, mlx-lm.

torchtitan, read at pytorch/torchtitan 78a1643 and 9eb6a21 (train.py, 2024-02/03), v0.1.0, v0.2.0 and
master (torchtitan/components/metrics.py `MetricsProcessor.log`): `logger.info(f"{color.red}step: {step:2}
{color.green}loss: {global_avg_loss:7.4f}  {color.orange}grad_norm: {grad_norm:7.4f}  ...memory:
{..:5.2f}GiB({..:.2f}%)  tps: {round(tps):,}  tflops: {tflops:,.2f}  mfu: {mfu:.2f}%")` behind `[titan]
<time> - root - INFO - ` (grad_norm since v0.2.0; `wps:` before `tps:`; `loss: {:8.5f}` on master;
2024-02: `step: {:>2}  loss: {round(loss, 4):>7}  iter: ..  data: ..  lr: ..`), and the validator's
`validate step: {step:2}  loss: {loss:7.4f}  memory: ...` (v0.2.0 on).
GPT-NeoX (EleutherAI/gpt-neox v1.0, v2.0, main megatron/logging.py `training_log`): `" samples/sec:
{:.3f} |"`, `" iteration {:8d}/{:8d} |"`, ..., `f" approx flops per GPU: {...} |"`, `" {}: {:.6E} |"` per
loss key (`lm_loss`), `" loss scale: {:.1f} |"`; megatron/training.py `evaluate_and_print_results`:
`f" {chart_name} results at {prefix} | "` + `f"{k} value: {v:.6E} | "` (prefix `iteration N`). ColossalAI's
legacy trainer hooks (colossalai/legacy/trainer/hooks/_log_hook.py): `f'[Epoch {trainer.cur_epoch} / Train]:
{msg}'` with msg `Loss = 2.3456, Accuracy = 0.5123` (`_format_number`: `{:.5g}`).
mlx-lm (ml-explore/mlx-lm mlx_lm/tuner/trainer.py):
`f"Iter {it}: Train loss {train_loss:.3f}, Learning Rate {lr:.3e}, It/sec ..."` and `Val loss`.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import NUM, entry

register(
    entry("torchtitan.step", "torchtitan", "progress",
          "pytorch/torchtitan v0.2.0 torchtitan/components/metrics.py (MetricsProcessor.log); v0.1.0 the same "
          "without grad_norm; 9eb6a21 train.py (wps)",
          'f"{color.red}step: {step:2}  {color.green}loss: {global_avg_loss:7.4f}  {color.orange}grad_norm: '
          '{grad_norm:7.4f}  {color.turquoise}memory: {..:5.2f}GiB({..:.2f}%)  {color.blue}tps: {round(tps):,}  '
          '{color.cyan}tflops: {tflops:,.2f}  {color.magenta}mfu: {mfu:.2f}%{color.reset}"',
          r"(?<!validate )\bstep:\s*(?P<step>\d+)\s+(?P<fields>loss:\s*" + NUM + r".*)$",
          ("[rank0]:[titan] 2025-06-01 10:00:00,000 - root - INFO - " + f"step: {120:2}  loss: {3.4567:7.4f}  "
           f"grad_norm: {0.8123:7.4f}  memory: {30.12:5.2f}GiB({38.01:.2f}%)  tps: {round(7123.4):,}  "
           f"tflops: {312.71:,.2f}  mfu: {41.23:.2f}%",
           "[titan] 2024-03-15 10:00:00,000 - root - INFO - " + f"step: {5:2}  loss: {9.8765:7.4f}  "
           f"memory: {30.12:5.2f}GiB({38.01:.2f}%)  wps: {round(7123.4):,}",
           f"step: {6:>2}  loss: {round(9.81234567, 4):>7}  iter: {1.2345:>7}  data: {0.01:>5}  lr: {0.0008:<6}"),
          ("step:",)),
    entry("torchtitan.validate", "torchtitan", "eval",
          "pytorch/torchtitan v0.2.0 torchtitan/components/metrics.py (MetricsProcessor.log_validation)",
          'f"{color.yellow}validate step: {step:2}  {color.green}loss: {loss:7.4f}  {color.turquoise}memory: '
          '{..:5.2f}GiB({..:.2f}%){color.reset}"',
          r"\bvalidate step:\s*(?P<step>\d+)\s+loss:\s*(?P<val_loss>" + NUM + r")",
          ("[titan] 2025-06-01 10:00:00,000 - root - INFO - " + f"validate step: {500:2}  loss: {3.5012:7.4f}  "
           f"memory: {30.12:5.2f}GiB({38.01:.2f}%)",),
          ("validate step:",)),
    entry("gpt-neox.iteration", "GPT-NeoX", "progress",
          "EleutherAI/gpt-neox v2.0 megatron/logging.py (training_log); v1.0 the same",
          'f" samples/sec: {samples_per_sec:.3f} |" + f" {key}: {value:.6E} |" (lm_loss, learning_rate, loss_scale)',
          r"samples/sec: [\d.]+ \|(?=.{0,2000}?\blm_loss: )|\blm_loss: [^|]{0,40}\|(?=.{0,2000}?samples/sec)",
          (" samples/sec: {:.3f} |".format(101.234) + " iteration {:8d}/{:8d} |".format(120, 320000)
           + " elapsed time per iteration (ms): {:.1f} |".format(2412.3) + " learning rate: {:.3E} |".format(6e-5)
           + " approx flops per GPU: %3.1f%s |" % (152.3, "TFLOPS") + " {}: {:.6E} |".format("lm_loss", 2.3456)
           + " loss scale: {:.1f} |".format(65536.0) + " number of skipped iterations: {:3d} |".format(0)
           + " number of nan iterations: {:3d} |".format(0),),
          ("lm_loss",)),
    entry("gpt-neox.validation", "GPT-NeoX", "eval",
          "EleutherAI/gpt-neox v2.0 megatron/training.py (evaluate_and_print_results)",
          'f" {chart_name} results at {prefix} | " + f"{k} value: {v:.6E} | " ...  # prefix "iteration {}"',
          r"\b(?:validation|test) results at (?:iteration (?P<step>\d+)|the end of training for \w+ data) \| "
          r"(?P<fields>\w+ value: .*)$",
          (f" {'validation'} results at {'iteration 1000'} | " + f"{'lm_loss'} value: {2.401:.6E} | "
           + f"{'lm_loss_ppl'} value: {11.03:.6E} | ",),
          ("results at",)),
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
