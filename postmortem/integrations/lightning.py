"""Lightning: a callback that records a run for postmortem, and the replay that steps it again.

    trainer = pl.Trainer(max_steps=..., callbacks=[
        PostmortemCallback(factory="train:build"),                    # records into default_root_dir
        ModelCheckpoint(every_n_train_steps=50, save_top_k=-1)])      # the replay starts from these

`build(**hparams)` (in train.py beside the script) returns the LightningModule and its
LightningDataModule or DataLoader, as the run built them: `postmortem replay RUN` calls it with
the module's saved hyper-parameters, loads a `.ckpt` (weights_only=True), rebuilds the optimizer
and scheduler with `configure_optimizers()`, draws the batch of any step from the seeded train
dataloader and steps it as Lightning does (autocast, loss scaler, accumulation, clipping).
The module gives the loss per token: `per_token_loss(batch)` or `per_token_loss(batch, step)`,
the unreduced loss whose mean `training_step` returns. What this cannot replay is said in one
line: manual optimization, several optimizers, a scheduler on a monitored metric, 16-true.

Lightning's own CSVLogger writes lightning_logs/ into the same folder: `postmortem analyze RUN
--format jsonl` reads the callback's log (or give the Trainer logger=False, as the example does).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import Any

import lightning
import lightning.pytorch as pl
import torch

from postmortem.errors import ReplayError
from postmortem.replay.checkpoints import load_state
from postmortem.replay.loading import call_user, import_user
from postmortem.replay.protocol import Replayable, batch_field, load_model
from postmortem.run.record import Recorder, batch_hash, this_machine

DTYPE = {"16-mixed": "fp16", "bf16-mixed": "bf16", "32-true": "fp32", "32": "fp32",
         "16-true": "fp16", "bf16-true": "bf16"}
REPLAYED = ("32-true", "32", "16-mixed", "bf16-mixed")


# -- recording ----------------------------------------------------------------------------


class PostmortemCallback(pl.Callback):
    """Records per step the loss, pre-clip grad norm, LR, loss scale and skipped steps (16-mixed)
    and batch hash into `run_dir` (default: the Trainer's default_root_dir), per-layer norms every
    `layer_every` steps, and manifest.json with the config and the replay's `factory`."""

    def __init__(self, factory: str, run_dir: str | Path | None = None, layer_every: int = 50,
                 manifest: dict | None = None):
        if ":" not in factory:
            raise ValueError(f"factory {factory!r}: expected 'module:function', e.g. 'train:build'")
        self.factory, self.run_dir, self.layer_every = factory, run_dir, layer_every
        self.extra = manifest or {}
        self.rec: Recorder | None = None
        self.row: dict = {}

    def on_train_start(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero:
            return
        run_dir = Path(self.run_dir or trainer.default_root_dir)
        self.rec = Recorder(run_dir, _manifest(self, trainer, pl_module, run_dir), layer_every=self.layer_every,
                            append=trainer.ckpt_path is not None)      # a resume goes on with the same log
        self.row = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.rec is None:
            return
        if self.row.get("step") != trainer.global_step:       # the first micro-batch of a step
            self.row = {"step": trainer.global_step, "loss": 0.0, "batch_hash": _hash(batch)}

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        # Lightning calls this after unscaling and before clipping: the norm is the pre-clip one.
        if self.rec is None:
            return
        optimizer = getattr(optimizer, "optimizer", optimizer)
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        self.row["grad_norm"] = torch.nn.utils.get_total_norm(grads).item() if grads else None
        self.row["lr"] = optimizer.param_groups[0]["lr"]
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        if scaler is not None and scaler.is_enabled():
            self.row["loss_scale"] = scaler.get_scale()
        if self.rec.wants_layers(trainer.global_step):
            self.rec.layers(trainer.global_step, pl_module, optimizer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.rec is None or self.row.get("step") is None:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is not None:       # Lightning's loss is divided by accumulate_grad_batches: the sum is the step's
            self.row["loss"] += float(loss)
        if trainer.global_step == self.row["step"]:           # still accumulating
            return
        row = self.row
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        if "loss_scale" in row and scaler is not None:
            row["skipped"] = int(scaler.get_scale() < row["loss_scale"])
        self.rec.log(row.pop("step"), **row)
        self.row = {}

    def on_train_end(self, trainer, pl_module) -> None:
        if self.rec is not None:
            self.rec.close()
            self.rec = None

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.on_train_end(trainer, pl_module)        # a crash keeps every line logged so far


def _hash(batch) -> str | None:
    """The hash of the batch's inputs (batch[0] or batch["input_ids"], as the replay reads
    them); None for a batch of another shape: recording never stops the training."""
    try:
        return batch_hash(batch_field(batch, 0, "input_ids"))
    except (ReplayError, TypeError, ValueError, AttributeError):
        return None


def _manifest(cb: PostmortemCallback, trainer, module, run_dir: Path) -> dict:
    hparams = _plain(dict(module.hparams))
    precision = str(trainer.precision)
    config = {**hparams, "total_steps": trainer.max_steps if trainer.max_steps > 0 else None,
              "clip": trainer.gradient_clip_val, "gradient_clip_algorithm": trainer.gradient_clip_algorithm,
              "precision": precision, "accumulate_grad_batches": trainer.accumulate_grad_batches,
              "world_size": trainer.world_size}
    if trainer.optimizers:
        opt = trainer.optimizers[0]
        config["optimizer"] = type(opt).__name__.lower()
        config.update({k: v for k, v in _plain(opt.defaults).items() if k in ("lr", "betas", "eps", "momentum")})
        config.setdefault("lr_max", opt.defaults.get("lr"))
        config.setdefault("weight_decay", opt.defaults.get("weight_decay"))
    if trainer.lr_scheduler_configs:
        s = trainer.lr_scheduler_configs[0]
        config.update(scheduler=type(s.scheduler).__name__, scheduler_interval=s.interval)
    config.setdefault("batch_size", _batch_size(trainer))
    ckpt = next((c for c in trainer.checkpoint_callbacks if getattr(c, "dirpath", None)), None)
    if ckpt is None or not ckpt._every_n_train_steps or ckpt.save_top_k != -1:
        pl.utilities.rank_zero_warn("postmortem: the replay needs ModelCheckpoint(every_n_train_steps=N, "
                                    "save_top_k=-1): a checkpoint every N steps, all kept")
    checkpoints = os.path.relpath(ckpt.dirpath, run_dir) if ckpt is not None else "checkpoints"
    seed = os.environ.get("PL_GLOBAL_SEED")
    device = trainer.strategy.root_device
    out: dict[str, Any] = {
        "seed": int(seed) if seed and seed.lstrip("-").isdigit() else None,
        "dtype": DTYPE.get(precision, precision), "vocab_size": _vocab(module, hparams),
        "versions": {**this_machine(device), "device": device.type, "lightning": lightning.__version__},
        "config": {k: v for k, v in config.items() if v is not None},
        "replay": {"entrypoint": "postmortem.integrations.lightning:make_replay",
                   "checkpoints": checkpoints.rstrip("/") + "/", "factory": cb.factory,
                   "factory_dir": _factory_folder(cb.factory), "hparams": hparams},
    }
    for key, value in cb.extra.items():        # the user's own facts win
        out[key] = {**out[key], **value} if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def _plain(d: dict) -> dict:
    """The JSON-able entries of a dict (hyper-parameters may hold modules or paths)."""
    ok = (str, int, float, bool, type(None))
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, ok):
            out[str(k)] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, ok) for x in v):
            out[str(k)] = list(v)
    return out


