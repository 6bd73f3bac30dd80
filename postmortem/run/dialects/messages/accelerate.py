"""Hugging Face accelerate's state load; no overflow or skipped-step message.

Read from huggingface/accelerate 16cb6eb (2026-07): src/accelerate/
accelerator.py (`load_state`: "Loading states from {input_dir}", the call a resume makes),
and src/accelerate/optimizer.py (`AcceleratedOptimizer.step` with a GradScaler: the skip is
kept in `step_was_skipped` / `optimizer_step_was_skipped` and printed by nobody; grep of
src/ for overflow / skipped finds no log call). A skipped fp16 step under accelerate (and the
HF Trainer on its GradScaler path) leaves no words in the log.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    # a resume, not a weights load: load_state restores what save_state wrote, the optimizer,
    # the schedulers, the GradScaler and the RNG states with the model (diffusers' and the
    # accelerate examples' `--resume_from_checkpoint` call it): after steps, a relaunch
    entry("accelerate.load_state", "accelerate", "resume",
          "huggingface/accelerate 16cb6eb src/accelerate/accelerator.py (Accelerator.load_state)",
          'logger.info(f"Loading states from {input_dir}")',
          r"Loading states from (?P<path>\S+)",
          ("Loading states from output/step_1500",),
          ("Loading states from",)),
)
