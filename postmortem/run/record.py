"""The recorder, the writer side of the run format that run/ reads: drop it into a PyTorch
loop to make a run diagnosable and replayable.

    from postmortem.run.record import Recorder

    rec = Recorder("runs/my-run", manifest={"seed": 0, "dtype": "bf16", "config": {...},
                   "replay": {"entrypoint": "mypkg.replay:make_replay"}})
    for step in ...:
        ...backward, unscale...
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # pre-clip norm
        if rec.wants_layers(step):
            rec.layers(step, model, optimizer)                           # before zero_grad
        optimizer.step()
        rec.log(step, loss=loss.item(), grad_norm=gn.item(), lr=lr, batch_index=i)
    rec.close()

Writes `metrics.jsonl` (one line per step, bare NaN for a NaN, flushed every
line so a crash loses nothing) and `manifest.json`. torch is only needed by
`layers`, and only imported there.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from postmortem.files import atomic_write
from postmortem.run.model import RunManifest


# What the recorder reads of a model and an optimizer, said without importing torch (which is
# loaded only by the training script): a torch.nn.Module and a torch.optim.Optimizer are both.
class Model(Protocol):
    def named_parameters(self) -> Iterator[tuple[str, Any]]: ...


class Optimizer(Protocol):
    @property
    def state(self) -> Mapping[Any, Mapping[str, Any]]: ...


def batch_hash(batch: Any) -> str:
    """A short stable hash of a batch's bytes (a tensor, an array or bytes)."""
    if hasattr(batch, "detach"):
        batch = batch.detach().cpu().contiguous().numpy()
    data = batch.tobytes() if hasattr(batch, "tobytes") else bytes(batch)
    return hashlib.sha1(data).hexdigest()[:12]


def this_machine(device: object = None) -> dict[str, str]:
    """What a bit-for-bit replay depends on: the torch build and the CPU kernels it picked
    (AVX2 and AVX512 kernels sum in different orders), and the GPU when `device` is one.
    Only python where torch is not loaded."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {"python": platform.python_version()}
    gpu = {"gpu": torch.cuda.get_device_name(device)} if getattr(device, "type", None) == "cuda" else {}
    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "python": platform.python_version(), **gpu}


class Recorder:
    """Appends one JSON line per call to `log`; per-layer stats every `layer_every` steps."""

    def __init__(self, run_dir: str | Path, manifest: RunManifest | dict | None = None,
                 layer_every: int = 50, append: bool = False):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.layer_every = layer_every
        self._pending: dict[int, dict[str, float]] = {}
        if manifest is not None:
            self.write_manifest(manifest)
        self._file = open(self.dir / "metrics.jsonl", "a" if append else "w", encoding="utf-8")

    def write_manifest(self, manifest: RunManifest | dict) -> None:
        m = manifest if isinstance(manifest, RunManifest) else RunManifest.model_validate(manifest)
        m = m.model_copy(update={"versions": {**this_machine(), **m.versions}})   # the user's own win
        atomic_write(self.dir / "manifest.json", m.model_dump_json(indent=2, exclude_none=True) + "\n")

    def wants_layers(self, step: int) -> bool:
        return self.layer_every > 0 and step % self.layer_every == 0

    def log(self, step: int, **metrics: Any) -> None:
        """One line for this step: canonical names (loss, grad_norm, lr, loss_scale, skipped,
        val_loss, batch_index, batch_hash) and anything else under its own name."""
        row: dict[str, str | int | float] = {"step": int(step)}
        row.update(self._pending.pop(step, {}))
        for k, v in metrics.items():
            if v is None:
                continue
            row[k] = v if isinstance(v, str) else (int(v) if isinstance(v, bool) else float(v))
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()

    def layers(self, step: int, model: Model, optimizer: Optimizer | None = None) -> dict[str, float]:
        """Per-layer grad norms, weight norms and Adam moment norms, logged with `step`."""
        import torch  # noqa: PLC0415 - torch only in the training script that records

        stats: dict[str, float] = {}
        state: Mapping[Any, Mapping[str, Any]] = optimizer.state if optimizer is not None else {}
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() < 2:        # weights only: biases and norms add rows, not insight
                    continue
                layer = name.removesuffix(".weight")
                stats[f"weight_norm/{layer}"] = p.norm().item()
                if p.grad is not None:
                    stats[f"grad_norm/{layer}"] = p.grad.norm().item()
                st = state.get(p, {})
                if "exp_avg" in st:
                    stats[f"adam_m_norm/{layer}"] = st["exp_avg"].norm().item()
                    stats[f"adam_v_norm/{layer}"] = st["exp_avg_sq"].norm().item()
        self._pending.setdefault(step, {}).update(stats)
        return stats

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
