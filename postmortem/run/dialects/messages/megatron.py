"""Megatron-LM's checkpoint load (Megatron-DeepSpeed, GPT-NeoX and NeMo's Megatron path print
the same words): `at iteration N` is the step the run goes on from.

Read from NVIDIA/Megatron-LM at v2.5 and v2.6 (megatron/checkpointing.py, `load_checkpoint`)
and d98e8a6 (2026-08, megatron/training/checkpointing.py, with the parallel ranks inserted
before `at iteration`). Megatron's skipped / NaN iterations are counters of its progress
line (`number of skipped iterations: N |`), read with the line.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("megatron.loaded", "Megatron-LM", "resume",
          "NVIDIA/Megatron-LM v2.5, v2.6 megatron/checkpointing.py; d98e8a6 "
          "megatron/training/checkpointing.py (load_checkpoint)",
          "f'  successfully loaded checkpoint from {args.load} at iteration {iteration}'  |  "
          "f'  successfully loaded checkpoint from {load_dir} [ t {tp}/{tp_w}, p {pp}/{pp_w} ] at "
          "iteration {iteration}'",
          r"successfully loaded checkpoint from \S+(?: \[[^\]]*\])? at iteration (?P<step>\d+)",
          ("  successfully loaded checkpoint from /ckpt/gpt at iteration 5000",
           "  successfully loaded checkpoint from /ckpt/gpt [ t 1/2, gtp_remat 1/1, p 1/4 ] at iteration 5000"),
          ("successfully loaded checkpoint",)),
)
