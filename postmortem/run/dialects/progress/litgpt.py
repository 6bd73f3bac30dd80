"""litgpt's (and lit-gpt's) pretrain / finetune progress lines.

Lightning-AI/litgpt litgpt/finetune/lora.py and litgpt/pretrain.py (v0.4): `fabric.print(f"Epoch
{metrics['epoch']+1} | iter {metrics['iter']} step {metrics['step']} | loss train:
{metrics['loss']:.3f}, val: {val_loss} | iter time: {metrics['iter_time'] * 1000:.2f} ms{' (step)'
if not is_accumulating else ''}")`; lit-gpt (2023) `fabric.print(f"iter {iter_num} step {step_count}:
loss {loss.item():.4f}, iter time: {(t1 - iter_t0) * 1000:.2f}ms")`. `iter` counts micro-batches,
`step` optimizer steps: the step is `step`.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("litgpt.iter", "litgpt", "progress",
          "Lightning-AI/litgpt v0.4.0 litgpt/finetune/lora.py (fit); Lightning-AI/lit-gpt 2023 finetune/lora.py",
          "f\"Epoch {epoch+1} | iter {iter} step {step} | loss train: {loss:.3f}, val: {val_loss} | "
          "iter time: {iter_time * 1000:.2f} ms\"  |  f\"iter {iter_num} step {step_count}: loss {loss:.4f}, ...\"",
          r"\biter (?P<iter>\d+) step (?P<step>\d+)(?:: loss | \| loss train: )",
          ("Epoch {} | iter {} step {} | loss train: {:.3f}, val: {} | iter time: {:.2f} ms (step)".format(
              1, 64, 8, 1.234, "n/a", 312.5),
           f"iter {64} step {8}: loss {1.2345:.4f}, iter time: {312.5:.2f}ms (optimizer.step)"),
          ("iter ",)),
)