def _vocab(module, hparams: dict) -> int | None:
    for key in ("vocab_size", "vocab"):
        if isinstance(hparams.get(key), int):
            return hparams[key]
    emb = next((m for m in module.modules() if isinstance(m, torch.nn.Embedding)), None)
    return emb.num_embeddings if emb is not None else None


def _batch_size(trainer) -> int | None:
    loader = trainer.train_dataloader
    size = getattr(loader, "batch_size", None)
    return size if isinstance(size, int) else None


def _factory_folder(factory: str) -> str | None:
    """The folder that makes `factory`'s module importable: the script's own when the factory
    lives in the script that trains (run as __main__), else where the import finds it."""
    name = factory.partition(":")[0]
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if main and Path(main).stem == name.split(".")[-1] and "." not in name:
        return str(Path(main).resolve().parent)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return str(Path(spec.origin).resolve().parents[name.count(".")])


# -- replaying ----------------------------------------------------------------------------


def make_replay(manifest, run_dir, device=None) -> "LightningReplay":
    """The replay entry point the callback names: the module and data rebuilt by the run's
    factory, the optimizer and scheduler by its configure_optimizers()."""
    device = torch.device(device or "cpu")
    spec, cfg = manifest.replay, manifest.config
    precision = str(getattr(cfg, "precision", "32-true"))
    if precision not in REPLAYED:
        raise ReplayError(f"{run_dir}: precision {precision!r} cannot be replayed (autocast precisions only: "
                          f"{', '.join(REPLAYED)})")
    world = int(getattr(cfg, "world_size", 1) or 1)
    if world > 1:
        raise ReplayError(f"{run_dir}: cannot replay this run: it trained on {world} processes; the Lightning "
                          "replay steps one")
    module, data = _build(spec, run_dir)
    if not module.automatic_optimization:
        raise ReplayError(f"{run_dir}: {type(module).__name__} uses manual optimization, which the replay "
                          "cannot step: it steps Lightning's automatic optimization only")
    if not callable(getattr(module, "per_token_loss", None)):
        raise ReplayError(f"{run_dir}: {type(module).__name__} has no per_token_loss(batch[, step]): the replay "
                          "needs the unreduced loss whose mean training_step returns")
    module.to(device).train()
    optimizer, scheduler, interval = _optimizers(module, run_dir)
    accumulate = int(getattr(cfg, "accumulate_grad_batches", 1) or 1)
    batches = Batches(_train_loader(data, module), accumulate, module)
    freq = _lookup(data, module, "token_frequency")
    takes_step = "step" in inspect.signature(module.per_token_loss).parameters
    dtype = DTYPE.get(precision, "fp32")
    return LightningReplay(
        model=module, optimizer=optimizer, scheduler=scheduler,
        scaler=torch.amp.GradScaler(device.type) if dtype == "fp16" else None, dtype=dtype,
        clip=getattr(cfg, "clip", None), clip_algorithm=str(getattr(cfg, "gradient_clip_algorithm", "norm")),
        accumulate=accumulate, batch_at=batches.at,
        loss=(lambda step, batch: module.per_token_loss(batch, step=step)) if takes_step
        else (lambda step, batch: module.per_token_loss(batch)),
        token_frequency=freq, decode=_lookup(data, module, "decode", call=False),
        scheduled_lr=getattr(module, "scheduled_lr", None), device=device,
        scheduler_interval=interval, epoch_end=batches.ends_epoch)


