"""Lightning's checkpoint restore (NeMo's trainers print the same words).

Read from Lightning-AI/pytorch-lightning src/lightning/pytorch/trainer/connectors/
checkpoint_connector.py (`resume_start`: "Restoring states from the checkpoint path at";
`resume_end`: "Restored all states from the checkpoint at" while fitting (1.x wrote
"checkpoint file at"), "Loaded model weights from the checkpoint at" for validate/test,
which is no resume).

SLURM auto-requeue (src/lightning/pytorch/trainer/connectors/signal_connector.py,
`_slurm_requeue` in 2.x, `_slurm_sigusr_handler_fn` in 1.x): the job saves an HPC checkpoint,
asks `scontrol requeue` and says "Requeued SLURM job {job_id}" (1.x: "Requeued SLURM job:
{job_id}"); the next job of the same log goes on from that checkpoint: a relaunch.
The fp16 precision plugin (src/lightning/pytorch/plugins/precision/amp.py `MixedPrecision`,
`optimizer_step`: `scaler.step` / `scaler.update`; 1.x `NativeMixedPrecisionPlugin`) steps
through torch's GradScaler and prints no overflow or skipped-step words.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

_PL = ("Lightning-AI/pytorch-lightning 1.x / 2.x src/lightning/pytorch/trainer/connectors/"
       "checkpoint_connector.py")

register(
    entry("lightning.restored", "Lightning", "resume", _PL + " (resume_end, fitting)",
          'rank_zero_info(f"Restored all states from the checkpoint at {self._ckpt_path}")',
          r"Restored all states from the checkpoint (?:file )?at (?P<path>\S+)",
          ("Restored all states from the checkpoint at /runs/ckpt/last.ckpt",
           "Restored all states from the checkpoint file at checkpoints/last.ckpt"),
          ("Restored all states",)),
    entry("lightning.restoring", "Lightning", "checkpoint", _PL + " (resume_start)",
          'rank_zero_info(f"Restoring states from the checkpoint path at {checkpoint_path}")',
          r"Restoring states from the checkpoint path at (?P<path>\S+)",
          ("Restoring states from the checkpoint path at /runs/ckpt/last.ckpt",),
          ("Restoring states from the checkpoint",)),
)

register(
    entry("lightning.requeued", "Lightning", "resume",
          "Lightning-AI/pytorch-lightning 1.x / 2.x src/lightning/pytorch/trainer/connectors/"
          "signal_connector.py (_slurm_requeue / _slurm_sigusr_handler_fn)",
          'log.info(f"Requeued SLURM job {job_id}")  (1.x: f"Requeued SLURM job: {job_id}")',
          r"Requeued SLURM job:? (?P<job>[0-9_]+)",
          ("Requeued SLURM job 4242817", "Requeued SLURM job: 4242817_3"),
          ("Requeued SLURM job",)),
)
