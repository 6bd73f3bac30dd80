"""torchtune's resume: its only words for one, and no loss-scaler message at all.

Read from pytorch/torchtune v0.6.1 and bd2a0fc (2026-04):
torchtune/training/checkpointing/_checkpointer.py (`DistributedCheckpointer.load_checkpoint`,
the async-checkpoint resume path: it loads the newest `<output_dir>/step_N` or `epoch_N`
folder, so the words name where the run goes on; `step_N` is the step count saved,
_checkpoint_client.py `save_checkpoint`). The other resume path (`resume_from_checkpoint`
with the HF / Meta checkpointers) prints nothing of its own.
No overflow or loss-scale words: recipes/full_finetune_*.py refuse fp16 ("full fp16 training
is not supported with this recipe"), and no recipe builds a GradScaler (grep of recipes/ and
torchtune/training/ at bd2a0fc).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("torchtune.resume", "torchtune", "resume",
          "pytorch/torchtune v0.6.1, bd2a0fc torchtune/training/checkpointing/_checkpointer.py "
          "(DistributedCheckpointer.load_checkpoint)",
          'log_rank_zero(logger, msg=f"Loading checkpoint from {checkpoint_path}")  with checkpoint_path '
          '= <output_dir>/step_{steps_run} or <output_dir>/epoch_{epoch}',
          r"Loading checkpoint from (?P<path>\S*?(?<![\w-])(?:step_(?P<step>\d+)|epoch_\d+))/?(?=\s|$)",
          ("Loading checkpoint from /tmp/torchtune/llama3_2_1B/full/step_1200",
           "Loading checkpoint from /tmp/torchtune/llama3_2_1B/lora/epoch_2"),
          ("Loading checkpoint from",)),
)
