"""Text logs: Megatron(-DeepSpeed), DeepSpeed, fairseq, nanoGPT, llm.c, modded-nanogpt,
torchtitan, HF console dicts and `key: value | ...` lines.

A file is sniffed line by line; the dialect with the most matching lines
parses it, with the DeepSpeed loss-scaler lines as a companion to any dialect.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from postmortem.run.assemble import Collector, Series, to_number
from postmortem.run.model import RunReadError, Source

# A number as logs print it: 1,234 (torchtitan), 8.2E+00 (Megatron), nan, -nan, inf.
NUM = (r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
       r"|nan|NaN|inf|Inf)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RANK_PREFIX = re.compile(r"^\s*(?:\[default\d+\]:|\[rank\d+\]:|\d+:(?=\s)|\[\d+\]:)\s*")

MEGATRON = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+\s*\|(.*)$")
MEGATRON_VAL = re.compile(r"\b(?:validation|valid) loss at iteration\s+(\d+)\s*(?:on [^|]*)?\|(.*)$")
MEGATRON_ARG = re.compile(r"^\s*([a-z_0-9]+) \.{3,} (\S.*?)\s*$")
DS_STEP = re.compile(r"\[Rank 0\] step=(\d+), skipped=(\d+), lr=\[([^\]]*)\]")
DS_OVERFLOW = re.compile(r"(?:OVERFLOW!|overflow!).*?Attempted loss scale: (" + NUM + r")"
                         r"(?:, reducing to (" + NUM + r"))?")
DS_OVERFLOW_RANK = re.compile(r"OVERFLOW! Rank (\d+)")
DS_REDUCE = re.compile(r"Reducing dynamic loss scale from (" + NUM + r") to (" + NUM + r")")
DS_PPL = re.compile(r"^ppl: (" + NUM + r")\s*$")
FAIRSEQ_JSON = re.compile(r"\|\s*(train_inner|valid|train)\s*\|\s*(\{.*\})\s*$")
FAIRSEQ_SIMPLE = re.compile(r"epoch \d+:\s+\d+\s*/\s*\d+\s+(.*=.*)$")
NANOGPT_ITER = re.compile(r"^iter (\d+): loss (" + NUM + r")(?:, time (" + NUM + r")ms)?(?:, mfu (" + NUM + r")%)?")
NANOGPT_EVAL = re.compile(r"^step (\d+): train loss (" + NUM + r"), val loss (" + NUM + r")")
LLMC = re.compile(r"^s:(\d+) ((?:\w+:" + NUM + r"\s*)+)$")
MODDED = re.compile(r"^step:(\d+)/\d+ (.*)$")
TITAN = re.compile(r"\bstep:\s*(\d+)\s+(loss:\s*" + NUM + r".*)$")
HF_DICT = re.compile(r"\{'(?:loss|eval_loss|train_runtime|grad_norm|learning_rate)'.*\}")
PIPE_KV = re.compile(r"(?:^|\|)\s*step:\s*(\d+)\s*\|(.*)$")
REWARD = re.compile(r"average reward score: (" + NUM + r")")

KV_COLON = re.compile(r"([A-Za-z_][\w./()\- ]*?):\s*(" + NUM + r")(ms|s|%)?(?=\s|$|\||,)")
KV_EQUALS = re.compile(r"([A-Za-z_][\w./]*)=(" + NUM + r")")

# dialect -> the patterns whose hits vote for it
SNIFF = {
    "megatron": (MEGATRON, MEGATRON_VAL),
    "deepspeed": (DS_STEP,),
    "fairseq": (FAIRSEQ_JSON, FAIRSEQ_SIMPLE),
    "nanogpt": (NANOGPT_ITER, NANOGPT_EVAL),
    "llm.c": (LLMC,),
    "modded-nanogpt": (MODDED,),
    "torchtitan": (TITAN,),
    "hf-console": (HF_DICT,),
    "kv-pipe": (PIPE_KV,),
}
MIN_HITS = 3


def clean(line: str) -> str:
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if line[:1] in "[0123456789 ":
        line = _RANK_PREFIX.sub("", line)
    return line.rstrip()


def iter_lines(path: Path) -> Iterator[str]:
    """Lines with tqdm's carriage-return overwrites split apart, prefixes and colours removed."""
    with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
        for raw in f:
            for part in raw.replace("\r\n", "\n").split("\r"):
                if part.strip():
                    yield clean(part)


