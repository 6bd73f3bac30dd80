"""The config the log carries, mapped onto RunManifest so the checks run on any run.

Sources, each read as plain data (never a pickle such as HF's training_args.bin): MLflow params
and tags, Lightning hparams.yaml, Ultralytics args.yaml, HF training_args.json / config.json and
trainer_state.json's own keys, W&B config.yaml, Megatron / GPT-NeoX argument dumps and
fairseq / argparse `Namespace(...)` lines in a text log. manifest.json, where there is one,
wins; `source.extras["facts_from"]` says where each fact came from (`info` prints it).
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import Any

from postmortem.run import encodings, readers
from postmortem.run.model import RunConfig, RunLog, RunManifest
from postmortem.run.tbconfig import tensorboard_configs

# fact -> config keys (the last dotted part, lower case) in order of preference
KEYS: dict[str, tuple[str, ...]] = {
    "lr_max": ("lr_max", "max_lr", "peak_lr", "learning_rate", "lr", "lr0", "base_lr"),
    "min_lr": ("min_lr", "lr_min", "end_lr", "final_lr"),
    "warmup_steps": ("warmup_steps", "num_warmup_steps", "lr_warmup_steps", "warmup_iters",
                     "lr_warmup_iters", "warmup_updates", "warmup"),
    "schedule": ("lr_scheduler_type", "lr_decay_style", "lr_scheduler", "lr_schedule", "scheduler",
                 "decay_style", "schedule", "lr_policy"),
    "total_steps": ("max_steps", "total_steps", "num_training_steps", "train_iters", "max_iters",
                    "max_update", "lr_decay_iters", "train_steps", "num_steps"),
    "clip": ("max_grad_norm", "clip_grad", "grad_clip", "gradient_clipping", "clip_norm",
             "gradient_clip_val", "clip_grad_norm", "grad_clip_norm"),
    "weight_decay": ("weight_decay", "wd"),
    "batch_size": ("global_batch_size", "total_train_batch_size", "train_batch_size", "batch_size",
                   "per_device_train_batch_size", "batch", "micro_batch_size"),
    "vocab_size": ("vocab_size", "n_vocab", "padded_vocab_size"),
    "run_name": ("mlflow.runname", "run_name", "wandb_run_name", "experiment_name"),
}
_CONFIG_FILES = ("training_args.json", "args.yaml", "args.json", "hparams.yaml", "hparams.json",
                 "config.yaml", "params.json", "config.json")
_BIG = 4 << 20       # a config file bigger than this is not a config
# `name ...... value` (a value's own `..... [OKAY]` trailer cut after): the value is taken to the
# line's end and trimmed in Python, so a long run of blanks is crossed once
_DUMP = re.compile(r"^[ \t]*(?:\[[^\]\n]*\][ \t]*)*([A-Za-z_][\w.]*) \.{3,} ([^\n]*)", re.MULTILINE)
_TRAILER = re.compile(r"\s?\.{3,}[ \t]*\w+$")
_PADDED_VOCAB = re.compile(r"padded vocab \(size: (\d+)\)")

Flat = dict[str, Any]            # a config as {dotted.key: value}; the values are whatever it held
Hit = tuple[str, Any]            # (the key found, its value as the config holds it)
Fact = tuple[object, str]        # (the fact's value, where it came from)


def _value(raw: object) -> Any:
    """Config values arrive as strings (MLflow params, argument dumps): read them as data."""
    if isinstance(raw, str):
        text = raw.strip()
        low = text.lower()
        if low in ("none", "null", ""):
            return None
        if low in ("true", "false"):
            return low == "true"
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            pass
        if text[:1] in "[(":
            try:
                return _value(ast.literal_eval(text))
            except (ValueError, SyntaxError, RecursionError, MemoryError):
                return text
        return text
    if isinstance(raw, (list, tuple)) and len(raw) >= 1 and all(isinstance(v, (int, float)) for v in raw):
        return raw[0]        # fairseq's lr=[0.0005]: one value per update frequency stage
    return raw


def flatten(cfg: object, prefix: str = "", out: Flat | None = None, depth: int = 0) -> Flat:
    """A nested config as {dotted.key: value}; W&B's {key: {value: v}} unwrapped."""
    out = {} if out is None else out
    if isinstance(cfg, dict) and depth < 20:
        if set(cfg) <= {"value", "desc"} and "value" in cfg:
            return flatten(cfg["value"], prefix, out, depth + 1)
        for k, v in cfg.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out, depth + 1)
    elif prefix:
        out[prefix] = cfg
    return out


