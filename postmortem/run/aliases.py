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
    "skipped": ("skipped", "skipped_iterations", "number_of_skipped_iterations"),
    "batch_index": ("batch_index", "batch_idx"),
    "batch_hash": ("batch_hash",),
    "wall_time": ("wall_time", "_timestamp", "timestamp", "walltime"),
}

_LOOKUP = {name: canon for canon, names in ALIASES.items() for name in names}
_SEP = re.compile(r"[\s\-]+")
# Per-layer grad norms: Lightning's `grad_2.0_norm/<param>` and friends.
_PER_LAYER = re.compile(r"^(?:train/)?(?:grad_2\.0_norm|grad_norm|gnorm)/(.+)$")


def normalize(name: str) -> str:
    """Lower case, spaces and hyphens to underscores: `lr-AdamW` -> `lr_adamw`."""
    return _SEP.sub("_", name.strip()).lower()


@lru_cache(maxsize=4096)
def canonical_name(name: str) -> str:
    """The canonical column for `name`, or `name` itself when it is no alias."""
    norm = normalize(name)
    if norm in _LOOKUP:
        return _LOOKUP[norm]
    m = _PER_LAYER.match(norm)
    if m and m.group(1) not in ("total",):
        return f"grad_norm/{m.group(1)}"
    # LearningRateMonitor names every optimizer: lr-AdamW, lr-Lion, ...
    if re.fullmatch(r"lr-[A-Za-z0-9]+(?:/group0)?", name.strip()):     # Composer: lr-DecoupledAdamW/group0
        return "lr"
    return name
