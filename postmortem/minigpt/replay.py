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

    def train_step(self, step: int) -> dict:
        """One step exactly as the run did it; returns the logged row."""
        row = self.trainer.train_step(step)
        self.trainer.finish_step(row)
        return row


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
