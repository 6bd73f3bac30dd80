"""The weights of a Trainer checkpoint folder: model.safetensors (or its shards), checked
against the model the factory built before anything is loaded, so another model's
checkpoint is one line naming the first tensor that does not fit."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from postmortem.errors import ReplayError
from postmortem.replay.checkpoints import load_state


def weight_files(path: Path) -> list[Path]:
    if (path / "model.safetensors").exists():
        return [path / "model.safetensors"]
    index = path / "model.safetensors.index.json"
    if index.exists():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError) as err:
            raise ReplayError(f"{index}: not a safetensors index ({err})") from None
        return [path / s for s in shards]
    if (path / "pytorch_model.bin").exists():
        return [path / "pytorch_model.bin"]
    if (path / "adapter_model.safetensors").exists():
        raise ReplayError(f"{path}: a PEFT adapter checkpoint; the HF replay loads whole models only")
    raise ReplayError(f"{path}: no model.safetensors (nor shards, nor pytorch_model.bin) in the checkpoint")


def _shapes(file: Path) -> dict[str, tuple]:
    if file.suffix != ".safetensors":
        return {k: tuple(v.shape) for k, v in load_state(file).items()}
    from safetensors import safe_open
    try:
        with safe_open(str(file), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as err:        # a truncated or foreign file: safetensors' own error, one line
        raise ReplayError(f"{file}: cannot read the weights: {str(err).splitlines()[0][:160]}") from None


def load_weights(model: torch.nn.Module, path: Path) -> None:
    """Load checkpoint-N/'s weights into `model`, refused in one line when they are of
    another model (a shape, a missing or an unexpected tensor). Tied weights (GPT-2's
    lm_head is its embedding) are saved once: missing but shared with a loaded one is fine."""
    files = weight_files(path)
    shapes: dict[str, tuple] = {}
    for f in files:
        shapes.update(_shapes(f))
    own = model.state_dict()
    for name, tensor in own.items():         # the model's order: its first layer named first
        if name in shapes and tuple(tensor.shape) != shapes[name]:
            raise ReplayError(f"{path}: the checkpoint is of another model: {name} is {shapes[name]} there, "
                              f"{tuple(tensor.shape)} in the model the factory built")
    loaded = {own[k].data_ptr() for k in shapes if k in own}
    missing = [k for k in own if k not in shapes and own[k].data_ptr() not in loaded]
    unexpected = [k for k in shapes if k not in own]
    if missing or unexpected:
        what = f"{missing[0]} is missing from it" if missing else f"it has {unexpected[0]}, which the model lacks"
        raise ReplayError(f"{path}: the checkpoint is of another model: {what} "
                          f"({len(missing)} missing, {len(unexpected)} unexpected tensors)")
    for f in files:
        if f.suffix == ".safetensors":
            from safetensors.torch import load_file
            state = load_file(str(f), device="cpu")
        else:
            state = load_state(f)
        model.load_state_dict(state, strict=False)
