"""Lightning's checkpoint restore (NeMo's trainers print the same words).

Read from Lightning-AI/pytorch-lightning src/lightning/pytorch/trainer/connectors/
checkpoint_connector.py (`resume_start`: "Restoring states from the checkpoint path at";
`resume_end`: "Restored all states from the checkpoint at" while fitting (1.x wrote
"checkpoint file at"), "Loaded model weights from the checkpoint at" for validate/test,
which is no resume).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.messages._shared import entry

_PL = ("Lightning-AI/pytorch-lightning 1.x / 2.x src/lightning/pytorch/trainer/connectors/"
       "checkpoint_connector.py")

register(
    entry("lightning.restored", "Lightning", "resume", _PL + " (resume_end, fitting)",
          'rank_zero_info(f"Restored all states from the checkpoint at {self._ckpt_path}")',
          r"Restored all states from the checkpoint (?:file )?at (?P<path>\S+)",
          ("Restored all states",),
          ("Restored all states from the checkpoint at /runs/ckpt/last.ckpt",
           "Restored all states from the checkpoint file at checkpoints/last.ckpt")),
    entry("lightning.restoring", "Lightning", "checkpoint", _PL + " (resume_start)",
          'rank_zero_info(f"Restoring states from the checkpoint path at {checkpoint_path}")',
          r"Restoring states from the checkpoint path at (?P<path>\S+)",
          ("Restoring states from the checkpoint",),
          ("Restoring states from the checkpoint path at /runs/ckpt/last.ckpt",)),
)
