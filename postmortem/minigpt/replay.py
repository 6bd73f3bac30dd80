"""The replay entry point of the sample runs (DESIGN.md's contract), over the same Trainer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from postmortem.minigpt.config import TrainConfig
from postmortem.minigpt.train import Trainer, scheduled_lr
from postmortem.run.model import RunManifest


@dataclass
class Replay:
    """What the replay engine needs: the run's objects, its exact batches and its loss."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler | None
    batch_at: Callable[[int], tuple[torch.Tensor, torch.Tensor]]
    loss_fn: Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]   # per-token losses (B, T)
    trainer: Trainer
    scheduled_lr: Callable[[int], float]

    def load(self, state: dict, optimizer: bool = True) -> None:
        self.trainer.load(state, optimizer=optimizer)
        if not optimizer:                       # a fresh optimizer, as a bad resume makes one
            self.trainer.optimizer = self.optimizer = self.trainer.new_optimizer()
            self.trainer.scheduler.optimizer = self.optimizer
            for g in self.optimizer.param_groups:
                g["lr"] = self.trainer.scheduler.get_last_lr()[0]
                g["initial_lr"] = self.trainer.cfg.lr_max

    def set_dtype(self, dtype: str) -> None:
        """The fp32 arm: the same step without autocast and without the loss scaler."""
        self.trainer.cfg.dtype = dtype
        if dtype == "fp32":
            self.trainer.scaler = self.scaler = torch.amp.GradScaler(self.trainer.dev.type, enabled=False)

    @property
    def token_frequency(self):
        return self.trainer.data.freq

    def decode(self, token: int) -> str:
        return self.trainer.data.tokenizer.id_to_token(int(token)) or str(token)

    def train_step(self, step: int) -> dict:
        """One step exactly as the run did it; returns the logged row."""
        row = self.trainer.train_step(step)
        self.trainer.finish_step(row)
        return row

    # The engine's finer hooks: forward+backward, then the optimizer step.
    def forward_backward(self, step: int, batch=None) -> dict:
        return self.trainer.train_step(step, batch)

    def optimizer_step(self, row: dict) -> None:
        self.trainer.finish_step(row)

    def modules(self):
        """Every module a probe may hook, the loss functions included."""
        yield from self.model.named_modules(prefix="model")
        yield "loss", self.trainer.loss_fn
        yield "loss (hand-written log-softmax)", self.trainer.naive_loss_fn


def make_replay(manifest: RunManifest, run_dir: str | Path,
                device: torch.device | None = None) -> Replay:
    spec = manifest.replay
    cfg_file = Path(run_dir) / (getattr(spec, "config", None) or "minigpt.json")
    cfg = TrainConfig.model_validate_json(cfg_file.read_text())
    trainer = Trainer(cfg, device or torch.device("cpu"))
    return Replay(model=trainer.model, optimizer=trainer.optimizer, scheduler=trainer.scheduler,
                  scaler=trainer.scaler if trainer.scaler.is_enabled() else None,
                  batch_at=trainer.data.batch_at, loss_fn=trainer.forward, trainer=trainer,
                  scheduled_lr=lambda s: scheduled_lr(cfg, s))
