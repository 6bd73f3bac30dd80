"""One alias table: the zoo of metric names onto the canonical columns."""

from __future__ import annotations

import re
from functools import lru_cache

# canonical column -> names seen in the wild (compared after `normalize`).
ALIASES: dict[str, tuple[str, ...]] = {
    "loss": (
        "loss", "train/loss", "train_loss", "lm_loss", "trl", "train_loss_step",
        "loss_step", "train/loss_step", "train/samples/train_loss", "training_loss",
        "train/lm_loss", "lm_loss_step",
    ),
    "val_loss": (
        "val_loss", "eval_loss", "eval/loss", "val/loss", "valid_loss", "validation_loss",
        "tel", "valid/loss", "validation/loss", "lm_loss_value", "val_lm_loss",
    ),
    "grad_norm": (
        "grad_norm", "gnorm", "norm", "train/grad_norm", "grad_2.0_norm_total",
        "gradient_norm", "train/gnorm", "grad_norm_pre_clip", "total_norm", "optim/total_grad_norm",
    ),
    "lr": (
        "lr", "learning_rate", "train_lr", "lr/pg0", "train/learning_rate", "train/lr", "train/samples/lr", "learning_rate/lr", "optimizer/lr",
    ),
    "loss_scale": (
        "loss_scale", "train/samples/loss_scale", "scaler/scale", "grad_scale",
        "train/loss_scale",
    ),
    "skipped": ("skipped", "skipped_iterations", "number_of_skipped_iterations", "skipped_iter", "skipped_iters",
                "skipped_steps", "num_skipped", "num_skipped_steps", "num_skipped_iterations", "skipped_updates",
                "overflow_steps", "num_overflows"),
    # a flag per logged row (one step, not an interval): the scaler overflowed on it
    "overflows": ("overflow", "overflows", "found_inf", "has_overflow", "is_overflow", "grad_overflow",
                  "overflow_cond"),
    "batch_index": ("batch_index", "batch_idx"),
    "batch_hash": ("batch_hash",),
    "wall_time": ("wall_time", "_timestamp", "timestamp", "walltime"),
}

_LOOKUP = {name: canon for canon, names in ALIASES.items() for name in names}
# What a loss scale is called after a logger's prefix (`optim/loss_scale`, `fp16/loss_scale`,
# `train/grad_scale`, `trainer.scaler`): the last `/` or `.` segment, normalized. The table's own
# full names stay exact (`loss_scale vs samples` is keyed by samples, so it is no alias).
_SCALE_TAILS = frozenset((
    "loss_scale", "lossscale", "grad_scale", "gradscale", "loss_scaler", "grad_scaler", "scaler",
    "amp_scale", "cur_scale", "current_scale", "current_loss_scale", "dynamic_loss_scale", "fp16_scale",
    "loss_scale_value", "scaler_scale", "scale_loss", "lossscale_value", "amp_loss_scale",
    # PaddleNLP 2.x pretraining scripts: `loss_scaling: %.1f` (Paddle's AmpScaler `_scale`, its
    # static AMP `get_loss_scaling()`); the `incr_count`/`decr_count` beside it are the scaler's
    # running counts of clean and overflowing steps, reset at each change: no skip counter
    "loss_scaling",
    # ParlAI's report (parlai/core/torch_agent.py v1.x: `self.global_metrics.add('fp16_loss_scalar',
    # GlobalAverageMetric(self.optimizer.loss_scale))`): the fp16 optimizer's loss scale
    "fp16_loss_scalar",
    # insightface arcface_torch (deepinsight/insightface 05a156f recognition/arcface_torch/utils/
    # utils_callbacks.py CallBackLogging): `"... Global Step: %d   Fp16 Grad Scale: %2.f   Required:
    # %1.f hours"` with `grad_scaler.get_scale()` (a torch GradScaler's scale)
    "fp16_grad_scale",
    # coqui-ai Trainer v0.0.x trainer/trainer.py (_optimize): `loss_dict["amp_scaler"] =
    # scaler.get_scale()`, printed `| > amp_scaler: 32768.0  (32768.0)` among the losses
    "amp_scaler",
))
# a bare `scale` is a loss scale only under a scaler's own prefix (`scaler/scale`, `amp/scale`)
_SCALER_PREFIXES = frozenset(("scaler", "grad_scaler", "gradscaler", "amp", "fp16", "loss_scaler", "amp_scaler"))
_SKIP_TAILS = frozenset(("skipped", "skipped_steps", "skipped_iterations", "skipped_iter", "num_skipped",
                         "num_skipped_steps", "skipped_updates"))
