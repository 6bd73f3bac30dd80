"""What a mini-GPT run is: its training configuration and the one failure injected."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Kind = Literal["healthy", "long-tail-token", "fp16-overflow", "lr-discontinuity", "optimizer-reset",
               "numerics", "bad-init", "schedule-misconfigured", "bad-data"]


class Injection(BaseModel):
    """One switch: the failure, where it starts, how long it lasts, how strong it is."""

    kind: Kind = "healthy"
    step: int = 0
    length: int = 1
    factor: float = 1.0
    fraction: float = 1.0          # long-tail-token: share of the batch that is junk
    resume_from: int = 0           # optimizer-reset: the checkpoint the crashed run resumes from


class TrainConfig(BaseModel):
    run_id: str = "healthy"
    seed: int = 1234
    corpus_seed: int = 0
    n_sentences: int = 800
    vocab_size: int = 512
    steps: int = 400
    batch_size: int = 16
    block_size: int = 32
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 48
    init_std: float = 0.02
    lr_max: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 40
    schedule: Literal["cosine", "inverted-cosine"] = "cosine"
    weight_decay: float = 0.1
    clip: float = 1.0
    dtype: Literal["fp32", "bf16", "fp16"] = "fp32"
    eval_every: int = 25
    layer_every: int = 50
    checkpoint_every: int = 50
    scaler_growth_interval: int = 100
    injection: Injection = Injection()
