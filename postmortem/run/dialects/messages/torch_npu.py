"""Ascend's torch_npu GradScaler messages (PyTorch on Huawei NPUs, `torch_npu.npu.amp.GradScaler`).

Read from Ascend/pytorch at 4ee8ead torch_npu/npu/amp/grad_scaler.py: unlike torch's own
GradScaler, which prints nothing, the NPU one `print`s each skipped step (`_maybe_opt_step`)
and each change of the scale (`_npu_update_scale`, backoff 0.5 and growth 2 by default), on
every rank. Every fp16 run on an NPU through it says so: HF Trainer and LLaMA-Factory
(`--fp16` on Ascend), the Ascend ModelZoo-PyTorch scripts.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry, scale

_SCALER = "Ascend/pytorch 4ee8ead torch_npu/npu/amp/grad_scaler.py"

register(
    entry("torch_npu.overflow", "torch_npu", "overflow",
          f"{_SCALER} (GradScaler._maybe_opt_step)",
          'print("Gradient overflow. Skipping step")',
          # one space, and nothing after it: apex's `Gradient overflow.  Skipping step, ...` is another
          r"Gradient overflow\. Skipping step\s*$",
          ("Gradient overflow. Skipping step",),
          ("Gradient overflow. Skipping step",)),
    # the scale after the skip above (the skip is that message's; this one only moves the scale)
    entry("torch_npu.scale.backoff", "torch_npu", "scale",
          f"{_SCALER} (GradScaler._npu_update_scale)",
          'print(("Loss scaler reducing loss scale " "to {}").format(self._scale.item()))',
          r"Loss scaler reducing loss scale to " + scale("scale"),
          ("Loss scaler reducing loss scale to 32768.0",),
          ("Loss scaler reducing loss scale",),
          prev_factor=2.0),               # backoff_factor 0.5 by default
    entry("torch_npu.scale.growth", "torch_npu", "scale",
          f"{_SCALER} (GradScaler._npu_update_scale)",
          'print(("Loss scaler increasing loss scale " "to {}").format(self._scale.item()))',
          r"Loss scaler increasing loss scale to " + scale("scale"),
          ("Loss scaler increasing loss scale to 131072.0",),
          ("Loss scaler increasing loss scale",),
          prev_factor=0.5),               # growth_factor 2 by default
)