_PARTS = re.compile(r"[/.]")
_SEP = re.compile(r"[\s\-]+")
# Per-layer grad norms: Lightning's `grad_2.0_norm/<param>` and friends.
_PER_LAYER = re.compile(r"^(?:train/)?(?:grad_2\.0_norm|grad_norm|gnorm)/(.+)$")


# BMTrain's trainers (OpenBMB CPM-Live, CPM-Bee, ModelCenter examples, BMTrain example/train.py)
# print their loss scale as a bare `scale` right after the LR: `"| Iter: {:6d} | loss: {:.4f} | lr:
# {:.4e}, scale: {:10.4f} | ..."` with `int(optimizer.scale)` / `int(optim_manager.loss_scale)`.
# Only there is `scale` the loss scale: the LR printed `{:.4e}` then `, ` just before the name.
_BMTRAIN_SCALE = re.compile(r"\blr: [-+]?\d\.\d{4}e[-+]\d{2,3}, $")


def loss_scale_in_context(text: str, name_start: int) -> bool:
    """Whether the bare `scale` named at `name_start` in `text` is the loss scale: BMTrain's
    `lr: 1.0000e-04, scale:  32768.0000` (never a `scale` elsewhere)."""
    return bool(_BMTRAIN_SCALE.search(text, max(0, name_start - 24), name_start))


def normalize(name: str) -> str:
    """Lower case, spaces and hyphens to underscores: `lr-AdamW` -> `lr_adamw`."""
    return _SEP.sub("_", name.strip()).lower()


@lru_cache(maxsize=4096)
def canonical_name(name: str) -> str:
    """The canonical column for `name`, or `name` itself when it is no alias."""
    norm = normalize(name)
    if norm in _LOOKUP:
        return _LOOKUP[norm]
    tail = _tail(norm)
    if tail is not None:
        return tail
    m = _PER_LAYER.match(norm)
    if m and m.group(1) not in ("total",):
        return f"grad_norm/{m.group(1)}"
    # LearningRateMonitor names every optimizer: lr-AdamW, lr-Lion, ...
    if re.fullmatch(r"lr-[A-Za-z0-9]+(?:/group0)?", name.strip()):     # Composer: lr-DecoupledAdamW/group0
        return "lr"
    if _COMPOSER_SCALE.fullmatch(name.strip()) or _D2_METRIC.match(name.strip()):
        return "loss_scale"
    return name


# Composer's LossScaleMonitor, only in the Stanford CRFM fork (stanford-crfm/composer 2f69950
# composer/callbacks/loss_scale_monitor.py; mosaicml/composer v0.3..v0.24.1 never had it):
# `logger.metric_batch({f"loss_scale-{name}": scale})`, one key per optimizer class; a console
# logger prints it behind `Train ` (no `/` in the name, so that word stays)
_COMPOSER_SCALE = re.compile(r"(?:Train\s+)?loss_scale-[A-Za-z0-9_]+")
# detectron2's AMPTrainer(log_grad_scaler=True) (facebookresearch/detectron2 830d796, 2023-03-10,
# after v0.6, detectron2/engine/train_loop.py): `storage.put_scalar("[metric]grad_scaler", self.grad_scaler.
# get_scale())`; metrics.json keeps the `[metric]` (its console line drops the bracket)
_D2_METRIC = re.compile(r"\[metric\]grad_scaler$")


def _tail(norm: str) -> str | None:
    """`loss_scale` / `skipped` for a name whose last segment says it behind a logger's prefix
    (`optim/loss_scale`, `fp16/loss-scale`, `amp/scale`, `train/num_skipped`), else None."""
    parts = [p for p in _PARTS.split(norm) if p]
    if len(parts) < 2:
        # one word: the table's own, or a spelling without separators (`lossscale`, `amp_scale`)
        return "loss_scale" if parts and parts[0] in _SCALE_TAILS else None
    last = parts[-1]
    if last in _SCALE_TAILS or last == "scale" and parts[-2] in _SCALER_PREFIXES:
        return "loss_scale"
    if last in _SKIP_TAILS:
        return "skipped"
    return None
