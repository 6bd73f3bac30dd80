"""OLMo's console metrics (allenai/OLMo olmo/train.py, v0.2-v0.5, `log_metrics_to_console`).

`log.info(f"{prefix}\\n" + "\\n".join([f"    {name}={format_float(value)}" for name, value in
metrics.items() if ...]))` with prefix `f"[step={self.global_step}/{self.max_steps}]"` (v0.2),
`f"[step={self.global_step}/{self.max_steps},epoch={epoch}]"` or `f"[step=.../..., eta={self.get_eta()}]"`:
a header line with the step, then one indented `name=value` line per metric
(`train/CrossEntropyLoss`, `optim/total_grad_norm`, `optim/learning_rate_group0`).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("olmo.step", "OLMo", "progress", "allenai/OLMo v0.4.0 olmo/train.py (Trainer.log_metrics_to_console)",
          'f"[step={self.global_step}/{self.max_steps},epoch={self.epoch}]" + "\\n    {name}={value}" per metric',
          r"\[step=(?P<step>\d+)/\d+",
          (f"2024-03-01 10:00:00.000\thost:0\tolmo.train:816\tINFO\t[step={120}/{739328},epoch={0}]"
           "\n    train/CrossEntropyLoss=2.345\n    optim/total_grad_norm=0.8123",
           f"[step={130}/{739328},epoch={0}]\n    train/CrossEntropyLoss=2.301\n    optim/total_grad_norm=0.7912",
           f"[step={140}/{739328}, eta={'1:02:03'}]\n    train/CrossEntropyLoss=2.299"),
          ("[step=",)),
)
