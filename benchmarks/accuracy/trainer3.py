"""The third trainer (`run.py --set diverge3`, REPORTING ONLY): runs that diverge for real causes.

Unlike the mini-GPT lab and `trainer2.py` (a torch char-level MLP language model), this one is
plain numpy: a 2-layer ReLU MLP (16 -> 64 -> 8) classifying points labelled by a random tanh
teacher network (with label noise), cross-entropy, hand-written Adam (optional decoupled weight
decay) or SGD with momentum, no clipping, real LR schedules (linear warmup, cosine or constant).

Failures (SGD with momentum 0.9), each a real cause in the optimiser's settings, nothing injected into the loss:
- `lr-too-high`: a constant peak LR (after a 300-step warmup) the model cannot take: the loss falls through warmup, then
  climbs and blows up (cause `lr-too-high`);
- `cosine-wrap`: the cosine's `T_max` set to half the run (a restart config copied from a
  shorter run): past it the LR climbs back to its peak and the loss climbs (`schedule-misconfigured`);
- `late-bump`: from a step on the LR is x`factor` for good (a resume that reloaded the peak LR of
  another config) (`lr-discontinuity`);
Controls: healthy, small-batch noisy, a plateau (a tiny LR), a new data phase (a third of each
batch from another region of the inputs from a step on: the loss rises a little and comes back).

Each run is written in two of five formats (a CSV table, HF console dicts, a Lightning tqdm bar,
a Keras epoch log, JSONL) at an interval of 1, 10 or 50; labels from the trainer's own truth.
    python benchmarks/accuracy/trainer3.py          # writes benchmarks/data/diverge3 + labels
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "benchmarks" / "data" / "diverge3"
LABELS = HERE / "labels" / "diverge3.json"
sys.path.insert(0, str(HERE))

D_IN, HIDDEN, CLASSES = 16, 64, 8
STEPS_PER_EPOCH = 50


@dataclass
class Spec:
    kind: str = "healthy"
    seed: int = 0
    steps: int = 800
    batch: int = 64
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup: int = 50
    schedule: str = "cosine"     # cosine | constant
    t_max: int = 0               # the cosine's period as configured (0: the run's length)
    optimizer: str = "adam"      # adam | sgd
    weight_decay: float = 0.0
    label_noise: float = 0.1
    at: int = 0                  # late-bump / data-phase: from this step on
    factor: float = 1.0


def lr_at(spec: Spec, step: int) -> float:
    """The LR the run used: warmup, then its schedule (with the run's own misconfiguration)."""
    if step < spec.warmup:
        return spec.lr * (step + 1) / spec.warmup
    if spec.schedule == "constant":
        lr = spec.lr
    else:
        t_max = spec.t_max or (spec.steps - spec.warmup)
        # torch's CosineAnnealingLR closed form: past T_max the cosine climbs back to the peak
        lr = spec.min_lr + (spec.lr - spec.min_lr) * 0.5 * (1 + math.cos(math.pi * (step - spec.warmup) / t_max))
    if spec.kind == "late-bump" and step >= spec.at:
        lr *= spec.factor
    return lr


class Teacher:
    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        self.w1 = rng.normal(0, 1.5 / math.sqrt(D_IN), (D_IN, 32))
        self.w2 = rng.normal(0, 2.0 / math.sqrt(32), (32, CLASSES))

    def labels(self, x: np.ndarray) -> np.ndarray:
        return np.argmax(np.tanh(x @ self.w1) @ self.w2, axis=1)


def train(spec: Spec) -> list[dict]:
    rng = np.random.default_rng(spec.seed)
    teacher = Teacher(1000 + spec.seed % 3)
    p = {"w1": rng.normal(0, math.sqrt(2 / D_IN), (D_IN, HIDDEN)), "b1": np.zeros(HIDDEN),
         "w2": rng.normal(0, math.sqrt(1 / HIDDEN), (HIDDEN, CLASSES)), "b2": np.zeros(CLASSES)}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(v) for k, v in p.items()}
    xv = np.random.default_rng(99).normal(size=(1024, D_IN))
    yv = teacher.labels(xv)
    records = []
    with np.errstate(all="ignore"):
        for step in range(spec.steps):
            x = rng.normal(size=(spec.batch, D_IN))
            y = teacher.labels(x)
            if spec.kind == "data-phase" and step >= spec.at:
                # a new data phase: a share of each batch from another region of the input space
                n = int(spec.batch * spec.factor)
                x[:n] += 2.0
                y[:n] = teacher.labels(x[:n])
            flip = rng.random(spec.batch) < spec.label_noise
            y = np.where(flip, rng.integers(0, CLASSES, spec.batch), y)
            h = np.maximum(0, x @ p["w1"] + p["b1"])
            z = h @ p["w2"] + p["b2"]
            z = z - z.max(axis=1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
            loss = float(-logp[np.arange(spec.batch), y].mean())
            dz = np.exp(logp)
            dz[np.arange(spec.batch), y] -= 1
            dz /= spec.batch
            dh = (dz @ p["w2"].T) * (h > 0)
            g = {"w2": h.T @ dz, "b2": dz.sum(0), "w1": x.T @ dh, "b1": dh.sum(0)}
            gnorm = float(math.sqrt(sum(float((gi ** 2).sum()) for gi in g.values())))
            lr = lr_at(spec, step)
            for k in p:
                if spec.optimizer == "sgd":
                    m[k] = 0.9 * m[k] + g[k]
                    p[k] = p[k] - lr * m[k]
                else:
                    m[k] = 0.9 * m[k] + 0.1 * g[k]
                    v[k] = 0.999 * v[k] + 0.001 * g[k] ** 2
                    mh, vh = m[k] / (1 - 0.9 ** (step + 1)), v[k] / (1 - 0.999 ** (step + 1))
                    p[k] = p[k] - lr * (mh / (np.sqrt(vh) + 1e-8) + spec.weight_decay * p[k])
            rec = {"step": step, "loss": loss, "grad_norm": gnorm, "lr": lr,
                   "tokens": (step + 1) * spec.batch, "time_ms": 1.0}
            if step % 50 == 0 or step == spec.steps - 1:
                hv = np.maximum(0, xv @ p["w1"] + p["b1"])
                zv = hv @ p["w2"] + p["b2"]
                zv = zv - zv.max(axis=1, keepdims=True)
                lv = zv - np.log(np.exp(zv).sum(axis=1, keepdims=True))
                rec["val_loss"] = float(-lv[np.arange(len(yv)), yv].mean())
            records.append(rec)
    return records


# --- truth ------------------------------------------------------------------------------------

CAUSE = {"lr-too-high": "lr-too-high", "cosine-wrap": "schedule-misconfigured", "late-bump": "lr-discontinuity"}


def _smooth(loss: np.ndarray, w: int = 15) -> np.ndarray:
    finite = np.where(np.isfinite(loss), loss, 1e6)
    return np.array([np.median(finite[max(0, i - w + 1):i + 1]) for i in range(len(finite))])


def truth(spec: Spec, records: list[dict]) -> dict | None:
    """The divergence as the trainer knows it: its cause, the step where the loss left its band
    (the smoothed loss over its lowest point since the cause by 4 noise units) and the lowest
    point before it. None: a control (or a failure that did not diverge on this seed)."""
    if spec.kind not in CAUSE:
        return None
    loss = np.array([r["loss"] for r in records])
    sm = _smooth(loss)
    start = spec.at if spec.kind == "late-bump" else (30 if spec.kind == "lr-too-high"
                                                       else spec.warmup + (spec.t_max or spec.steps) // 2)
    low = start + int(np.argmin(sm[start:]))
    # the batch noise where the loss was lowest (before it where there is room)
    pre = loss[max(0, low - 60):low] if low >= 30 else loss[low:low + 60]
    pre = pre[np.isfinite(pre)]
    noise = float(np.std(np.diff(pre)) / math.sqrt(2)) if len(pre) > 3 else 0.05
    band = sm[low] + max(4 * noise, 0.1)
    after = [i for i in range(low, len(sm)) if sm[i] > band]
    if spec.kind == "late-bump":
        pre = loss[start - 60:start]
        noise = float(np.std(np.diff(pre)) / math.sqrt(2))
        # the jump itself: the first step at the bumped LR whose loss leaves the band before it
        before = sm[start - 1]
        jump = [i for i in range(start, len(loss)) if not np.isfinite(loss[i]) or loss[i] > before + max(4 * noise, 0.1)]
        if not jump or jump[0] > start + 30:
            return None
        return {"cause": CAUSE[spec.kind], "onset": jump[0], "low": start, "slow": False}
    if not after or sm[-1] < sm[low] + 0.3:
        return None
    return {"cause": CAUSE[spec.kind], "onset": after[0], "low": low, "slow": True}


# --- formats ----------------------------------------------------------------------------------

def _num(x: float) -> str:
    """tqdm's `format_num`: a float in 3 significant digits (Lightning's bar pads it)."""
    if not math.isfinite(x):
        return "nan" if math.isnan(x) else "inf"
    s = f"{x:.3g}"
    return s if "e" in s else f"{x:.3f}"


def write_lightning(records, meta, out: Path, interval: int = 50):
    """Lightning's TQDMProgressBar(refresh_rate=interval) to a file: `\\r` frames within an epoch,
    the postfix `v_num=0, train_loss_step=X` (the step's own loss), the epoch's last frame with
    `train_loss_epoch` and the val loss, a newline at each epoch's end."""
    out.mkdir(parents=True, exist_ok=True)
    n = STEPS_PER_EPOCH
    epochs = math.ceil(len(records) / n)
    text, rows, val = [], [], None
    for e in range(epochs):
        frames = []
        for b in range(n):
            i = e * n + b
            if i >= len(records):
                break
            r = records[i]
            val = r.get("val_loss", val)
            if (b + 1) % interval and b != n - 1 and i != len(records) - 1:
                continue
            pct = int(100 * (b + 1) / n)
            bar = ("█" * (pct // 10)).ljust(10)
            post = f"v_num=0, train_loss_step={_num(r['loss'])}"
            if b == n - 1:
                ep = [records[k]["loss"] for k in range(e * n, i + 1)]
                post += (f", val_loss={_num(val)}" if val is not None else "") + f", train_loss_epoch={_num(float(np.mean(ep)))}"
            frames.append(f"Epoch {e}: {pct:3d}%|{bar}| {b + 1}/{n} [00:0{b % 10}<00:01, 52.1it/s, {post}]")
            rows.append((i + 1, [i]))
        text.append("\r".join(frames))
    (out / "lightning.log").write_text("GPU available: False, used: False\nTPU available: False, using: 0 TPU cores\n"
                                        "  | Name | Type | Params\n0 | net  | MLP  | 1.6 K\n" + "\n".join(text) + "\n")
    return rows


def write_keras(records, meta, out: Path, interval: int = STEPS_PER_EPOCH):
    """Keras 2's `fit(verbose=1)` to a file (not a tty: the bar printed once at each epoch's end):
    `Epoch e/E`, then `N/N [====] - 0s 2ms/step - loss: X - val_loss: Y` (the epoch's mean)."""
    out.mkdir(parents=True, exist_ok=True)
    n = STEPS_PER_EPOCH
    epochs = len(records) // n
    lines, rows = [], []
    for e in range(epochs):
        g = list(range(e * n, (e + 1) * n))
        lo = float(np.mean([records[i]["loss"] for i in g]))
        vals = [records[i]["val_loss"] for i in g if "val_loss" in records[i]]
        lines.append(f"Epoch {e + 1}/{epochs}")
        f = (lambda x: "nan" if not math.isfinite(x) else (f"{x:.4e}" if abs(x) <= 1e-3 else f"{x:.4f}"))
        lines.append(f"{n}/{n} [{'=' * 30}] - 0s 2ms/step - loss: {f(lo)}"
                     + (f" - val_loss: {f(vals[-1])}" if vals else ""))
        rows.append((e + 1, g))
    (out / "keras.log").write_text("\n".join(lines) + "\n")
    return rows


def writers():
    import formats

    return {"csv": formats.write_csv, "jsonl": formats.write_jsonl, "hf-console": formats.write_hf_console,
            "lightning": write_lightning, "keras": write_keras}


# --- the set ----------------------------------------------------------------------------------

def specs(seed: int):
    """(name, Spec, [(format, interval)]) per seed; settings, noise and formats move with it."""
    rng = np.random.default_rng(seed + 3000)
    noise = float(rng.choice([0.0, 0.1, 0.25]))
    batch = int(rng.choice([32, 64, 128]))
    base = dict(seed=seed, label_noise=noise, batch=batch)
    fmts = ["csv", "jsonl", "hf-console", "lightning", "keras"]

    def two(steps):
        pick = [fmts[j] for j in rng.permutation(len(fmts))[:2]]
        out = []
        for f in pick:
            iv = {"csv": int(rng.choice([1, 10])), "jsonl": int(rng.choice([1, 50])), "hf-console": 10,
                  "lightning": int(rng.choice([10, 50])), "keras": STEPS_PER_EPOCH}[f]
            if f == "keras" and steps < 20 * STEPS_PER_EPOCH:
                f, iv = "csv", 1
            out.append((f, iv))
        return out

    high = float(rng.choice([2.5, 4.0, 6.0]))
    at = int(rng.choice([500, 700, 900]))
    sgd = dict(optimizer="sgd", **base)
    return [
        ("lr-too-high", Spec(kind="lr-too-high", steps=1200, lr=high, min_lr=high, schedule="constant",
                             warmup=300, **sgd), two(1200)),
        ("cosine-wrap", Spec(kind="cosine-wrap", steps=2000, lr=float(rng.choice([1.5, 2.0])), min_lr=0.01, warmup=50,
                             t_max=700, **{**sgd, "batch": 128, "label_noise": 0.1}), two(2000)),
        ("late-bump", Spec(kind="late-bump", steps=1500, lr=0.125, min_lr=0.0125, at=at,
                           factor=float(rng.choice([10, 20, 30])), **sgd), two(1500)),
        ("healthy", Spec(kind="healthy", steps=1000, **base), two(1000)),
        ("noisy-healthy", Spec(kind="healthy", steps=1200, **{**base, "batch": 8, "label_noise": 0.3}), two(1200)),
        ("plateau-healthy", Spec(kind="healthy", steps=1000, lr=2e-5, min_lr=2e-5, schedule="constant", **base), two(1000)),
        ("data-phase-healthy", Spec(kind="data-phase", steps=1500, at=at, factor=0.3, **base), two(1500)),
        ("short-healthy", Spec(kind="healthy", steps=40, warmup=5, **base), [("csv", 1)]),
    ]


def label(name: str, fmt: str, interval: int, spec: Spec, t: dict | None, rows, path: str) -> dict:
    if t is None:
        incidents = []
    else:
        def row_of(i):
            return next((k for k, (_, cov) in enumerate(rows) if cov[-1] >= i), len(rows) - 1)
        k0, ka = row_of(t["onset"]), row_of(t["low"])
        unit = rows[1][0] - rows[0][0] if len(rows) > 1 else 1
        end = rows[-1][0]
        tol = max((end - rows[ka][0]) // 4, 2 * unit, 3) if t["slow"] else max(2 * unit, 3)
        incidents = [{"kind": "divergence", "metric": "loss", "cause": t["cause"], "step": rows[k0][0],
                      "range": [rows[ka][0], end if t["slow"] else rows[min(k0 + max(1, 30 // unit), len(rows) - 1)][0]],
                      "tolerance": tol, "step_tolerance": tol if t["slow"] else unit,
                      **({"shifts": [STEPS_PER_EPOCH]} if fmt in ("lightning",) else {}),
                      "note": f"trainer truth: {spec.kind}, the loss left its band at record {t['onset']} "
                              f"(lowest point {t['low']})"}]
    if fmt == "keras" and incidents:
        incidents[0]["shifts"] = [-1]        # epochs numbered from 1 or from 0
    return {"run": name, "path": path, "format": fmt, "interval": interval, "seed": spec.seed,
            "injected": spec.kind, "spec": asdict(spec), "incidents": incidents, "control": not incidents}


def generate(seeds=(11, 13, 17, 19), write_labels: bool = True, log=print) -> list[dict]:
    W = writers()
    labs = []
    for seed in seeds:
        for name, spec, fmts in specs(seed):
            records = train(spec)
            t = truth(spec, records)
            if spec.kind in CAUSE and t is None:
                log(f"{name} s{seed}: did not diverge on this seed, left out")
                continue
            meta = {"dtype": "fp32", "vocab_size": CLASSES, "seed": seed,
                    "config": {"lr_max": spec.lr, "min_lr": spec.min_lr, "warmup_steps": spec.warmup,
                               "schedule": spec.schedule, "total_steps": spec.steps, "batch_size": spec.batch,
                               "weight_decay": spec.weight_decay, "optimizer": spec.optimizer}}
            for fmt, iv in fmts:
                run = f"d3-{name}-s{seed}-{fmt}{iv}"
                d = OUT / run
                rows = W[fmt](records, meta, d, interval=iv)
                labs.append(label(run, fmt, iv, spec, t, rows, str(d.relative_to(ROOT))))
            log(f"{name} s{seed}: {'control' if t is None else t}")
    if write_labels:
        LABELS.write_text(json.dumps({"about": "Labels of the third trainer's runs (trainer3.py, REPORTING ONLY, "
                                      "never tuned on), written from the trainer's own truth before postmortem "
                                      "ran on them; the runs are generated under benchmarks/data/diverge3.",
                                      "runs": labs}, indent=1) + "\n")
    return labs


if __name__ == "__main__":
    generate()
