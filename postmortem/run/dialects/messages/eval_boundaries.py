"""The words frameworks print around an eval, where they print one as a message with no values
of its own (the eval's values are progress / eval lines, read elsewhere). fairseq2's are in
its own module (its `Validation finished.` is left out: it would be dated at the next
progress line, after the eval it ends). Kept as events on the step the message names, else
the step the next progress line names (`extras["evals"]`).

Read from facebookresearch/fairseq v0.10.0 and 3d262bb fairseq_cli/train.py (`validate`;
v0.9.0 printed none) and huggingface/transformers src/transformers/trainer.py
(`evaluation_loop`: `logger.info(f"***** Running {description} *****")`, description
"Evaluation" from `evaluate`; "Prediction" is no eval of the training run).
Frameworks that print no such words: DeepSpeed, Megatron-LM (its `validation loss at
iteration N` line carries the values), Lightning (its `Validation DataLoader 0:` is a
progress bar), mmengine (`Epoch(val)` lines carry the values).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("fairseq.validation", "fairseq", "eval_boundary",
          "facebookresearch/fairseq v0.10.0, 3d262bb fairseq_cli/train.py (validate)",
          "logger.info('begin validation on \"{}\" subset'.format(subset))",
          r'begin validation on "(?P<subset>[^"]+)" subset',
          ('begin validation on "valid" subset',),
          ("begin validation on",)),
    entry("transformers.evaluation", "HF Trainer", "eval_boundary",
          "huggingface/transformers v4.x src/transformers/trainer.py (evaluation_loop)",
          'logger.info(f"***** Running {description} *****")  with description = "Evaluation"',
          r"\*\s*Running Evaluation\s*\*",     # the reader blanks runs of `*` but one
          ("***** Running Evaluation *****",),
          ("Running Evaluation",)),
)
