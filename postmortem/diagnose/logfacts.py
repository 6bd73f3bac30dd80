"""Facts a log states in its own text where no config carries them: the dtype its progress
lines print (`bf16`, `fp16`), the vocab size and the model's size its header prints. Read
from the head of the run's text files, each with where it was found."""

from __future__ import annotations

import re
from pathlib import Path

from postmortem.run import RunLog

HEAD = 256 * 1024          # the header and the first progress lines are enough

_DTYPE = (("bf16", re.compile(r"\b(?:bf16|bfloat16)(?:_enabled)?\b", re.I)),
          ("fp16", re.compile(r"\b(?:fp16|float16)(?:_enabled)?\b", re.I)))
_OFF = re.compile(r"[\s:=.'\"]*(?:false|0\b|none)", re.I)        # `fp16: False`, `--bf16 0`
_VOCAB = re.compile(r"\b(?:vocab(?:ulary)?[ _]size|n_vocab|padded vocab \(size)\s*[:=]?\s*(\d{2,7})", re.I)
_PARAMS = re.compile(r"\b(?:number of parameters|num(?:ber)?[ _]param(?:eter)?s|total params|"
                     r"n_params|parameters)\s*[:=]?\s*([\d.,]+)\s*([KMB])?\b", re.I)
_PARAMS_AFTER = re.compile(r"\b(\d{1,3}(?:,\d{3})+|\d{4,}|\d+(?:\.\d+)?\s*[KMB])\s+(?:trainable\s+)?parameters\b")
_SHAPE = {"d_model": ("n_embd", "d_model", "hidden_size", "dim", "model_dim"),
          "layers": ("n_layer", "num_layers", "n_layers", "num_hidden_layers", "depth")}


def texts(log: RunLog) -> list[tuple[str, str]]:
    """(file name, its head) of the run's text files: read once, searched by each fact below."""
    out = []
    for f in log.source.files[:4]:
        p = Path(f)
        if p.is_file() and p.suffix not in (".json", ".csv", ".jsonl") and "tfevents" not in p.name:
            try:
                with open(p, "rb") as fh:
                    out.append((p.name, fh.read(HEAD).decode("utf-8", "replace")))
            except OSError:
                continue
    return out


def dtype_in_text(heads: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(dtype, where) from the log's own lines: the one of bf16 / fp16 that they name (not
    as `fp16: False`), when only one is named."""
    for name, text in heads:
        found = {d for d, rx in _DTYPE
                 if any(not _OFF.match(text, m.end(), m.end() + 16) for m in rx.finditer(text))}
        if len(found) == 1:
            d = found.pop()
            return d, f"{name}: its lines say {d}"
    return None


def vocab_in_text(heads: list[tuple[str, str]]) -> tuple[int, str] | None:
    for name, text in heads:
        m = _VOCAB.search(text)
        if m:
            return int(m.group(1)), f"{name}: {m.group(0).strip()}"
    return None


def model_size(log: RunLog, heads: list[tuple[str, str]]) -> tuple[float, str] | None:
    """(parameters, where): a parameter count the log prints, or 12 x layers x d_model^2
    from the config's shape (a transformer's weights without its embeddings)."""
    c = log.manifest.config if log.manifest and log.manifest.config else None
    extra = (getattr(c, "model_extra", None) or {}) if c is not None else {}
    for key in ("n_params", "num_params", "num_parameters", "parameters"):
        v = extra.get(key)
        if isinstance(v, (int, float)) and v > 0:
            return float(v), f"config {key}"
    shape = {k: next((extra[n] for n in names if isinstance(extra.get(n), int)), None) for k, names in _SHAPE.items()}
    if shape["d_model"] and shape["layers"]:
        return 12.0 * shape["layers"] * shape["d_model"] ** 2, (
            f"12 x {shape['layers']} layers x d_model {shape['d_model']}^2 (config)")
    for name, text in heads:
        hits = [(m.group(1), m.group(2), m.group(0)) for m in _PARAMS.finditer(text)]
        hits += [(m.group(1).rstrip("KMB "), m.group(1)[-1] if m.group(1)[-1] in "KMB" else None, m.group(0))
                 for m in _PARAMS_AFTER.finditer(text)]
        sizes = []
        for number, unit, said in hits:
            try:
                v = float(number.replace(",", ""))
            except ValueError:
                continue
            v *= {"K": 1e3, "M": 1e6, "B": 1e9}.get((unit or "").upper(), 1.0)
            if v >= 1e3:
                sizes.append((v, f"{name}: {said.strip()}"))
        if sizes:
            return max(sizes)          # the whole model's count (a log may print its parts too)
    return None
