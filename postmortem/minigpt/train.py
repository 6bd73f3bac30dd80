"""Train the mini-GPT with the recorder on, a failure injected on request, checkpoints kept."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import torch

from postmortem import __version__
from postmortem.minigpt.config import TrainConfig
from postmortem.minigpt.data import Data
from postmortem.minigpt.model import GPT, MLP, GPTConfig, NaiveTokenLoss, TokenLoss
from postmortem.run.record import Recorder, batch_hash, this_machine

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def scheduled_lr(cfg: TrainConfig, step: int) -> float:
    """Linear warmup to lr_max, then cosine to min_lr — what the config asks for."""
    if step < cfg.warmup_steps:
        return cfg.lr_max * (step + 1) / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps))
    cos = 0.5 * (1 + math.cos(math.pi * progress))
    if cfg.schedule == "inverted-cosine":      # the sign bug: the "decay" climbs instead
        return cfg.min_lr + (cfg.lr_max * cfg.injection.factor - cfg.min_lr) * (1 - cos)
    return cfg.min_lr + (cfg.lr_max - cfg.min_lr) * cos


def applied_lr(cfg: TrainConfig, step: int) -> float:
    """The LR the run really used: the schedule, with the discontinuity bug when injected."""
    lr = scheduled_lr(cfg, step)
    inj = cfg.injection
    if inj.kind == "lr-discontinuity" and inj.step <= step < inj.step + inj.length:
        lr *= inj.factor
    return lr


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Trainer:
    """Model, optimizer, scheduler, scaler and data of one run, stepped one step at a time.

    The replay builds the same object, so a replayed step is this code, not a copy of it.
    """

    def __init__(self, cfg: TrainConfig, dev: torch.device | None = None, data: Data | None = None):
        self.cfg, self.dev = cfg, dev or device()
        torch.manual_seed(cfg.seed)
        self.data = data or Data(cfg)
        init_std = cfg.init_std * (cfg.injection.factor if cfg.injection.kind == "bad-init" else 1)
        self.model = GPT(GPTConfig(cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_head,
                                   cfg.n_embd, init_std)).to(self.dev)
        self.optimizer = self.new_optimizer()
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: applied_lr(cfg, s) / cfg.lr_max)
        self.scaler = torch.amp.GradScaler(self.dev.type, enabled=cfg.dtype == "fp16",
                                           growth_interval=cfg.scaler_growth_interval)
        self.loss_fn = TokenLoss()
        self.naive_loss_fn = NaiveTokenLoss()

    def new_optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.model.param_groups(self.cfg.weight_decay), lr=self.cfg.lr_max,
                                 betas=(0.9, 0.95), eps=1e-8, fused=False)

    def autocast(self):
        if self.cfg.dtype == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.dev.type, dtype=DTYPES[self.cfg.dtype])

    def loss_for(self, step: int):
        inj = self.cfg.injection
        return self.naive_loss_fn if inj.kind == "numerics" and step >= inj.step else self.loss_fn

    def forward(self, step: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-token losses (B, T) of the batch, with the step's injected bugs in place (the
        caller autocasts: the replay protocol does it the same way)."""
        inj = self.cfg.injection
        overflow = inj.kind == "fp16-overflow" and inj.step <= step < inj.step + inj.length
        for mlp in self.model.modules():
            if isinstance(mlp, MLP):
                mlp.gain = inj.factor if overflow else 1.0
        logits = self.model(x)
        if inj.kind == "numerics" and step >= inj.step:
            logits = logits * inj.factor      # the temperature bug that feeds log(0)
        return self.loss_for(step)(logits, y)

    def train_step(self, step: int, batch=None) -> dict:
        """Forward and backward of one step (the replay may hand it another batch)."""
        x, y = (t.to(self.dev) for t in (batch or self.data.batch_at(step)))
        lr = self.optimizer.param_groups[0]["lr"]
        with self.autocast():
            loss = self.forward(step, x, y).mean()
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
        scale = self.scaler.get_scale() if self.scaler.is_enabled() else None
        return {"loss": loss.item(), "grad_norm": grad_norm.item(), "lr": lr, "loss_scale": scale,
                "batch_index": self.data.batch_index(step), "batch_hash": batch_hash(x)}

    def finish_step(self, row: dict) -> None:
        """Optimizer, scaler and scheduler step; marks a step the scaler skipped."""
        before = self.scaler.get_scale() if self.scaler.is_enabled() else None
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if before is not None:
            row["skipped"] = int(self.scaler.get_scale() < before)
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    @torch.no_grad()
    def val_loss(self) -> float:
        self.model.eval()
        losses = [self.loss_fn(self.model(x.to(self.dev)), y.to(self.dev)).mean().item()
                  for x, y in self.data.val_batches()]
        self.model.train()
        return sum(losses) / len(losses)

    def state(self, step: int) -> dict:
        return {"step": step, "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict(), "rng": torch.get_rng_state()}

    def load(self, state: dict, optimizer: bool = True) -> None:
        self.model.load_state_dict(state["model"])
        if optimizer:
            self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["rng"])


