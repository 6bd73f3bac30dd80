"""MaxText's resume (bf16 on TPU: no loss scaler to speak of).

Read from AI-Hypercomputer/maxtext MaxText/checkpointing.py (`load_state_if_possible`:
`max_logging.log(f"restoring from this run's directory step {step}")`; older releases
`... latest step {latest_step}`). The step is the one the run goes on from.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("maxtext.restore", "MaxText", "resume",
          "AI-Hypercomputer/maxtext MaxText/checkpointing.py (load_state_if_possible)",
          "max_logging.log(f\"restoring from this run's directory step {step}\")  |  "
          "max_logging.log(f\"restoring from this run's directory latest step {latest_step}\")",
          r"restoring from this run's directory (?:latest )?step\s+(?P<step>\d+)",
          ("restoring from this run's directory step 4000",
           "restoring from this run's directory latest step 12000"),
          ("restoring from this run's directory",)),
)