def sniff(path: Path, max_lines: int = 200_000, enough: int = 200) -> tuple[str | None, int]:
    """The dialect with the most matching lines (at least MIN_HITS), and its count.

    Stops as soon as one dialect has `enough` lines: a code dump or a preamble
    before the log (modded-nanogpt, DeepSpeed launchers) only delays it.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None, 0
    if b"\x00" in head:
        return None, 0
    hits = dict.fromkeys(SNIFF, 0)
    for i, line in enumerate(iter_lines(path)):
        if i >= max_lines:
            break
        for dialect, patterns in SNIFF.items():
            if any(p.search(line) for p in patterns):
                hits[dialect] += 1
                if hits[dialect] >= enough:
                    return dialect, hits[dialect]
    best = max(hits, key=hits.get)
    return (best, hits[best]) if hits[best] >= MIN_HITS else (None, hits[best])


def _pairs(text: str) -> dict[str, str]:
    """`key: value | key: value` -> {key: value}, units (ms, s, %) folded into the key."""
    out = {}
    for part in text.split("|"):
        if ":" not in part:
            continue
        key, _, value = part.partition(":")
        key, value = key.strip(), value.strip()
        if not key or not value:
            continue
        out[key] = value
    return out


def _kv_tokens(text: str, pattern: re.Pattern) -> dict[str, str]:
    out = {}
    for m in pattern.finditer(text):
        key = m.group(1).strip()
        unit = m.group(3) if pattern is KV_COLON and m.lastindex and m.lastindex >= 3 else None
        if unit == "ms":
            key += "_ms"
        elif unit == "%":
            key += "_pct"
        out[key] = m.group(2)
    return out


class _Parse:
    """Records of one file: (step, {metric: raw value}) in order, plus loss-scaler events."""

    def __init__(self, path: Path, source: Source):
        self.path, self.source = path, source
        self.out = Collector(source)
        self.step: int | None = None
        self.overflows = 0
        self.scale_after: float | None = None
        self.overflow_ranks: set[str] = set()
        self.omitted_loss: list[int] = []
        self.args: dict[str, str] = {}
        self.ds_steps_seen: dict[int, int] = {}

    def add(self, step: int, values: dict) -> None:
        if self.overflows and "overflows" not in values:
            # DeepSpeed prints the scaler's overflows before the step line they belong to.
            values = {**values, "overflows": self.overflows}
            if self.scale_after is not None and "loss scale" not in values:
                values["loss_scale"] = self.scale_after
            self.overflows = 0
        self.out.add(step, values)
        self.step = step

    def attach(self, values: dict) -> None:
        """Values that belong to the current step (an eval, a reward) without moving it."""
        self.out.add(self.step or 0, values)

    def overflow(self, line: str) -> bool:
        if "OVERFLOW" not in line and "overflow" not in line and "Reducing dynamic" not in line:
            return False
        m = DS_OVERFLOW.search(line)
        if m:
            rank = DS_OVERFLOW_RANK.search(line)
            if rank and rank.group(1) != "0":
                self.overflow_ranks.add(rank.group(1))
                return True
            self.overflows += 1
            if m.group(2):
                self.scale_after = to_number(m.group(2))
            return True
        m = DS_REDUCE.search(line)
        if m:
            self.overflows += 1
            self.scale_after = to_number(m.group(2))
            return True
        return False


def _megatron(p: _Parse, line: str) -> None:
    m = MEGATRON.search(line)
    if m:
        step = int(m.group(1))
        values = _pairs(m.group(2))
        nan_iters = to_number(values.get("number of nan iterations", "0")) or 0
        if not any(k.endswith("loss") for k in values):
            p.omitted_loss.append(step)
            if nan_iters:
                # Megatron averages the loss over non-NaN iterations only; with all of
                # them NaN the key vanishes. That is a logged NaN, not a missing value.
                values["lm loss"] = "nan"
        p.add(step, values)
        return
    m = MEGATRON_VAL.search(line)
    if m:
        values = _pairs(m.group(2))
        out = {}
        for key, value in values.items():
            key = key.replace(" value", "")
            out["val_loss" if key == "lm loss" else f"val {key}"] = value
        p.add(int(m.group(1)), out)
        return
    m = MEGATRON_ARG.match(line)
    if m and p.step is None:
        p.args[m.group(1)] = m.group(2)


def _deepspeed(p: _Parse, line: str) -> None:
    m = DS_STEP.search(line)
    if m:
        step = int(m.group(1))
        # Two engines (RLHF actor and critic) print the same step: keep them apart.
        k = p.ds_steps_seen[step] = p.ds_steps_seen.get(step, 0) + 1
        prefix = "" if k == 1 else f"engine{k}/"
        lrs = [x for x in m.group(3).split(",") if x.strip()]
        values = {f"{prefix}skipped_total": m.group(2)}
        if lrs:
            values[f"{prefix}lr"] = lrs[0]
        p.add(step, values)
        return
    m = DS_PPL.match(line)
    if m:   # the eval before any training step counts as step 0
        p.attach({"val_ppl": m.group(1)})


def _fairseq(p: _Parse, line: str) -> None:
    m = FAIRSEQ_JSON.search(line)
    if m:
        try:
            data = json.loads(m.group(2))
        except json.JSONDecodeError:
            return
        step = to_number(data.get("num_updates"))
        if step is None or step != step:
            return
        kind = m.group(1)
        if kind == "train":         # the epoch's averages: not a step value
            p.source.extras.setdefault("epoch_summaries", []).append(data)
            return
        drop = {"num_updates", "epoch", "update"}
        values = {(k if kind == "train_inner" else k if k.startswith("valid_") else f"valid_{k}"): v
                  for k, v in data.items() if k not in drop}
        p.add(int(step), values)
        return
    m = FAIRSEQ_SIMPLE.search(line)
    if m:
        values = _kv_tokens(m.group(1), KV_EQUALS)
        step = to_number(values.pop("num_updates", None) or "nan")
        if step is not None and step == step:
            p.add(int(step), values)


def _nanogpt(p: _Parse, line: str) -> None:
    m = NANOGPT_ITER.match(line)
    if m:
        values = {"loss": m.group(2)}
        if m.group(3):
            values["time_ms"] = m.group(3)
        if m.group(4):
            values["mfu_pct"] = m.group(4)
        p.add(int(m.group(1)), values)
        return
    m = NANOGPT_EVAL.match(line)
    if m:
        p.add(int(m.group(1)), {"eval_train_loss": m.group(2), "val_loss": m.group(3)})


_UNITS = (("ms", "_ms"), ("%", "_pct"))


def _colon_tokens(tokens: list[str]) -> dict[str, str]:
    """`trl:3.45 train_time:196649ms mfu:40%` -> {trl: 3.45, train_time_ms: 196649, mfu_pct: 40}."""
    out = {}
    for tok in tokens:
        key, sep, value = tok.partition(":")
        if not sep or not value:
            continue
        for unit, suffix in _UNITS:
            if value.endswith(unit):
                value, key = value[: -len(unit)], key + suffix
                break
        out[key] = value
    return out


def _llmc(p: _Parse, line: str) -> None:
    if line.startswith("s:") and LLMC.match(line):
        tokens = line.split()
        p.add(int(tokens[0][2:]), _colon_tokens(tokens[1:]))


def _modded(p: _Parse, line: str) -> None:
    m = MODDED.match(line) if line.startswith("step:") else None
    if m:
        values = _colon_tokens(m.group(2).split())
        if "val_loss" in values:    # the timings on an eval line are the eval's
            values = {k if k == "val_loss" else f"val_{k}": v for k, v in values.items()}
        p.add(int(m.group(1)), values)


def _titan(p: _Parse, line: str) -> None:
    m = TITAN.search(line)
    if m:
        p.add(int(m.group(1)), _kv_tokens(m.group(2), KV_COLON))


_HF_PAIR = re.compile(r"'([^']+)':\s*(" + NUM + r"|'[^']*')")


def _hf_console(p: _Parse, line: str) -> None:
    m = HF_DICT.search(line)
    if not m:
        return
    values = {k: v.strip("'") for k, v in _HF_PAIR.findall(m.group(0))}
    if "train_runtime" in values:
        p.source.extras["summary"] = values
        return
    # Console dicts carry no step: train dicts are counted; eval dicts join the last one.
    if "loss" in values or "grad_norm" in values:
        p.add((p.step or 0) + 1, values)
    else:
        p.attach({k: v for k, v in values.items() if k != "epoch"})


def _kv_pipe(p: _Parse, line: str) -> None:
    m = PIPE_KV.search(line)
    if m:
        values = _pairs(m.group(2))
        p.add(int(m.group(1)), values)
        return
    m = REWARD.search(line)
    if m and p.step is not None:
        p.attach({"reward": m.group(1)})


PARSERS = {
    "megatron": _megatron, "deepspeed": _deepspeed, "fairseq": _fairseq, "nanogpt": _nanogpt,
    "llm.c": _llmc, "modded-nanogpt": _modded, "torchtitan": _titan, "hf-console": _hf_console,
    "kv-pipe": _kv_pipe,
}


def _dtype_from_args(args: dict[str, str]) -> str | None:
    if args.get("bf16") == "True":
        return "bf16"
    if args.get("fp16") == "True":
        return "fp16"
    if args.get("fp16") == "False" and args.get("bf16") == "False":
        return "fp32"
    return None


def read_text_log(path: Path, source: Source, dialect: str) -> list[Series]:
    parse = PARSERS[dialect]
    p = _Parse(path, source)
    for line in iter_lines(path):
        if p.overflow(line):
            continue
        parse(p, line)
    if not p.out.count:
        raise RunReadError(path, f"no {dialect} metric lines")
    source.extras["dialect"] = dialect
    if p.args:
        source.extras["args"] = p.args
        dtype = _dtype_from_args(p.args)
        if dtype:
            source.extras["dtype"] = dtype
    if dialect == "megatron":
        source.warn("Megatron leaves a NaN loss out of its line (it averages over non-NaN "
                    "iterations): see nan_iterations")
        if p.omitted_loss:
            source.warn(f"{len(p.omitted_loss)} iteration line(s) without a loss "
                        f"(first at {p.omitted_loss[0]})")
    if p.overflow_ranks:
        source.warn(f"OVERFLOW lines from ranks {', '.join(sorted(p.overflow_ranks))} "
                    f"besides rank 0 were not counted twice")
    if any(k > 1 for k in p.ds_steps_seen.values()):
        source.warn("two DeepSpeed engines print the same steps (e.g. RLHF actor and critic): "
                    "the second one's columns are prefixed engine2/; loss_scale left out")
        p.out.drop("loss_scale")
    if dialect == "hf-console":
        source.warn("HF console lines carry no step: steps are the ordinal of each logged line")
    return _postprocess(p.out.series(), source)


def _postprocess(series: list[Series], source: Source) -> list[Series]:
    out = []
    for s in series:
        name = s.name.lower()
        zero = s.value == 0 if s.value.dtype != object else np.zeros(len(s.value), bool)
        if name in ("grad norm", "grad_norm", "norm") and len(s.value) and zero.mean() > 0.5:
            # Megatron prints 0.000 when it does not compute the norm: that is "not logged".
            source.warn(f"{s.name} is 0.000 on {int(zero.sum())} of {len(zero)} lines: not "
                        f"computed there; those zeros are left out")
            if zero.all():
                continue
            s = Series(s.name, s.order[~zero], s.step[~zero], s.value[~zero])
        if name in ("skipped_total",) and len(s.value):
            # DeepSpeed's counter is cumulative: the canonical column is per interval.
            per = np.diff(s.value, prepend=0.0)
            per[per < 0] = s.value[per < 0]
            out.append(Series("skipped", s.order, s.step, per))
        if name == "number of nan iterations":
            s = Series("nan_iterations", s.order, s.step, s.value)
        out.append(s)
    return out


def looks_like_text(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(8192)
    except OSError:
        return False
    if not head or b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        return err.start > len(head) - 4     # a multi-byte char cut at the edge
    return True