def manifest_for(cfg: TrainConfig, dev: torch.device) -> dict:
    return {
        "run_id": cfg.run_id, "seed": cfg.seed, "dtype": cfg.dtype, "vocab_size": cfg.vocab_size,
        "versions": {"postmortem": __version__, **this_machine(dev), "device": dev.type},
        "config": {"lr_max": cfg.lr_max, "min_lr": cfg.min_lr, "warmup_steps": cfg.warmup_steps,
                   "schedule": "cosine", "total_steps": cfg.steps, "batch_size": cfg.batch_size,
                   "clip": cfg.clip, "weight_decay": cfg.weight_decay, "block_size": cfg.block_size,
                   "n_layer": cfg.n_layer, "n_embd": cfg.n_embd, "optimizer": "adamw"},
        "replay": {"entrypoint": "postmortem.minigpt.replay:make_replay",
                   "checkpoints": "checkpoints/", "config": "minigpt.json"},
    }


def train(cfg: TrainConfig, run_dir: str | Path, dev: torch.device | None = None,
          record_layers: bool = True) -> Path:
    """Train one run into `run_dir`: metrics.jsonl, manifest.json, minigpt.json, checkpoints/."""
    run_dir = Path(run_dir)
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    (run_dir / "minigpt.json").write_text(cfg.model_dump_json(indent=2) + "\n")
    trainer = Trainer(cfg, dev)
    inj = cfg.injection
    # The optimizer-reset run crashes at inj.step and resumes from inj.resume_from with a
    # fresh optimizer: the log goes back in steps, as a real resumed log does.
    crash = inj.step if inj.kind == "optimizer-reset" else None
    rec = Recorder(run_dir, manifest_for(cfg, trainer.dev),
                   layer_every=cfg.layer_every if record_layers else 0)
    with rec:
        step = 0
        while step < cfg.steps:
            if crash is not None and step == crash:
                state = torch.load(run_dir / "checkpoints" / f"step_{inj.resume_from:06d}.pt",
                                   weights_only=True)
                trainer.load(state, optimizer=False)      # the bug: m, v and step reset
                trainer.optimizer = trainer.new_optimizer()
                trainer.scheduler.optimizer = trainer.optimizer
                for g in trainer.optimizer.param_groups:
                    g["lr"] = applied_lr(cfg, inj.resume_from)
                    g["initial_lr"] = cfg.lr_max
                # checkpoint N holds the state after N steps: training goes on at step N
                step, crash = inj.resume_from, None
                continue
            row = trainer.train_step(step)
            if rec.wants_layers(step):
                rec.layers(step, trainer.model, trainer.optimizer)
            trainer.finish_step(row)
            if step % cfg.eval_every == 0 or step == cfg.steps - 1:
                row["val_loss"] = trainer.val_loss()
            rec.log(step, **row)
            if (step + 1) % cfg.checkpoint_every == 0:
                torch.save(trainer.state(step + 1), run_dir / "checkpoints" / f"step_{step + 1:06d}.pt")
            step += 1
    return run_dir
