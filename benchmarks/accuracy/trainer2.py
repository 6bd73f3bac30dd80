"""A second trainer, not the mini-GPT lab's: a character-level MLP language model (Bengio-style:
the embeddings of the last `context` characters, concatenated, through one hidden layer) on a
generated word corpus, Adam with its own betas, no gradient clipping, linear decay, fp16 with a
real `torch.amp.GradScaler` on CPU autocast. It trains for real and fails for real on request.

`train(spec)` returns one record per optimizer step (a resumed run's records go back in steps,
as an appended log does) and the model, so a fine-tune can start from it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import nn

PAD = 0
LOWER = "abcdefghijklmnopqrstuvwxyz"
RARE = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"   # seen only in rare names
ALPHABET = "\0 ." + LOWER + RARE
VOCAB = len(ALPHABET)                          # 65; ln V = 4.17
INDEX = {c: i for i, c in enumerate(ALPHABET)}

KINDS = ("healthy", "long-tail-token", "fp16-overflow", "lr-discontinuity", "optimizer-reset",
         "numerics", "schedule-misconfigured", "noisy-healthy", "fine-tune", "short",
         "fp16-persistent")


@dataclass(frozen=True)
class Spec:
    """One run: the model, data and optimizer settings, and the one failure injected."""

    kind: str = "healthy"
    seed: int = 0
    steps: int = 500
    batch: int = 256               # contexts per step
    context: int = 8
    embd: int = 16
    hidden: int = 192
    lr: float = 4e-3
    min_lr: float = 4e-4
    warmup: int = 30
    betas: tuple[float, float] = (0.8, 0.99)
    optimizer: str = "adam"        # adam | sgd (momentum 0.9, Nesterov)
    dtype: str = "fp32"            # fp32 | fp16
    growth_interval: int = 40      # GradScaler: doublings after this many clean steps
    init_scale: float = 2.0 ** 16
    at: int = 300                  # where the injection starts
    length: int = 1
    factor: float = 1.0
    resume_from: int = 0           # optimizer-reset: the checkpoint the crashed run resumes from
    corpus_seed: int = 0
    eval_every: int = 50
    base_steps: int = 400          # fine-tune: steps of the pretraining run it starts from
    schedule: str = "linear"       # the configured decay: linear | cosine
    # short: the LR climbs from this step on, towards climb_factor x lr at the last step
    climb_from: int = 0
    climb_factor: float = 1.0
    # the loss scaler: growth 2 / backoff 0.5 is dynamic scaling; 1 / 1 a static --loss-scale
    # (overflowing steps are still skipped); scale_floor: DeepSpeed's min_loss_scale
    scale_growth: float = 2.0
    scale_backoff: float = 0.5
    scale_floor: float = 0.0
    # fp16-persistent: the share of steps (from `at` on) whose activations overflow fp16 at any
    # scale (a sum-for-mean bug x `factor`)
    overflow_share: float = 0.0


# --- corpus ---------------------------------------------------------------------------------

def _lexicon(rng: np.random.Generator, n: int) -> list[str]:
    words = set()
    while len(words) < n:
        k = int(rng.integers(2, 8))
        words.add("".join(rng.choice(list(LOWER), k)))
    return sorted(words)


def corpus(seed: int, n_chars: int = 200_000, shift: int = 0) -> np.ndarray:
    """Sentences of Zipf-distributed words with a word-bigram preference, lower case; one name
    in ~3000 words is an upper-case/digit token (the long tail). `shift` re-weights the words
    (a fine-tune's corpus: the same language, another domain)."""
    rng = np.random.default_rng(seed)
    words = _lexicon(rng, 300)
    zipf = 1.0 / np.arange(1, len(words) + 1) ** 1.1
    if shift:
        zipf = np.roll(zipf, shift)
    zipf /= zipf.sum()
    follow = rng.integers(0, len(words), size=(len(words), 3))   # each word's likely successors
    out, prev, n = [], 0, 0
    while n < n_chars:
        length = int(rng.integers(4, 12))
        sent = []
        for _ in range(length):
            if rng.random() < 1 / 3000:
                w = "".join(rng.choice(list(RARE), int(rng.integers(3, 7))))
            else:
                prev = int(follow[prev, rng.integers(0, 3)]) if rng.random() < 0.5 else \
                    int(rng.choice(len(words), p=zipf))
                w = words[prev]
            sent.append(w)
        s = " ".join(sent) + ". "
        out.append(s)
        n += len(s)
    text = "".join(out)[:n_chars]
    return np.array([INDEX[c] for c in text], dtype=np.int64)


def rare_junk(rng: np.random.Generator, n: int) -> np.ndarray:
    """A shard of long-tail tokens: upper case and digits, the corpus' rarest characters."""
    return np.array([INDEX[c] for c in rng.choice(list(RARE), n)], dtype=np.int64)


# --- model ----------------------------------------------------------------------------------

class CharMLP(nn.Module):
    """Embeddings of the context, RMS-normalised (hand-written, no epsilon: the latent bug
    an all-padding row turns into 0/0), one GELU layer, logits."""

    def __init__(self, spec: Spec):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, spec.embd, padding_idx=PAD)
        self.fc = nn.Linear(spec.context * spec.embd, spec.hidden)
        self.out = nn.Linear(spec.hidden, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.emb(x).flatten(1)
        e = e / e.pow(2).mean(-1, keepdim=True).sqrt()
        return self.out(nn.functional.gelu(self.fc(e)))


# --- schedule -------------------------------------------------------------------------------

def scheduled_lr(spec: Spec, step: int) -> float:
    """What the config says: linear warmup, then linear (or cosine) decay to min_lr."""
    if step < spec.warmup:
        return spec.lr * (step + 1) / spec.warmup
    progress = min(1.0, (step - spec.warmup) / max(1, spec.steps - spec.warmup))
    if spec.schedule == "cosine":
        return spec.min_lr + (spec.lr - spec.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
    return spec.lr - (spec.lr - spec.min_lr) * progress


def applied_lr(spec: Spec, step: int) -> float:
    """The LR the run really used, with the injected scheduler bugs."""
    lr = scheduled_lr(spec, step)
    if spec.kind in ("lr-discontinuity", "short") and spec.at <= step < spec.at + spec.length:
        lr *= spec.factor
    if spec.climb_from and step >= spec.climb_from:
        # a warm restart gone wrong: the LR climbs for 15 steps, then holds
        progress = min(1.0, (step - spec.climb_from) / 15)
        lr = scheduled_lr(spec, spec.climb_from) * (1 + (spec.climb_factor - 1) * progress)
    if spec.kind == "schedule-misconfigured" and step >= spec.warmup:
        # The decay's progress used with the wrong sign: the LR climbs towards factor x lr.
        progress = (step - spec.warmup) / max(1, spec.steps - spec.warmup)
        lr = spec.lr + (spec.lr * spec.factor - spec.lr) * progress
    return lr


# --- training -------------------------------------------------------------------------------

@dataclass
class Result:
    spec: Spec
    records: list[dict]
    model: CharMLP
    meta: dict = field(default_factory=dict)


class _Data:
    def __init__(self, spec: Spec):
        # A fine-tune's data: the same words, other frequencies (another domain).
        shift = 10 if spec.kind == "fine-tune" else 0
        self.tokens = torch.from_numpy(corpus(spec.corpus_seed, shift=shift))
        self.val = self.tokens[-20_000:]
        self.train = self.tokens[:-20_000]
        self.spec = spec

    def batch(self, step: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed * 100_003 + step)
        c = self.spec.context
        starts = torch.randint(0, len(self.train) - c - 1, (self.spec.batch,), generator=g)
        idx = starts[:, None] + torch.arange(c + 1)
        rows = self.train[idx]
        return rows[:, :-1], rows[:, -1]

    def val_batches(self):
        c = self.spec.context
        starts = torch.arange(0, 4096 * 4, 4)
        rows = self.val[starts[:, None] + torch.arange(c + 1)]
        return rows[:, :-1], rows[:, -1]


def _inject_batch(spec: Spec, step: int, x: torch.Tensor, y: torch.Tensor):
    if spec.kind == "long-tail-token" and spec.at <= step < spec.at + spec.length:
        rng = np.random.default_rng(spec.seed * 7 + step)
        n = int(len(x) * spec.factor)               # factor: share of the batch that is junk
        junk = torch.from_numpy(rare_junk(rng, n * (spec.context + 1))).view(n, -1)
        x, y = x.clone(), y.clone()
        x[:n], y[:n] = junk[:, :-1], junk[:, -1]
    if spec.kind == "numerics" and step >= spec.at:
        # The collate bug: short sequences padded with PAD; all-padding contexts meet the
        # normalisation that has no epsilon.
        x = x.clone()
        x[: max(1, int(len(x) * 0.05))] = PAD
    return x, y


def train(spec: Spec, base: CharMLP | None = None) -> Result:
    """Train one run. `base`: the model a fine-tune starts from."""
    torch.manual_seed(spec.seed)
    data = _Data(spec)
    model = CharMLP(spec)
    if spec.kind == "fine-tune":
        if base is None:
            base = train(replace(spec, kind="healthy", steps=spec.base_steps, seed=spec.seed + 1000,
                                 dtype="fp32")).model
        model.load_state_dict(base.state_dict())

    def new_opt():
        if spec.optimizer == "sgd":
            return torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=0.9, nesterov=True)
        return torch.optim.Adam(model.parameters(), lr=spec.lr, betas=spec.betas, eps=1e-7)

    opt = new_opt()
    fp16 = spec.dtype == "fp16"
    scaler = torch.amp.GradScaler("cpu", enabled=fp16, init_scale=spec.init_scale,
                                  growth_interval=spec.growth_interval)
    static = spec.scale_growth == 1.0 and spec.scale_backoff == 1.0     # a fixed --loss-scale
    overflow_rng = np.random.default_rng(spec.seed * 13 + 1)
    records: list[dict] = []
    checkpoints: dict[int, dict] = {}
    crash = spec.at if spec.kind == "optimizer-reset" else None
    step = 0
    while step < spec.steps:
        if crash is not None and step == crash:
            # The crash: resume from an earlier checkpoint with the model restored but a fresh
            # Adam (m, v and its step count reset); the log carries on from that step.
            model.load_state_dict(checkpoints[spec.resume_from]["model"])
            opt = new_opt()
            step, crash = spec.resume_from, None
            continue
        if step % 50 == 0:
            checkpoints[step] = {"model": {k: v.clone() for k, v in model.state_dict().items()}}
        t0 = time.perf_counter()
        lr = applied_lr(spec, step)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = _inject_batch(spec, step, *data.batch(step, spec.seed))
        with torch.autocast("cpu", dtype=torch.float16, enabled=fp16):
            logits = model(x)
        per_token = nn.functional.cross_entropy(logits.float(), y, reduction="none")
        loss = per_token.mean()
        if spec.kind == "fp16-overflow" and spec.at <= step < spec.at + spec.length:
            # The loss-weighting bug: a sum where a mean was meant, gradients x batch.
            train_loss = per_token.sum() * spec.factor
        elif spec.kind == "fp16-persistent" and step >= spec.at and overflow_rng.random() < spec.overflow_share:
            # activations out of fp16's range whatever the scale: inf in the gradients
            train_loss = loss * float("inf")
        else:
            train_loss = loss
        scaler.scale(train_loss).backward()
        scaler.unscale_(opt)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")))
        scale_before = scaler.get_scale() if fp16 else None
        scaler.step(opt)
        skipped = bool(fp16 and not math.isfinite(grad_norm))
        scaler.update()
        if fp16 and static:
            scaler.update(new_scale=spec.init_scale)       # skips, never halves nor grows
        elif fp16 and spec.scale_floor and scaler.get_scale() < spec.scale_floor:
            scaler.update(new_scale=spec.scale_floor)      # at the floor: skips, no halving
        opt.zero_grad(set_to_none=True)
        row = {"step": step, "loss": float(loss.detach()), "grad_norm": grad_norm, "lr": lr,
               "tokens": (step + 1) * spec.batch, "time_ms": (time.perf_counter() - t0) * 1e3}
        if fp16:
            row["loss_scale"] = scale_before
            row["skipped"] = int(skipped or scaler.get_scale() < scale_before)
        if step % spec.eval_every == 0 or step == spec.steps - 1:
            row["val_loss"] = _val_loss(model, data, fp16)
        records.append(row)
        step += 1
    return Result(spec, records, model, meta=_meta(spec))


@torch.no_grad()
def _val_loss(model: CharMLP, data: _Data, fp16: bool) -> float:
    x, y = data.val_batches()
    with torch.autocast("cpu", dtype=torch.float16, enabled=fp16):
        logits = model(x)
    return float(nn.functional.cross_entropy(logits.float(), y))


def _meta(spec: Spec) -> dict:
    """The run's config as a manifest carries it: what the user configured, not the bug."""
    # Megatron's arguments: --loss-scale fixes the scale (static); unset, the scaler is dynamic
    scaling = {} if spec.dtype != "fp16" else (
        {"loss_scale": spec.init_scale} if spec.scale_growth == 1 and spec.scale_backoff == 1 else
        {"loss_scale": None, "initial_loss_scale": spec.init_scale,
         **({"min_loss_scale": spec.scale_floor} if spec.scale_floor else {})})
    return {"vocab_size": VOCAB, "dtype": spec.dtype,
            "config": {"lr_max": spec.lr, "min_lr": spec.min_lr, "warmup_steps": spec.warmup,
                       "schedule": spec.schedule, "total_steps": spec.steps, "batch_size": spec.batch,
                       "clip": None, "weight_decay": 0.0, "optimizer": spec.optimizer,
                       **({"betas": list(spec.betas)} if spec.optimizer == "adam" else {"momentum": 0.9}), "context": spec.context, "hidden": spec.hidden,
                       "init_from": "pretrained" if spec.kind == "fine-tune" else None, **scaling}}


def ln_vocab() -> float:
    return math.log(VOCAB)


# --- the divergence shapes' data (issue 25b) ------------------------------------------------
# Kept below this line: the records cache (synthetic._trained) hashes the trainer above it, so
# the runs trained before these shapes keep their cached records.
SHAPES_MARK = "# --- the divergence shapes' data"


class _SmallData(_Data):
    """A corpus small enough to learn by heart (3,000 characters): the train loss keeps
    falling while the validation loss, on held-out text, rises (overfitting)."""

    def __init__(self, spec: Spec):
        self.tokens = torch.from_numpy(corpus(spec.corpus_seed, n_chars=23_000))
        self.val = self.tokens[-20_000:]
        self.train = self.tokens[:-20_000]
        self.spec = spec


class _ShiftedData(_Data):
    """A data-mix change at `spec.at`: a share `spec.factor` of each batch comes from another
    corpus (other words, other frequencies) from there on; the loss rises and comes back as
    the model learns it."""

    def __init__(self, spec: Spec):
        super().__init__(spec)
        self.other = torch.from_numpy(corpus(spec.corpus_seed + 7, shift=40))

    def batch(self, step: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = super().batch(step, seed)
        if step < self.spec.at:
            return x, y
        g = torch.Generator().manual_seed(seed * 100_003 + step + 1)
        c, n = self.spec.context, int(self.spec.batch * self.spec.factor)
        starts = torch.randint(0, len(self.other) - c - 1, (n,), generator=g)
        rows = self.other[starts[:, None] + torch.arange(c + 1)]
        x, y = x.clone(), y.clone()
        x[:n], y[:n] = rows[:, :-1], rows[:, -1]
        return x, y


DATA = {"small": _SmallData, "shifted": _ShiftedData}


def train_on(spec: Spec, data: str) -> Result:
    """`train(spec)` on another data source (`DATA`): the training loop is the same one."""
    global _Data
    plain = _Data
    _Data = DATA[data]          # (train builds its data from this name)
    try:
        return train(spec)
    finally:
        _Data = plain
