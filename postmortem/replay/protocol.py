"""The replay protocol: what a run gives the replay engine, and the steps the engine takes with it.

A run names a factory in its manifest (`"replay": {"entrypoint": "pkg.module:make_replay"}`);
the factory builds the run's objects and returns a `Replayable`:

    def make_replay(manifest, run_dir, device):
        model = build_model(manifest.config).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        return Replayable(model=model, optimizer=optimizer,
                          batch_at=lambda step: loader_batch(step),          # the exact batch of a step
                          loss=lambda step, batch: per_token_loss(model, batch))  # unreduced

Everything else has a default: the engine loads a checkpoint (`{"model", "optimizer",
"scheduler", "scaler", "rng"}` state dicts, `weights_only=True`), steps (autocast to `dtype`,
the mean loss, backward through the scaler, unscale, clip, optimizer, scaler and scheduler),
swaps a batch, runs in fp32, drops the optimizer state, and hooks modules for the probes.
An integration whose framework steps differently (the Hugging Face Trainer, Lightning)
subclasses `Replayable` and overrides `forward_backward`, `optimizer_step` or `load`.

No torch at import: the TUI lists arms without it; torch comes with the first replay.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from postmortem.errors import ReplayError
from postmortem.replay.checkpoints import load_state

if TYPE_CHECKING:
    import torch

Batch = Any          # whatever the run's loss takes: a tensor, a tuple of tensors, a dict of them
DTYPES = ("fp32", "fp16", "bf16")


@dataclass
class Replayable:
    """One run's objects, rebuilt by the run's own code, ready to be stepped by the engine.

    Required: `model`, `optimizer`, `batch_at(step)` (the exact batch the run trained on at
    `step`; a list of micro-batches when `accumulate` > 1) and `loss(step, batch)` (the
    per-token, or per-example, losses of a batch, unreduced: the per-token probe reads them).
    """

    model: "torch.nn.Module"
    optimizer: "torch.optim.Optimizer"
    batch_at: Callable[[int], Batch]
    loss: Callable[[int, Batch], "torch.Tensor"]
    scheduler: Any = None                 # stepped once a step, after the optimizer
    scaler: Any = None                    # the fp16 run's torch.amp.GradScaler
    dtype: str = "fp32"                   # the autocast dtype of the run's forward
    clip: float | None = None             # max grad norm; the pre-clip norm is logged either way
    accumulate: int = 1                   # micro-batches a step
    token_frequency: Mapping[int, int] | None = None     # training-set count of each token id
    decode: Callable[[int], str] | None = None           # token id -> text, for the per-token probe
    targets: Callable[[Batch], "torch.Tensor"] | None = None   # the ids `loss` scores (default: batch[1] / ["labels"])
    inputs: Callable[[Batch], "torch.Tensor"] | None = None    # what the batch hash is of (default: batch[0] / ["input_ids"])
    extra_modules: Iterable[tuple[str, Any]] = ()        # more modules for the first-non-finite probe
    scheduled_lr: Callable[[int], float] | None = None   # the LR the schedule meant at a step (default: the manifest's config)
    device: Any = None                    # default: where the model's parameters are

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ReplayError(f"Replayable.dtype {self.dtype!r}: expected one of {', '.join(DTYPES)}")
        if self.accumulate < 1:
            raise ReplayError(f"Replayable.accumulate {self.accumulate}: expected 1 or more micro-batches")

    # -- what the engine calls --------------------------------------------------------------

    def load(self, path: Path, optimizer: bool = True) -> None:
        """Load the checkpoint at `path`; `optimizer=False` keeps the fresh optimizer the
        factory built, as a resume that drops the optimizer state does."""
        state = load_state(path)
        if not isinstance(state, Mapping) or "model" not in state:
            raise ReplayError(f"{path}: expected a dict with a 'model' state dict (and optimizer, scheduler, "
                              "scaler, rng); override Replayable.load for another layout")
        load_model(self.model, state["model"], path)
        if optimizer and state.get("optimizer"):
            self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler"):
            self.scheduler.load_state_dict(state["scheduler"])
            if not optimizer:         # a fresh optimizer starts at the LR the schedule had reached
                for group, lr in zip(self.optimizer.param_groups, self.scheduler.get_last_lr()):
                    group["lr"] = lr
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if state.get("rng") is not None:
            import torch
            torch.set_rng_state(state["rng"])

    def forward_backward(self, step: int, batch: Batch | None = None) -> dict:
        """Forward and backward of one step, gradients unscaled and clipped: the logged row
        (loss, pre-clip grad norm, lr, loss scale). `batch` replaces the step's own."""
        import torch
        batch = self.batch_at(step) if batch is None else batch
        micro = list(batch) if self.accumulate > 1 else [batch]
        lr = self.optimizer.param_groups[0]["lr"]
        total = 0.0
        for part in micro:
            loss = self.per_token_loss(step, self.on_device(part)).mean()
            if len(micro) > 1:
                loss = loss / len(micro)
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            total += loss.item()
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                   self.clip if self.clip else float("inf"))
        scale = self.scaler.get_scale() if self.scaler is not None and self.scaler.is_enabled() else None
        return {"loss": total, "grad_norm": grad_norm.item(), "lr": lr, "loss_scale": scale}

    def optimizer_step(self, row: dict) -> None:
        """The optimizer, scaler and scheduler step after `forward_backward`; marks a step
        the scaler skipped in `row`."""
        if self.scaler is not None and self.scaler.is_enabled():
            before = self.scaler.get_scale()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            row["skipped"] = int(self.scaler.get_scale() < before)
        else:
            self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def train_step(self, step: int, batch: Batch | None = None) -> dict:
        """One whole step, as the run took it: the logged row."""
        row = self.forward_backward(step, batch)
        self.optimizer_step(row)
        return row

    def set_dtype(self, dtype: str) -> None:
        """The fp32 arm: the same steps without autocast and without the loss scaler."""
        self.dtype = dtype
        if dtype == "fp32":
            self.scaler = None

    def per_token_loss(self, step: int, batch: Batch) -> "torch.Tensor":
        """`loss` under the run's autocast."""
        with self.autocast():
            return self.loss(step, batch)

    def autocast(self):
        if self.dtype == "fp32":
            return contextlib.nullcontext()
        import torch
        return torch.autocast(self.where().type, dtype={"fp16": torch.float16, "bf16": torch.bfloat16}[self.dtype])

    def modules(self) -> Iterator[tuple[str, Any]]:
        """Every module a probe may hook: the model's, the loss when it is a module, and any
        the run adds."""
        import torch
        yield from self.model.named_modules(prefix="model")
        if isinstance(self.loss, torch.nn.Module):
            yield "loss", self.loss
        yield from self.extra_modules

    # -- batches ------------------------------------------------------------------------------

    def where(self) -> "torch.device":
        return self.device if self.device is not None else next(self.model.parameters()).device

    def on_device(self, batch: Batch) -> Batch:
        """The batch's tensors where the model is (a loader may hand out CPU tensors)."""
        return _to(batch, self.where())

    def batch_on_device(self, step: int) -> Batch:
        batch = self.batch_at(step)
        return self.on_device(list(batch)[0] if self.accumulate > 1 else batch)

    def targets_of(self, batch: Batch) -> "torch.Tensor":
        if self.targets is not None:
            return self.targets(batch)
        return batch_field(batch, 1, "labels")

    def inputs_of(self, batch: Batch) -> "torch.Tensor":
        if self.inputs is not None:
            return self.inputs(batch)
        if self.accumulate > 1:
            batch = list(batch)[0]
        return batch_field(batch, 0, "input_ids")


