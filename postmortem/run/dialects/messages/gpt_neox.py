"""GPT-NeoX's own resume words (its loss scaler is DeepSpeed's, catalogued there; its load
prints Megatron's `successfully loaded checkpoint from ... at iteration N` too).

Read from EleutherAI/gpt-neox megatron/training.py (`setup_model_and_optimizer`; the copies
in the code index, older `'...'` and newer `"..."` quoting, say the same words: `print_rank_0(f"Loading checkpoint and starting from iteration {neox_args.iteration}")`).
With `load` set and no checkpoint there, it says `iteration 0`: a fresh start, no resume,
so 0 is not read.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("gpt_neox.resume", "GPT-NeoX", "resume",
          "EleutherAI/gpt-neox megatron/training.py (setup_model_and_optimizer)",
          'print_rank_0(f"Loading checkpoint and starting from iteration {neox_args.iteration}")',
          r"Loading checkpoint and starting from iteration (?P<step>[1-9]\d*)",
          ("Loading checkpoint and starting from iteration 143000",),
          ("Loading checkpoint and starting",)),
)