class LightningReplay(Replayable):
    """A Replayable that steps as Lightning's automatic optimization does: the loss divided by
    accumulate_grad_batches, the norm and clipping over the optimizer's parameters, autocast
    without its cache, the scheduler by step or at an epoch's end."""

    def __init__(self, *, clip_algorithm: str = "norm", scheduler_interval: str = "step",
                 epoch_end=None, **kwargs):
        super().__init__(**kwargs)
        self.clip_algorithm, self.scheduler_interval = clip_algorithm, scheduler_interval
        self.epoch_end = epoch_end or (lambda step: False)
        self._stepped: int | None = None

    def load(self, path: Path, optimizer: bool = True) -> None:
        state = load_state(path)
        if not isinstance(state, dict) or "state_dict" not in state:
            raise ReplayError(f"{path}: not a Lightning checkpoint (no 'state_dict')")
        load_model(self.model, state["state_dict"], path)
        opt = (state.get("optimizer_states") or [None])[0]
        if opt is None:
            raise ReplayError(f"{path}: the checkpoint has no optimizer state (ModelCheckpoint(save_weights_only="
                              "True)?): the replay needs the full checkpoint")
        # dropping the state keeps the run's param groups (LR reached, weight decay): a fresh
        # optimizer as a resume that clears the moments makes it
        self.optimizer.load_state_dict(opt if optimizer else {**opt, "state": {}})
        scheds = state.get("lr_schedulers") or []
        if self.scheduler is not None and scheds:
            self.scheduler.load_state_dict(scheds[0])
        if self.scaler is not None and state.get("MixedPrecision"):
            self.scaler.load_state_dict(state["MixedPrecision"])

    def forward_backward(self, step: int, batch=None) -> dict:
        batch = self.batch_at(step) if batch is None else batch
        micro = list(batch) if self.accumulate > 1 else [batch]
        self._stepped = step          # an epoch-interval scheduler steps after an epoch's last step
        lr = self.optimizer.param_groups[0]["lr"]
        total = 0.0
        for part in micro:
            loss = self.per_token_loss(step, self.on_device(part)).mean()
            if self.accumulate > 1:       # Lightning divides by accumulate_grad_batches, a short last group too
                loss = loss / self.accumulate
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            total += loss.item()
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        grads = [p.grad for p in params if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(grads)
        if self.clip and self.clip > 0:
            if self.clip_algorithm == "value":
                torch.nn.utils.clip_grad_value_(params, self.clip)
            else:
                torch.nn.utils.clip_grads_with_norm_(params, self.clip, norm)
        scale = self.scaler.get_scale() if self.scaler is not None and self.scaler.is_enabled() else None
        return {"loss": total, "grad_norm": norm.item(), "lr": lr, "loss_scale": scale}

    def optimizer_step(self, row: dict) -> None:
        step = self._stepped
        scheduler, self.scheduler = self.scheduler, (self.scheduler if self.scheduler_interval == "step" else None)
        try:
            super().optimizer_step(row)
        finally:
            self.scheduler = scheduler
        if scheduler is not None and self.scheduler_interval == "epoch" and step is not None and self.epoch_end(step):
            scheduler.step()

    def modules(self):
        """The module's own names (model.blocks.0.mlp), not the protocol's model.-prefixed ones:
        the LightningModule is the model."""
        for name, module in self.model.named_modules():
            yield name or type(self.model).__name__, module
        yield from self.extra_modules

    def autocast(self):
        if self.dtype == "fp32":
            return super().autocast()
        # as Lightning's MixedPrecision: no cast cache
        return torch.autocast(self.where().type, dtype={"fp16": torch.float16, "bf16": torch.bfloat16}[self.dtype],
                              cache_enabled=False)


class Batches:
    """The run's batches in the order its Trainer drew them: every epoch a fresh pass over the
    train dataloader after `set_epoch` (as Lightning does), the module's batch hooks applied,
    micro-batches grouped `accumulate` to a step (a short group at an epoch's end)."""

    def __init__(self, loader, accumulate: int, module):
        self.loader, self.accumulate, self.module = loader, accumulate, module
        self.steps: list[list] = []
        self.last_of_epoch: set[int] = set()
        self.epoch = 0

    def at(self, step: int):
        if step < 0:
            raise ReplayError(f"step {step}: no batch before step 0")
        while len(self.steps) <= step:
            self._walk_epoch()
        group = self.steps[step]
        return group if self.accumulate > 1 else group[0]

    def ends_epoch(self, step: int) -> bool:
        self.at(step)
        return step in self.last_of_epoch

    def _walk_epoch(self) -> None:
        from lightning.fabric.utilities.data import _set_sampler_epoch
        _set_sampler_epoch(self.loader, self.epoch)
        group: list = []
        before = len(self.steps)
        for batch in self.loader:
            batch = self.module.on_after_batch_transfer(self.module.on_before_batch_transfer(batch, 0), 0)
            group.append(batch)
            if len(group) == self.accumulate:
                self.steps.append(group)
                group = []
        if group:
            self.steps.append(group)
        if len(self.steps) == before:
            raise ReplayError(f"the train dataloader of epoch {self.epoch} is empty")
        self.last_of_epoch.add(len(self.steps) - 1)
        self.epoch += 1


def _build(spec, run_dir):
    """Import and call the run's factory with the hyper-parameters it takes."""
    factory = getattr(spec, "factory", None)
    if not factory or ":" not in factory:
        raise ReplayError(f"{run_dir}: manifest.json's replay names no factory ('module:function' that returns "
                          "the LightningModule and its data)")
    folder = getattr(spec, "factory_dir", None)
    # another `train` module imported before is put aside: the run's own is wanted
    fn = import_user(factory, run_dir, "factory", f" from {folder}" if folder else "", folders=(folder,))
    hparams = dict(getattr(spec, "hparams", None) or {})
    params = inspect.signature(fn).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        hparams = {k: v for k, v in hparams.items() if k in params}
    made = call_user(fn, factory, run_dir, "factory", **hparams)
    module, data = (made if isinstance(made, tuple) else (made, None))[:2]
    if not isinstance(module, pl.LightningModule):
        raise ReplayError(f"{run_dir}: the factory {factory} returned {type(module).__name__}, not a LightningModule "
                          "(or a tuple of the module and its datamodule or dataloader)")
    return module, data


def _train_loader(data, module):
    if isinstance(data, pl.LightningDataModule):
        data.prepare_data()
        data.setup("fit")
        return data.train_dataloader()
    if data is not None:
        return data
    return module.train_dataloader()


def _optimizers(module, run_dir):
    from lightning.pytorch.core.optimizer import _configure_optimizers, _configure_schedulers_automatic_opt
    optimizers, schedulers, monitor = _configure_optimizers(module.configure_optimizers())
    if len(optimizers) != 1:
        raise ReplayError(f"{run_dir}: configure_optimizers() gives {len(optimizers)} optimizers: "
                          "the replay steps one")
    configs = _configure_schedulers_automatic_opt(schedulers, monitor)
    if len(configs) > 1:
        raise ReplayError(f"{run_dir}: configure_optimizers() gives {len(configs)} schedulers: the replay steps one")
    if not configs:
        return optimizers[0], None, "step"
    c = configs[0]
    if c.reduce_on_plateau or c.frequency != 1:
        what = "steps on a monitored metric" if c.reduce_on_plateau else f"steps every {c.frequency} {c.interval}s"
        raise ReplayError(f"{run_dir}: the LR scheduler {what}: the replay steps one every step or epoch")
    return optimizers[0], c.scheduler, c.interval


def _lookup(data, module, name: str, call: bool = True) -> Any:
    """`name` from the datamodule or the module: a value, or a method called once (call=True)."""
    for owner in (data, module):
        found = getattr(owner, name, None)
        if found is not None:
            return found() if call and callable(found) else found
    return None


__all__ = ["PostmortemCallback", "make_replay", "LightningReplay", "Batches"]
