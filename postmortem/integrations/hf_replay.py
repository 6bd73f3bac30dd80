"""The replay of a Hugging Face Trainer run: the user's factory builds the Trainer again, the
`checkpoint-N/` folders it saved are loaded (weights from safetensors; optimizer, scheduler,
scaler and RNG with weights_only=True), a step's batch comes from the Trainer's own seeded
dataloader, and a step is the Trainer's own `training_step` (its loss normalisation and
gradient accumulation), clip and optimizer step."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerState

from postmortem.errors import ReplayError
from postmortem.integrations.hf_inputs import step_inputs
from postmortem.integrations.hf_weights import load_weights
from postmortem.replay.checkpoints import load_state
from postmortem.replay.loading import call_user, import_user
from postmortem.replay.protocol import Replayable

_FREQ: dict[str, dict[int, int] | None] = {}     # token counts of a run's training set, once a process
_MAX_ROWS_COUNTED = 200_000


def make_replay(manifest, run_dir, device=None) -> "TrainerReplay":
    """Build the run's Trainer through its factory and wrap it for the engine."""
    spec = manifest.replay
    run_dir = Path(run_dir)
    name = getattr(spec, "factory", None)
    if not name:
        raise ReplayError(f"{run_dir}: manifest.json's replay names no \"factory\" "
                          "(PostmortemCallback(trainer_factory=\"train:build_trainer\") writes it)")
    why = _not_replayable(manifest.config)
    if why:
        raise ReplayError(f"{run_dir}: cannot replay this run: {why}")
    factory = _import_factory(name, run_dir, getattr(spec, "factory_dir", None))
    trainer = call_user(factory, name, run_dir, "trainer factory", str(run_dir),
                        **(getattr(spec, "factory_kwargs", None) or {}))
    if not isinstance(trainer, Trainer):
        raise ReplayError(f"{run_dir}: the trainer factory {name} returned {type(trainer).__name__}, "
                          "not a transformers.Trainer")
    why = _trainer_not_replayable(trainer)
    if why:
        raise ReplayError(f"{run_dir}: cannot replay this run: {why}")
    return TrainerReplay.of(trainer, str(run_dir))


def _import_factory(name: str, run_dir: Path, where: str | None):
    """The factory's module from the folder the run was trained from (then the run's)."""
    return import_user(name, run_dir, "trainer factory", folders=(where, run_dir))


def _not_replayable(config) -> str | None:
    world = getattr(config, "world_size", None) or 1
    if world > 1:
        return (f"it trained on {world} processes and this replay steps one (the batches and the gradient "
                "all-reduce of the other ranks are not here)")
    return None


def _trainer_not_replayable(t: Trainer) -> str | None:
    if t.is_deepspeed_enabled:
        return ("the Trainer uses DeepSpeed, whose engine owns the step and saves its own global_stepN/ "
                "checkpoints; replay a run trained without the DeepSpeed plugin")
    if t.is_fsdp_enabled or getattr(t, "is_fsdp_xla_enabled", False):
        return ("the Trainer uses FSDP, whose checkpoints are sharded (torch.distributed.checkpoint); "
                "the HF replay loads whole checkpoints on one process")
    if t.args.world_size > 1:
        return f"the factory's Trainer runs on {t.args.world_size} processes; the HF replay steps one"
    if t.train_dataset is None:
        return "the factory's Trainer has no train_dataset, so the batch of a step cannot be drawn"
    return None


