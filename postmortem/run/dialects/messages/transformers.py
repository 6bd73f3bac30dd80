"""Hugging Face Trainer's resume (accelerate, TRL, axolotl, LLaMA-Factory and unsloth train
through it and print the same words).

Read from huggingface/transformers src/transformers/trainer.py (`_inner_training_loop`,
v4.x; `logger.info("  Continuing training from global step %d", global_step)` in the
releases before the f-strings). The global step is the step the run goes on from.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_HF = "huggingface/transformers v4.x src/transformers/trainer.py (_inner_training_loop)"

register(
    entry("transformers.load", "HF Trainer", "checkpoint",
          "huggingface/transformers v4.x src/transformers/trainer.py (_load_from_checkpoint; `).` in "
          "v4.0-v4.2 _load_from_checkpoint's forerunner in train())",
          'logger.info(f"Loading model from {resume_from_checkpoint}.")',
          r"\bLoading model from (?P<path>\S+?)\)? ?\.$",
          ("Loading model from output/checkpoint-1500.", "Loading model from output/checkpoint-1500)."),
          ("Loading model from",)),
    entry("transformers.resume", "HF Trainer", "resume", _HF,
          'logger.info(f"  Continuing training from global step {self.state.global_step}")',
          r"Continuing training from global step (?P<step>\d+)",
          ("  Continuing training from global step 1500",),
          ("Continuing training from global step",)),
    entry("transformers.resume.begin", "HF Trainer", "checkpoint", _HF,
          'logger.info("  Continuing training from checkpoint, will skip to saved global_step")',
          r"Continuing training from checkpoint, will skip to saved global_step",
          ("  Continuing training from checkpoint, will skip to saved global_step",),
          ("Continuing training from checkpoint",)),
)
