"""DeepSpeed's engine progress line, printed every `steps_per_print` steps on rank 0.

Read from microsoft/DeepSpeed deepspeed/runtime/engine.py (`_report_progress`: v0.3 to
v0.14, `log_dist(f"step={step}, skipped={self.skipped_steps}, lr={lr}, mom={mom}", ranks=[0])`),
which log_dist prefixes with `[Rank 0] `; `skipped` is cumulative. Trainers that patch
`_report_progress` (gradient release in several RLHF/fine-tuning repos) print
`lr={lr[0]}, mom={mom[0]}`: one value, no brackets. DeepSpeed-Chat's eval
prints `ppl: {perplexity}` alone on a line (applications/DeepSpeed-Chat/training/step1_*/main.py).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import NUM, entry

_V = r"(?:[-+\d.eE]+|nan|inf)"

register(
    entry("deepspeed.step", "DeepSpeed", "progress",
          "microsoft/DeepSpeed v0.14.0 deepspeed/runtime/engine.py (_report_progress)",
          'log_dist(f"step={step}, skipped={self.skipped_steps}, lr={lr}, mom={mom}", ranks=[0])',
          # the lr list as the engine prints it, or one value where a trainer patches
          # _report_progress to print `lr={lr[0]}, mom={mom[0]}` (group 3 is the lr either way)
          r"\[Rank 0\] step=(?P<step>\d+), skipped=(?P<skipped>\d+), lr=\[?(?P<lr>(?:" + _V + r"(?:,\s*" + _V
          + r")*)?)\]?(?=, mom=|\s*$)",
          ("[2023-05-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] "
           + f"step={20}, skipped={1}, lr={[2.5e-05, 2.5e-05]}, mom={[(0.9, 0.95), (0.9, 0.95)]}",
           "[Rank 0] " + f"step={30}, skipped={1}, lr={[2.5e-05][0]}, mom={[(0.9, 0.95)][0]}"),
          ("step=",)),
    entry("deepspeed.ppl", "DeepSpeed", "eval",
          "microsoft/DeepSpeedExamples applications/DeepSpeed-Chat/training/step1_supervised_finetuning/main.py",
          'print_rank_0(f"ppl: {perplexity}", args.global_rank)',
          r"^ppl: (?P<ppl>" + NUM + r")\s*$",
          (f"ppl: {4.0125}",), ("ppl:",)),
)