@dataclass
class TrainerReplay(Replayable):
    """A Replayable over the Trainer: its steps are the Trainer's own code."""

    trainer: Any = None
    wrapped: Any = None                   # the model as the Trainer steps it (accelerate-prepared)
    loader: Any = None                    # the Trainer's train dataloader
    updates_per_epoch: int = 1
    micro_in_epoch: int = 1
    causal: bool = True
    _cursor: dict = field(default_factory=dict)
    _cache: dict = field(default_factory=dict)

    @classmethod
    def of(cls, t: Trainer, run_key: str) -> "TrainerReplay":
        """Set the Trainer up as `train()` does before its first step (the dataloader, the
        optimizer and scheduler, accelerate's wrapping), without training."""
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        args = t.args
        t.state = TrainerState()
        loader = t.get_train_dataloader()      # now: its sampler's seed is the one the run's had
        (_, per_epoch, _, _, _, micro, max_steps) = t.set_initial_training_values(args, loader)
        t.state.max_steps = max_steps
        wrapped, _ = t._prepare_for_training(max_steps, loader, None)
        acc = t.accelerator
        scaler = acc.scaler if acc.scaler is not None and acc.scaler.is_enabled() else None
        dtype = ("fp16" if scaler is not None else "bf16" if acc.native_amp and args.bf16 else "fp32")
        model, optimizer = t.model, t.optimizer
        if model is None or optimizer is None or micro is None:    # prepared above; a sized loader
            raise ReplayError("the Trainer has no model or optimizer once prepared for training, or a "
                              "train dataloader of no length: the replay counts the batches of an epoch")
        if run_key not in _FREQ:
            _FREQ[run_key] = _token_counts(t.train_dataset)
        r = cls(model=model, optimizer=optimizer, scheduler=t.lr_scheduler, scaler=scaler, dtype=dtype,
                clip=args.max_grad_norm or None, accumulate=args.gradient_accumulation_steps,
                batch_at=lambda step: r.batch_of(step), loss=lambda step, batch: r.token_losses(step, batch),
                token_frequency=_FREQ[run_key], scheduled_lr=_schedule(args, max_steps),
                trainer=t, wrapped=wrapped, loader=loader, updates_per_epoch=per_epoch, micro_in_epoch=micro,
                causal=type(model).__name__ in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
        r.targets = lambda batch: batch["labels"][:, 1:] if r.causal else batch["labels"]
        r.inputs = _step_inputs
        return r

    # -- a step, as the Trainer takes it --------------------------------------------------------

    def forward_backward(self, step: int, batch=None) -> dict:
        """The micro-batches through `training_step` (the Trainer's loss normalisation and
        num_items_in_batch), then its clip: the row the callback logged."""
        t = self.trainer
        batch = self.batch_at(step) if batch is None else batch
        micro = [self.on_device(m) for m in (list(batch) if self.accumulate > 1 else [batch])]
        t.state.global_step = step             # what a step's code may read (the run's did)
        t.current_gradient_accumulation_steps = len(micro)
        items = t._get_num_items_in_batch(micro, t.args.device)
        lr = self.optimizer.param_groups[0]["lr"]
        total = torch.tensor(0.0, device=t.args.device)    # summed as the Trainer's _tr_loss is
        for i, inputs in enumerate(micro):
            t.accelerator.gradient_state._set_sync_gradients(i == len(micro) - 1)
            total += t.training_step(self.wrapped, inputs, items)
        norm = t._clip_grad_norm(self.wrapped) if t.args.max_grad_norm > 0 else None
        norm = t._get_grad_norm(self.wrapped, grad_norm=norm)
        scale = float(self.scaler.get_scale()) if self.scaler is not None else None
        return {"loss": total.item(), "grad_norm": float(norm), "lr": lr, "loss_scale": scale}

    def optimizer_step(self, row: dict) -> None:
        """The optimizer (through accelerate's scaler), the scheduler unless the step was
        skipped, zero_grad: the Trainer's order."""
        t = self.trainer
        t.optimizer.step()
        skipped = t.accelerator.optimizer_step_was_skipped
        if self.scaler is not None:
            row["skipped"] = int(skipped)
        if not skipped and not isinstance(t.lr_scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            t.lr_scheduler.step()
        self.wrapped.zero_grad()
        t.state.global_step += 1

    def set_dtype(self, dtype: str) -> None:
        """The fp32 arm: accelerate's autocast taken off the model's forward, no loss scaler."""
        if dtype != "fp32":
            raise ReplayError(f"the HF replay switches to fp32 only, not to {dtype}")
        if "_original_forward" in vars(self.model):
            self.model.forward = vars(self.model)["_original_forward"]
        acc = self.trainer.accelerator
        acc.native_amp, acc.scaler = False, None
        if hasattr(self.optimizer, "scaler"):
            self.optimizer.scaler = None
        self.scaler, self.dtype = None, "fp32"

    def autocast(self):
        return contextlib.nullcontext()      # accelerate's autocast is inside the model's forward

    # -- the checkpoint ------------------------------------------------------------------------

    def load(self, path: Path, optimizer: bool = True) -> None:
        """checkpoint-N/: the weights, then what the Trainer saved beside them."""
        path = Path(path)
        if not path.is_dir():
            raise ReplayError(f"{path}: not a Trainer checkpoint folder (checkpoint-N/)")
        load_weights(self.model, path)
        if optimizer:
            if not (path / "optimizer.pt").exists():
                raise ReplayError(f"{path}: no optimizer.pt (saved with save_only_model?): the replay needs "
                                  "the optimizer state the run had")
            self.optimizer.load_state_dict(load_state(path / "optimizer.pt"))
        if (path / "scheduler.pt").exists():
            self.scheduler.load_state_dict(load_state(path / "scheduler.pt"))
            if not optimizer:        # a fresh optimizer starts at the LR the schedule had reached
                for group, lr in zip(self.optimizer.param_groups, self.scheduler.get_last_lr()):
                    group["lr"] = lr
        if self.scaler is not None and (path / "scaler.pt").exists():
            self.scaler.load_state_dict(load_state(path / "scaler.pt"))
        self._load_rng(path / "rng_state.pth")
        self.trainer.state.global_step = _global_step(path)

    def _load_rng(self, file: Path) -> None:
        if not file.exists():
            return
        from transformers.trainer_pt_utils import safe_globals
        with safe_globals():         # numpy's RNG state is allowed, nothing else unpickled
            state = load_state(file)
        import random

        import numpy as np
        random.setstate(state["python"])
        np.random.set_state(state["numpy"])
        torch.random.set_rng_state(state["cpu"])
        if torch.cuda.is_available() and "cuda" in state:      # all devices' states, or this one's
            if isinstance(state["cuda"], (list, tuple)):
                torch.cuda.random.set_rng_state_all(state["cuda"])
            else:
                torch.cuda.random.set_rng_state(state["cuda"])

    # -- batches -------------------------------------------------------------------------------

    def batch_of(self, step: int):
        """The batch the Trainer trained on at `step` (0-based): its micro-batches, drawn
        from its own seeded dataloader; a step far from the last one skips batches at the
        sampler (accelerate's skip_first_batches, as a resume does) instead of collating."""
        if step in self._cache:
            return self._cache[step]
        epoch, update = divmod(step, self.updates_per_epoch)
        ga = self.accumulate
        c = self._cursor
        if c.get("epoch") != epoch or c.get("update", 0) > update:
            from accelerate import skip_first_batches
            loader = skip_first_batches(self.loader, update * ga) if update else self.loader
            loader.set_epoch(epoch)
            c.update(epoch=epoch, update=update, it=iter(loader))
        while c["update"] <= update:
            last = c["update"] == self.updates_per_epoch - 1
            n = (self.micro_in_epoch % ga or ga) if last else ga
            micro = []
            for _ in range(n):
                try:
                    micro.append(next(c["it"]))
                except StopIteration:
                    break
            if not micro:
                raise ReplayError(f"step {step}: the Trainer's dataloader ran out of batches in epoch {epoch}")
            self._cache[c["update"] + epoch * self.updates_per_epoch] = micro if ga > 1 else micro[0]
            c["update"] += 1
            if len(self._cache) > 256:       # the replay window, not the run
                self._cache.pop(next(iter(self._cache)))
        return self._cache[step]

    def token_losses(self, step: int, batch) -> torch.Tensor:
        """Per-token losses (B, T-1 for a causal LM) of the batch under the run's forward."""
        self.trainer.state.global_step = step
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        out = self.wrapped(**inputs)
        logits = out["logits"] if isinstance(out, dict) else out[0]
        labels = batch["labels"]
        if self.causal:
            logits, labels = logits[:, :-1], labels[:, 1:]
        return torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), labels,
                                                 reduction="none", ignore_index=-100)


