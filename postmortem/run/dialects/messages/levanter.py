"""levanter's resume (JAX; no loss scaler: it trains in bf16 / fp32 through jmp policies and
prints no overflow words).

Read from stanford-crfm/levanter 9263f81 (2025-09): src/levanter/main/train_lm.py
(`Resuming training from step {state.step}`), main/sft.py and sft_mixture.py (the same with
`current_step`), src/levanter/checkpoint.py (`load_checkpoint`: "Loading checkpoint from
{checkpoint_path}", the generic words; `discover_latest_checkpoint`: "Discovered latest
checkpoint from ... at ...").
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("levanter.resume", "levanter", "resume",
          "stanford-crfm/levanter 9263f81 src/levanter/main/train_lm.py, sft.py, sft_mixture.py",
          'logger.info(f"Resuming training from step {state.step}")',
          r"Resuming training from step (?P<step>\d+)",
          ("Resuming training from step 12000",),
          ("Resuming training from step",)),
)
