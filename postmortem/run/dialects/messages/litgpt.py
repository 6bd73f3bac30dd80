"""litgpt's resume (and the lit-gpt / lit-llama scripts it grew from).

Read from Lightning-AI/litgpt litgpt/pretrain.py and litgpt/finetune/*.py (`fit` /
`main`: `fabric.print(f"Resuming training from {resume}")` before `fabric.load`).
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("litgpt.resume", "litgpt", "resume",
          "Lightning-AI/litgpt litgpt/pretrain.py, litgpt/finetune/lora.py (main)",
          'fabric.print(f"Resuming training from {resume}")',
          # not YOLOv5's (messages/ultralytics.py): its `weights/last.pt`, its `from epoch N to M total epochs`
          r"Resuming training from (?!\S*/last\.pt\s*$)(?P<path>\S+\.(?:pth|ckpt|pt))(?!\S* from epoch \d)",
          ("Resuming training from out/pretrain/step-00001000/lit_model.pth",
           "Resuming training from out/redpajama/iter-010000-ckpt.pth"),
          ("Resuming training from",)),
)
