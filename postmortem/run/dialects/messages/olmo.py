"""OLMo's (allenai/OLMo) checkpoint load; no loss-scaler messages (it trains in bf16 / fp32
with torch autocast and FSDP mixed precision: no GradScaler, no `Loss scale` words, no
loss-spike message in olmo/train.py at 59a53e3).

Read from allenai/OLMo v0.5.0..v0.6.0 and 59a53e3 (2025-09) scripts/train.py (`main`:
`Loading checkpoint from {cfg.load_path}...` then `Checkpoint successfully loaded`; the
trainer state, and with it the global step, is restored unless `reset_trainer_state`), and
olmo/train.py (`Restoring RNG states...`, words without a step). The later OLMo-core
trainer was not read.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("olmo.load", "OLMo", "resume",
          "allenai/OLMo v0.6.0, 59a53e3 scripts/train.py (main)",
          'log.info(f"Loading checkpoint from {cfg.load_path}...")',
          r"Loading checkpoint from (?P<path>\S+?)\.\.\.(?=\s|$)",
          ("Loading checkpoint from s3://ai2-llm/checkpoints/OLMo-7B/step1000-unsharded...",
           "Loading checkpoint from /weka/olmo/run-42/step5000..."),
          ("Loading checkpoint from",)),
)
