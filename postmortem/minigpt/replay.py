"""The replay factory of the sample runs: the mini-GPT's own Trainer, on the replay protocol."""

from __future__ import annotations

from pathlib import Path

import torch

from postmortem.minigpt.config import TrainConfig
from postmortem.minigpt.train import Trainer
from postmortem.replay import Replayable
from postmortem.run.model import RunManifest


def make_replay(manifest: RunManifest, run_dir: str | Path, device: torch.device | None = None) -> Replayable:
    """The run's Trainer rebuilt from the config saved beside it; its step is the protocol's
    default step, so a replayed step does the same sums as the run did."""
    cfg_file = Path(run_dir) / (getattr(manifest.replay, "config", None) or "minigpt.json")
    cfg = TrainConfig.model_validate_json(cfg_file.read_text())
    trainer = Trainer(cfg, device or torch.device("cpu"))
    tokenizer = trainer.data.tokenizer
    return Replayable(
        model=trainer.model, optimizer=trainer.optimizer, scheduler=trainer.scheduler,
        scaler=trainer.scaler if trainer.scaler.is_enabled() else None, dtype=cfg.dtype, clip=cfg.clip,
        batch_at=lambda step: trainer.data.batch_at(step),         # late-bound: a test may swap batches
        loss=lambda step, batch: trainer.forward(step, *batch),     # the step's injected bugs included
        token_frequency=trainer.data.freq,
        decode=lambda token: _decoded(tokenizer, int(token)),
        extra_modules=[("loss", trainer.loss_fn), ("loss (hand-written log-softmax)", trainer.naive_loss_fn)])


def _decoded(tokenizer, token: int) -> str:
    """A token as the text it stands for (`Ġr` is " r"); its byte-level piece where it is only
    part of a character."""
    text = tokenizer.decode([token])
    return text if text and "\ufffd" not in text else tokenizer.id_to_token(token) or str(token)