def _number(v: object) -> float | None:
    v = _value(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _lookup(flat: Flat, keys: tuple[str, ...], top_only: bool = False) -> Hit | None:
    """The first of `keys` present, matched on the whole key or its last dotted part."""
    by_leaf: dict[str, Hit] = {}
    for k, v in flat.items():
        if top_only and "." in k:
            continue
        leaf = k.lower().rsplit(".", 1)[-1] if not k.lower().startswith("mlflow.") else k.lower()
        if leaf not in by_leaf or k.count(".") < by_leaf[leaf][0].count("."):
            by_leaf[leaf] = (k, v)
    for key in keys:
        if key in by_leaf and _value(by_leaf[key][1]) is not None:
            return by_leaf[key]
    return None


def _dtype(flat: Flat) -> tuple[str, str] | None:
    """Training precision: flags first (fp16/bf16/amp), then a precision name, then weights."""
    def get(*names: str) -> Hit | None:
        hit = _lookup(flat, names)
        return (hit[0], _value(hit[1])) if hit else None
    for flag, dtype in (("bf16", "bf16"), ("fp16", "fp16"), ("amp", "fp16"), ("half", "fp16")):
        hit = get(flag)
        if hit and hit[1] is True:
            return dtype, hit[0]
    hit = get("mixed_precision", "precision", "params_dtype", "dtype", "torch_dtype", "amp_dtype")
    if hit and hit[1] is not None:
        word = str(hit[1]).lower()
        for needle, dtype in (("bf16", "bf16"), ("bfloat16", "bf16"), ("16", "fp16"), ("half", "fp16"),
                              ("float32", "fp32"), ("fp32", "fp32"), ("32", "fp32")):
            if needle in word:
                return dtype, hit[0]
    f16, b16 = get("fp16"), get("bf16")
    if f16 and b16 and f16[1] is False and b16[1] is False:
        return "fp32", f"{f16[0]} and {b16[0]} both false"
    return None


def facts_of_config(flat: Flat, epoch_axis: bool = False,
                    total_hint: int | None = None) -> dict[str, Fact]:
    """{fact: (value, the key it came from)} for one flat config; `total_hint` is the total
    steps another config gave (HF: the ratio in training_args.json, the steps in trainer_state)."""
    out: dict[str, Fact] = {}
    for fact, keys in KEYS.items():
        hit = _lookup(flat, keys)
        if hit:
            out[fact] = (_value(hit[1]), hit[0])
    if "run_name" not in out:
        hit = _lookup(flat, ("name",), top_only=True)     # Ultralytics' `name: train2`
        if hit and isinstance(_value(hit[1]), str):
            out["run_name"] = (_value(hit[1]), hit[0])
    dtype = _dtype(flat)
    if dtype:
        out["dtype"] = dtype
    for fact in ("lr_max", "min_lr", "clip", "weight_decay"):
        if fact in out:
            v = _number(out[fact][0])
            if v is None or fact == "clip" and v <= 0:        # clip 0: clipping is off
                del out[fact]
            else:
                out[fact] = (v, out[fact][1])
    for fact in ("warmup_steps", "total_steps", "batch_size", "vocab_size"):
        if fact in out:
            v = _number(out[fact][0])
            if v is None or v < 0 or fact != "warmup_steps" and v == 0:
                del out[fact]
            else:
                out[fact] = (int(v), out[fact][1])
    _derived(flat, out, epoch_axis, total_hint)
    if "schedule" in out:
        out["schedule"] = (str(out["schedule"][0]).lower().rsplit(".", 1)[-1], out["schedule"][1])
    return out


def _derived(flat: Flat, out: dict[str, Fact], epoch_axis: bool, total_hint: int | None = None) -> None:
    """Facts a config states in other units: tokens, samples, ratios, epochs."""
    def num(*keys: str) -> tuple[str, float] | None:
        hit = _lookup(flat, keys)
        number = _number(hit[1]) if hit else None
        return (hit[0], number) if hit and number is not None else None

    # Samples become steps only at a fixed global batch size; tokens never do (a sequence-length
    # warmup or curriculum changes the tokens per step), so a warmup in tokens stays unknown.
    ramp = _lookup(flat, ("rampup_batch_size", "batch_size_rampup"))
    gbs = None if ramp and _value(ramp[1]) else num("global_batch_size")
    if "total_steps" not in out:
        for key in ("lr_decay_samples", "train_samples"):
            hit = num(key)
            if hit and gbs:
                out["total_steps"] = (int(hit[1] // gbs[1]), f"{hit[0]} / global_batch_size")
                break
        if "total_steps" not in out and epoch_axis:
            hit = num("epochs", "max_epochs", "num_epochs", "num_train_epochs")
            if hit:
                out["total_steps"] = (int(hit[1]), f"{hit[0]} (the steps are epochs)")
    if not out.get("warmup_steps", (0,))[0]:
        total = out["total_steps"][0] if "total_steps" in out else total_hint
        assert total is None or isinstance(total, int)        # facts_of_config made it an int
        for key, kind in (("warmup_ratio", "ratio"), ("lr_warmup_fraction", "ratio"),
                          ("lr_warmup_samples", "samples"), ("lr_warmup_tokens", "tokens"),
                          ("warmup_epochs", "epochs")):
            hit = num(key)
            if not hit or not hit[1]:
                continue
            if kind == "ratio" and total:
                out["warmup_steps"] = (int(math.ceil(hit[1] * total)), f"{hit[0]} x total steps")
            elif kind == "samples" and gbs:
                out["warmup_steps"] = (int(hit[1] // gbs[1]), f"{hit[0]} / global_batch_size")
            elif kind == "epochs" and epoch_axis:
                out["warmup_steps"] = (int(math.ceil(hit[1])), f"{hit[0]} (the steps are epochs)")
            else:
                if out.get("warmup_steps", (None,))[0] == 0:
                    del out["warmup_steps"]      # warmup 0 beside a ratio or tokens: unknown in steps
                continue
            break
    if "schedule" not in out:
        cos = _lookup(flat, ("cos_lr",))
        if cos is not None and _value(cos[1]) is not None:
            # Ultralytics: cosine when cos_lr, else its linear decay to lr0 * lrf
            out["schedule"] = ("cosine" if _value(cos[1]) else "linear", cos[0])
    if "min_lr" not in out and "lr_max" in out:
        lrf = num("lrf")
        if lrf:
            lr_max, lr_key = out["lr_max"]
            assert isinstance(lr_max, float)                   # facts_of_config made it a float
            out["min_lr"] = (lr_max * lrf[1], f"{lr_key} x {lrf[0]}")


# --- where the configs are ----------------------------------------------------

def _read_file(path: Path) -> Any:
    try:
        if not path.is_file() or path.stat().st_size > _BIG:
            return None
        text = path.read_text(errors="replace")
    except OSError:
        return None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        from postmortem.run import yamlconfig  # noqa: PLC0415 - PyYAML only for a run with a YAML config
        return yamlconfig.load(text)
    except (ValueError, RecursionError, Exception):       # a broken config never stops the read
        return None


def _run_dirs(log: RunLog) -> list[Path]:
    path = Path(log.source.path)
    base = path if path.is_dir() else path.parent
    dirs = [base]
    for f in log.source.files[:1]:
        d = Path(f) if Path(f).is_dir() else Path(f).parent
        if d not in dirs:
            dirs.insert(0, d)
        if d.name.startswith("checkpoint-") and d.parent not in dirs:
            dirs.append(d.parent)           # HF: the output dir above a checkpoint
    return dirs


def text_log_config(path: Path, limit: int = 4 << 20) -> Flat:
    """Argument dumps (`  lr ........ 3e-4`), `Namespace(...)` lines and fairseq's config dict in
    the head of a text log, as one flat dict."""
    try:
        with open(path, "rb") as f:
            head = encodings.decode(f.read(limit))
    except OSError:
        return {}
    out: Flat = {}
    # searched over the whole head at C speed: a text log of a million lines pays nothing here
    for marker, parse in (("Namespace(", _call_kwargs), ("{'_name'", _literal_dict)):
        at = head.find(marker)
        while at >= 0:
            line_end = head.find("\n", at)
            out.update(parse(head[at:line_end if line_end >= 0 else len(head)]))
            at = head.find(marker, at + 1)
    if "...." in head:
        for m in _DUMP.finditer(head):
            if len(m.group(1)) < 80:
                value = m.group(2).rstrip()
                trailer = _TRAILER.search(value) if "..." in value else None
                out.setdefault(m.group(1), (value[:trailer.start()] if trailer else value).strip())
    padded = _PADDED_VOCAB.search(head)
    if padded:
        out["vocab_size"] = padded.group(1)       # Megatron: the tokenizer's size before padding
    return out


def _literal_dict(text: str) -> Flat:
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
        return {}
    return flatten(value) if isinstance(value, dict) else {}


def _call_kwargs(text: str) -> Flat:
    """The keyword arguments of `Namespace(a=1, b='x', ...)` as data, never evaluated as code."""
    depth, end = 0, None
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch == ")":
            end = i + 1
            break
    try:
        call = ast.parse(text[:end] if end else text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    out: Flat = {}
    for kw in getattr(call, "keywords", []):
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, SyntaxError, RecursionError, TypeError):
            continue
    return out


def configs(log: RunLog) -> list[tuple[str, Flat]]:
    """(where, flat config) for every config the run carries, the most specific first."""
    extras = log.source.extras
    found: list[tuple[str, Flat]] = []
    if extras.get("tags"):
        found.append(("MLflow tags", {k: v for k, v in extras["tags"].items()}))
    if extras.get("params"):
        found.append(("MLflow params", dict(extras["params"])))
    if extras.get("config"):
        found.append(("W&B config.yaml", flatten(extras["config"])))
    if extras.get("hparams"):
        last = list(extras["hparams"])[-1]
        found.append((f"{last}/hparams.yaml", flatten(extras["hparams"][last])))
    if extras.get("args"):
        found.append(("the log's argument dump", dict(extras["args"])))
    if extras.get("preamble"):
        found.append(("the log's preamble", dict(extras["preamble"])))
    if not readers.structured(log.source.format):     # a text log's printed arguments
        for f in log.source.files[:1]:
            cfg = text_log_config(Path(f))
            if cfg:
                found.append(("the log's printed arguments", cfg))
    events = [Path(f) for f in log.source.files if "tfevents" in Path(f).name]
    if log.source.format == "hf-trainer-state":        # the same run's TensorBoard files
        for d in _run_dirs(log):
            events += sorted(d.glob("runs/**/events.out.tfevents*"))[:20]
    if events:
        found += [(w, flatten(c)) for w, c in tensorboard_configs(events)]
    seen: set[Path] = set()
    for d in _run_dirs(log):
        for name in _CONFIG_FILES:
            p = d / name
            if p in seen:
                continue
            seen.add(p)
            data = _read_file(p)
            if isinstance(data, dict):
                found.append((name if d == _run_dirs(log)[0] else f"{d.name}/{name}", flatten(data)))
    state: Flat = {k: extras[k] for k in ("max_steps", "train_batch_size", "num_train_epochs") if k in extras}
    if state:
        found.append(("trainer_state.json", state))
    return found


FACTS = ("run_name", "vocab_size", "lr_max", "min_lr", "warmup_steps", "schedule", "total_steps",
         "clip", "weight_decay", "dtype", "batch_size")


def apply(log: RunLog) -> None:
    """Fill the manifest's facts from the configs the run carries; manifest.json wins."""
    epoch_axis = str(log.source.extras.get("step_from", "")).startswith("epoch")
    facts: dict[str, tuple[object, str]] = {}
    found = configs(log)
    for where, flat in found:
        for fact, (value, key) in facts_of_config(flat, epoch_axis).items():
            if fact not in facts:
                facts[fact] = (value, f"{where}: {key}")
    total_fact = facts["total_steps"][0] if "total_steps" in facts else None
    assert total_fact is None or isinstance(total_fact, int)   # facts_of_config made it an int
    total = (log.manifest.config.total_steps if log.manifest and log.manifest.config else None) \
        or total_fact
    if "warmup_steps" not in facts and total:           # a ratio of a total another file gave
        for where, flat in found:
            hit = facts_of_config(flat, epoch_axis, total).get("warmup_steps")
            if hit:
                facts["warmup_steps"] = (hit[0], f"{where}: {hit[1]}")
                break
    m = log.manifest
    given = m.model_dump(exclude_none=True) if m else {}
    config_given = given.get("config", {})
    origins: dict[str, str] = {}
    for fact in FACTS:
        if fact in ("vocab_size", "dtype", "run_name"):
            mine = given.get("run_id" if fact == "run_name" else fact)
        else:
            mine = config_given.get(fact)
        if mine is not None:
            origins[fact] = "manifest.json"
    if not facts:
        if origins:
            log.source.extras["facts_from"] = origins
        return
    m = m.model_copy(deep=True) if m else RunManifest()
    cfg = m.config.model_copy() if m.config else RunConfig()
    for fact, (value, where) in facts.items():
        if fact in origins:
            continue
        if fact == "run_name":
            log.source.extras["run_name"] = str(value)
        elif fact in ("vocab_size", "dtype"):
            setattr(m, fact, value)
        else:
            setattr(cfg, fact, value)
        origins[fact] = where
    m.config = cfg
    log.manifest = m
    log.source.extras["facts_from"] = {f: origins[f] for f in FACTS if f in origins}