def _step_inputs(batch) -> torch.Tensor:
    """The input_ids of a step's micro-batches end to end, as the callback hashed them."""
    micro = batch if isinstance(batch, (list, tuple)) else [batch]
    return step_inputs([m["input_ids"].detach().reshape(-1).cpu() for m in micro])


def _global_step(path: Path) -> int:
    state = path / "trainer_state.json"
    if state.exists():
        try:
            return int(json.loads(state.read_text())["global_step"])
        except (ValueError, KeyError, TypeError):
            pass
    digits = "".join(ch for ch in path.name if ch.isdigit())
    return int(digits) if digits else 0


def _schedule(args, max_steps: int):
    """The LR the TrainingArguments ask for at a step: `get_scheduler` of the arguments
    alone, without whatever the run's own create_scheduler changed."""
    from transformers import get_scheduler
    dummy = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=args.learning_rate)
    try:
        sched = get_scheduler(args.lr_scheduler_type, optimizer=dummy,
                              num_warmup_steps=args.get_warmup_steps(max_steps), num_training_steps=max_steps,
                              scheduler_specific_kwargs=args.lr_scheduler_kwargs)
    except (ValueError, TypeError):
        return None
    if not isinstance(sched, torch.optim.lr_scheduler.LambdaLR):
        return None
    f, base = sched.lr_lambdas[0], args.learning_rate
    return lambda step: base * f(step)


def _token_counts(dataset) -> dict[int, int] | None:
    """How often each token id occurs in the training set (the per-token probe's rarity),
    for a map-style dataset of up to 200k rows; None otherwise."""
    try:
        n = len(dataset)
    except TypeError:
        return None
    if n > _MAX_ROWS_COUNTED:
        return None
    counts = torch.zeros(0, dtype=torch.long)
    for i in range(n):
        row = dataset[i]
        ids = row.get("input_ids") if isinstance(row, dict) else None
        if ids is None:
            return None
        ids = torch.as_tensor(ids).reshape(-1)
        ids = ids[ids >= 0]
        if len(ids):
            c = torch.bincount(ids)
            if len(c) > len(counts):
                counts = torch.cat([counts, counts.new_zeros(len(c) - len(counts))])
            counts[:len(c)] += c
    return {i: int(v) for i, v in enumerate(counts.tolist()) if v}


__all__ = ["make_replay", "TrainerReplay"]
