"""NeMo's own resume words (its Megatron path prints Megatron's and Lightning's too).

Read from NVIDIA/NeMo 0078023 nemo/utils/exp_manager.py (`check_resume`: with
`resume_if_exists` or `resume_from_checkpoint`, "Resuming training from checkpoint:
{trainer.ckpt_path}"). NeMo's loss scaler prints nothing: its GradScaler
(nemo/collections/nlp/parts/nlp_overrides.py, a torch GradScaler with hysteresis) and
MegatronHalfPrecisionPlugin skip a step silently; the scale reaches the log only as the
`loss_scale` logged by the model, a progress column. Many hand-written trainers print the
same words before `trainer.train(resume_from_checkpoint=...)`: a resume in each.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("nemo.resume", "NeMo", "resume",
          "NVIDIA/NeMo 0078023 nemo/utils/exp_manager.py (check_resume)",
          "logging.info(f'Resuming training from checkpoint: {trainer.ckpt_path}')",
          r"Resuming training from checkpoint: (?P<path>\S+)",
          ("Resuming training from checkpoint: /results/checkpoints/megatron_gpt--val_loss=2.31-step=4000-"
           "consumed_samples=512000.0-last.ckpt",),
          ("Resuming training from checkpoint:",)),
)