def load_model(model, state: Mapping, path) -> None:
    """`model.load_state_dict(state)`, refused in one line naming the first tensor that does
    not fit (another model's checkpoint) instead of torch's page of mismatches."""
    own = model.state_dict()
    for name, tensor in state.items():
        if name in own and tuple(own[name].shape) != tuple(tensor.shape):
            raise ReplayError(f"{path}: the checkpoint is of another model: {name} is "
                              f"{tuple(tensor.shape)} there, {tuple(own[name].shape)} in the model the factory built")
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    if missing or unexpected:
        what = (f"{missing[0]} is missing from it" if missing else f"it has {unexpected[0]}, which the model lacks")
        raise ReplayError(f"{path}: the checkpoint is of another model: {what} "
                          f"({len(missing)} missing, {len(unexpected)} unexpected tensors)")
    model.load_state_dict(state)


def _to(batch: Batch, device) -> Batch:
    if hasattr(batch, "to") and hasattr(batch, "device"):
        return batch.to(device)
    if isinstance(batch, Mapping):
        return {k: _to(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to(v, device) for v in batch)
    return batch


def batch_field(batch: Batch, index: int, key: str):
    """The inputs (index 0, key "input_ids") or the targets (1, "labels") of a batch: a
    mapping by key, a tuple or list by position, a lone tensor as the inputs."""
    if isinstance(batch, Mapping):
        if key not in batch:
            raise ReplayError(f"the batch has no {key!r} (keys: {', '.join(map(str, batch))}); "
                              f"give Replayable.{'targets' if index else 'inputs'}")
        return batch[key]
    if isinstance(batch, (list, tuple)):
        return batch[index]
    if index == 0:
        return batch
    raise ReplayError("the batch is one tensor, so the targets cannot be told: give Replayable.targets")


__all__ = ["Replayable", "Batch", "load_model"]
