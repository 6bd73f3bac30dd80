"""The Hugging Face Trainer, recorded for a post-mortem and replayable.

    from postmortem.integrations.hf import PostmortemCallback

    def build_trainer(output_dir, **kwargs):          # in train.py: the model, data, arguments
        ...
        return Trainer(model=model, args=args, train_dataset=data,
                       callbacks=[PostmortemCallback(trainer_factory="train:build_trainer")])

The callback writes `metrics.jsonl` and `manifest.json` into `args.output_dir`: every step's
loss, pre-clip grad norm and LR as the Trainer computed them, the loss scale and skipped
steps under fp16, a hash of the step's input_ids, per-layer grad/weight/Adam norms every
`layer_every` steps, and the config read from the TrainingArguments and the model's config.
It makes the Trainer log every step (`logging_steps` 1): a post-mortem needs each step.
`postmortem replay OUTPUT_DIR` then builds the Trainer again through `trainer_factory` and
replays from the `checkpoint-N/` folders the Trainer saves (`integrations.hf_replay`).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from postmortem import __version__
from postmortem.integrations import hf_replay
from postmortem.integrations.hf_inputs import step_inputs
from postmortem.run.record import Recorder, batch_hash, this_machine

ENTRYPOINT = "postmortem.integrations.hf:make_replay"
SCHEDULES = {"cosine": "cosine", "cosine_with_min_lr": "cosine", "linear": "linear",
             "constant": "constant", "constant_with_warmup": "constant"}


class PostmortemCallback(TrainerCallback):
    """Records the run into `args.output_dir`; `trainer_factory` ("module:function", called
    as `function(output_dir, **factory_kwargs)` and returning the Trainer) makes it replayable."""

    def __init__(self, trainer_factory: str | None = None, factory_kwargs: dict | None = None,
                 layer_every: int = 50, run_id: str | None = None):
        if trainer_factory is not None and ":" not in trainer_factory:
            raise ValueError(f"trainer_factory {trainer_factory!r}: expected 'module:function', e.g. 'train:build_trainer'")
        self.factory, self.factory_kwargs = trainer_factory, dict(factory_kwargs or {})
        json.dumps(self.factory_kwargs)      # the replay reads them back from manifest.json
        self.layer_every, self.run_id = layer_every, run_id
        self.rec: Recorder | None = None
        self._watch_nan_filter = True
        self._hooks: list = []
        self._row: tuple[int, dict] | None = None     # held until the step's eval loss is known
        self._new_step()

    def _new_step(self) -> None:
        self._ids: list[torch.Tensor] = []
        self._bad_loss: float | None = None
        self._scale: float | None = None
        self._skipped: bool | None = None

    # -- the Trainer's events --------------------------------------------------------------

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if not state.is_world_process_zero:
            return
        resumed = state.global_step > 0          # resume_from_checkpoint: the log goes on
        self.rec = Recorder(args.output_dir, self.manifest(args, state, model), layer_every=self.layer_every,
                            append=resumed)
        self._watch_nan_filter = bool(args.logging_nan_inf_filter)
        self._hooks = [model.register_forward_pre_hook(self._inputs_seen, with_kwargs=True),
                       model.register_forward_hook(self._loss_seen, with_kwargs=True)]

    def on_step_begin(self, args, state, control, **kwargs):
        self._flush()
        self._new_step()

    def on_pre_optimizer_step(self, args, state, control, model=None, optimizer=None, **kwargs):
        if self.rec is None:
            return
        scaler = getattr(optimizer, "scaler", None)       # accelerate's GradScaler under fp16
        if scaler is not None and scaler.is_enabled():
            self._scale = float(scaler.get_scale())       # the scale this step used, before update
        if self.rec.wants_layers(state.global_step):      # grads clipped, before the step
            self.rec.layers(state.global_step, model, getattr(optimizer, "optimizer", optimizer))

    def on_step_end(self, args, state, control, optimizer=None, **kwargs):
        if self.rec is None:
            return
        if self._scale is not None:
            self._skipped = bool(getattr(optimizer, "step_was_skipped", False))
        control.should_log = True        # every step: the loss and grad norm the Trainer computed

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.rec is None or not logs:
            return
        if "loss" in logs:               # the step's training log (not eval, not the summary)
            self._flush()
            loss = float(logs["loss"])
            if self._bad_loss is not None and math.isfinite(loss):
                loss = self._bad_loss    # logging_nan_inf_filter put an average in its place
            row = {"loss": loss, "grad_norm": logs.get("grad_norm"), "lr": logs.get("learning_rate"),
                   "loss_scale": self._scale, "skipped": None if self._skipped is None else int(self._skipped),
                   "batch_hash": batch_hash(step_inputs(self._ids)) if self._ids else None,
                   "epoch": logs.get("epoch")}
            self._row = (state.global_step - 1, row)     # checkpoint-N holds the state after step N-1
        elif "eval_loss" in logs and self._row is not None and self._row[0] == state.global_step - 1:
            self._row[1]["val_loss"] = float(logs["eval_loss"])

    def on_save(self, args, state, control, **kwargs):
        self._flush()

    def on_train_end(self, args, state, control, **kwargs):
        self._flush()
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self.rec is not None:
            self.rec.close()
            self.rec = None

    # -- what the model saw ------------------------------------------------------------------

    def _inputs_seen(self, module, args, kwargs):
        if module.training and self.rec is not None:
            ids = kwargs.get("input_ids", args[0] if args else None)
            if isinstance(ids, torch.Tensor):
                self._ids.append(ids.detach().reshape(-1).cpu())

    def _loss_seen(self, module, args, kwargs, output):
        if not (module.training and self.rec is not None and self._watch_nan_filter):
            return
        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        if isinstance(loss, torch.Tensor) and self._bad_loss is None and not torch.isfinite(loss).all():
            self._bad_loss = float(loss.detach().float().mean())

    def _flush(self) -> None:
        if self._row is not None and self.rec is not None:
            step, row = self._row
            self.rec.log(step, **row)
        self._row = None

    # -- manifest.json -----------------------------------------------------------------------

    def manifest(self, args, state, model) -> dict:
        """What the diagnosis needs from the TrainingArguments and the model's config, and the
        replay's entry point."""
        import accelerate
        import transformers

        ga, steps = args.gradient_accumulation_steps, state.max_steps
        schedule = getattr(args.lr_scheduler_type, "value", str(args.lr_scheduler_type))
        config = {
            "lr_max": args.learning_rate, "min_lr": min_lr(args, schedule),
            "warmup_steps": args.get_warmup_steps(steps), "schedule": SCHEDULES.get(schedule, schedule),
            "lr_scheduler_type": schedule, "total_steps": steps,
            "batch_size": args.per_device_train_batch_size * ga * args.world_size,
            "per_device_train_batch_size": args.per_device_train_batch_size, "gradient_accumulation_steps": ga,
            "world_size": args.world_size, "clip": args.max_grad_norm or None, "weight_decay": args.weight_decay,
            "optimizer": getattr(args.optim, "value", str(args.optim)), "adam_beta1": args.adam_beta1,
            "adam_beta2": args.adam_beta2, "adam_epsilon": args.adam_epsilon, "fp16": args.fp16, "bf16": args.bf16,
            "model": model_facts(model),
        }
        device = args.device
        out: dict[str, Any] = {
            "run_id": self.run_id or args.run_name or Path(args.output_dir).resolve().name,
            "seed": args.seed, "dtype": run_dtype(args, model),
            "vocab_size": getattr(getattr(model, "config", None), "vocab_size", None),
            "versions": {"postmortem": __version__, "transformers": transformers.__version__,
                         "accelerate": accelerate.__version__, **this_machine(device), "device": device.type},
            "config": config,
        }
        if self.factory:
            out["replay"] = {"entrypoint": ENTRYPOINT, "checkpoints": ".", "factory": self.factory,
                             "factory_dir": factory_dir(self.factory), "factory_kwargs": self.factory_kwargs}
        return out


def min_lr(args, schedule: str) -> float | None:
    kw = args.lr_scheduler_kwargs or {}
    if schedule in ("cosine", "linear", "polynomial"):
        return float(kw.get("lr_end", 0.0)) if schedule == "polynomial" else 0.0
    if schedule == "cosine_with_min_lr":
        return kw.get("min_lr") if kw.get("min_lr") is not None else args.learning_rate * kw.get("min_lr_rate", 0.0)
    if schedule.startswith("constant"):
        return args.learning_rate
    return None


def run_dtype(args, model) -> str:
    """The dtype the forward really ran in: accelerate's autocast wraps the model's forward
    only where it runs it (fp16 on a CPU trains in fp32), else the weights' own dtype."""
    if "_original_forward" in vars(model):
        return "fp16" if args.fp16 else "bf16" if args.bf16 else "fp32"
    dtype = next(model.parameters()).dtype
    return {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(dtype, "fp32")


def model_facts(model) -> dict:
    cfg = getattr(model, "config", None)
    if cfg is None:
        return {"class": type(model).__name__}
    keep = ("model_type", "vocab_size", "n_layer", "num_hidden_layers", "n_embd", "hidden_size", "n_head",
            "num_attention_heads", "n_positions", "max_position_embeddings", "intermediate_size", "n_inner",
            "tie_word_embeddings")
    facts = {k: getattr(cfg, k) for k in keep if getattr(cfg, k, None) is not None}
    return {"class": type(model).__name__, **facts,
            "parameters": sum(p.numel() for p in model.parameters())}


def factory_dir(factory: str) -> str | None:
    """The folder to put on sys.path to import the factory's module again: its file's, or
    the running script's when the factory lives in the script (`python train.py`)."""
    module = factory.partition(":")[0]
    parts = module.split(".")
    mod = sys.modules.get(module)
    main = sys.modules.get("__main__")
    if mod is None and main is not None and Path(getattr(main, "__file__", "") or "").stem == parts[-1]:
        mod = main
    file = getattr(mod, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    up = len(parts) if path.name == "__init__.py" else len(parts) - 1
    return str(path.parents[up])


def make_replay(manifest, run_dir, device=None):
    """The replay's entry point named in manifest.json (see integrations.hf_replay)."""
    return hf_replay.make_replay(manifest, run_dir, device)


__all__ = ["PostmortemCallback", "make_replay"]
