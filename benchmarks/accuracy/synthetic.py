"""The second trainer's runs: which failures, with which settings, written in which formats, and
the labels that say where the true incidents are in each written log.

Seeds: even -> the TUNING set, odd -> the REPORTING set (sets.json). Each trained run is written
in three formats; the generation is cached under benchmarks/data/accuracy/ by a hash of the
trainer's and writers' source and the run's spec.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CACHE = HERE.parents[1] / "benchmarks" / "data" / "accuracy"
FORMAT_CYCLE = ["jsonl", "megatron", "hf-trainer-state", "llm.c", "tensorboard", "nanogpt",
                "hf-console", "csv"]

# what each failure is as an incident: (kind, metric, cause pattern)
TRUTH = {
    "long-tail-token": ("spike", "loss", "long-tail-token"),
    "fp16-overflow": ("spike", "loss", "fp16-overflow"),
    "lr-discontinuity": ("spike", "loss", "lr-discontinuity"),
    "optimizer-reset": ("spike", "loss", "optimizer-reset"),
    "numerics": ("nan", "loss", "numerics"),
    "schedule-misconfigured": ("divergence", "loss", "schedule-misconfigured"),
    "fp16-persistent": ("spike", "loss_scale", "fp16-overflow"),
}
# the short run's second incident: the LR climbing from `climb_from` on, against its config
CLIMB = ("divergence", "loss", "schedule-misconfigured")


def specs(seed: int):
    """(run name, Spec) of every run with this seed; the settings move with the seed so the two
    sets do not share a run."""
    from trainer2 import Spec

    rng = np.random.default_rng(seed)
    at = int(rng.choice([200, 250, 300, 350]))
    lr = float(rng.choice([3e-3, 4e-3, 5e-3]))
    base = dict(seed=seed, lr=lr, min_lr=lr / 10, corpus_seed=seed % 3)
    return [
        ("healthy", Spec(kind="healthy", **base)),
        ("fp16-healthy", Spec(kind="healthy", dtype="fp16", steps=600, **base)),
        ("noisy-healthy", Spec(kind="healthy", batch=24, **base)),
        ("fine-tune", Spec(kind="fine-tune", warmup=0, steps=300, **{**base, "lr": lr / 4, "min_lr": lr / 40})),
        ("long-tail-token", Spec(kind="long-tail-token", at=at, length=1 + seed % 2, factor=0.5, **base)),
        ("fp16-overflow", Spec(kind="fp16-overflow", dtype="fp16", optimizer="sgd", at=at, length=12,
                               factor=0.15 + 0.05 * (seed % 2), **{**base, "lr": 0.3, "min_lr": 0.03})),
        ("lr-discontinuity", Spec(kind="lr-discontinuity", at=at, length=10, factor=25, **base)),
        ("optimizer-reset", Spec(kind="optimizer-reset", at=at + 20, resume_from=at, batch=512, warmup=200,
                                 betas=(0.9, 0.999), **{**base, "lr": 0.06, "min_lr": 0.006})),
        ("numerics", Spec(kind="numerics", at=at, **base)),
        ("schedule-misconfigured", Spec(kind="schedule-misconfigured", factor=35, **base)),
    ]


def judge_specs(seed: int):
    """(run name, Spec, formats) of the runs that judge what was read (issue 25): short logs,
    epoch logs, static and collapsed loss scales, a cascade with no loss, an LR rising against
    a cosine config, and their clean controls; noise levels and formats move with the seed."""
    from trainer2 import Spec

    rng = np.random.default_rng(seed + 500)
    lr = float(rng.choice([3e-3, 4e-3, 5e-3]))
    batch = int(rng.choice([32, 64, 128]))                 # the short runs' noise level
    at = int(rng.choice([150, 200, 250]))
    base = dict(seed=seed, lr=lr, min_lr=lr / 10, corpus_seed=seed % 3)
    pick = lambda options, k=2: [options[j] for j in rng.permutation(len(options))[:k]]  # noqa: E731
    every = lambda fmts, n=1: [(f, n) for f in fmts]  # noqa: E731
    sgd = {**base, "lr": 0.3, "min_lr": 0.03}
    static = dict(dtype="fp16", scale_growth=1.0, scale_backoff=1.0, init_scale=2.0 ** 16)
    return [
        # SGD (no Adam to absorb the LR): x8-10 for one step, then a climb to x6-8 from step 30
        ("short", Spec(kind="short", steps=60, warmup=3, batch=batch, at=int(rng.choice([3, 4, 5])), length=1,
                       factor=float(rng.choice([8, 10])), climb_from=30, climb_factor=float(rng.choice([6, 8])),
                       optimizer="sgd", **{**base, "lr": 0.5, "min_lr": 0.05}), every(pick(["jsonl", "llm.c", "csv", "megatron", "nanogpt"], 3))),
        ("short-healthy", Spec(kind="healthy", steps=60, warmup=3, batch=batch, **base),
         every(pick(["jsonl", "llm.c", "csv", "megatron", "nanogpt"]))),
        ("short-noisy-healthy", Spec(kind="healthy", steps=60, warmup=3, batch=12, **base),
         every(pick(["jsonl", "llm.c", "csv", "megatron", "nanogpt"]))),
        ("epochs-divergence", Spec(kind="schedule-misconfigured", schedule="cosine", steps=600,
                                   factor=float(rng.choice([25, 35])), **base), [("epochs", 50)]),
        ("epochs-healthy", Spec(kind="healthy", schedule="cosine", steps=600, batch=48, **base), [("epochs", 50)]),
        ("cosine-rising", Spec(kind="schedule-misconfigured", schedule="cosine", factor=float(rng.choice([15, 25])),
                               **base), every(pick(["jsonl", "llm.c", "csv", "tensorboard"])) + [("megatron", 10)]),
        ("fp16-static-healthy", Spec(kind="healthy", steps=400, **static, **base),
         every(pick(["jsonl", "csv", "llm.c"], 1)) + [("megatron", 10)]),
        ("fp16-static-overflow", Spec(kind="fp16-overflow", optimizer="sgd", at=at, length=12, factor=0.2, steps=400,
                                      **static, **sgd), every(pick(["jsonl", "csv"], 1)) + [("megatron", 10)]),
        ("fp16-floor", Spec(kind="fp16-persistent", dtype="fp16", at=at, steps=400, overflow_share=0.6,
                            scale_floor=1.0, **base), [("jsonl", 1), ("megatron", 10), ("deepspeed", 10)]),
        ("fp16-collapsed", Spec(kind="fp16-persistent", dtype="fp16", at=0, steps=300, overflow_share=0.1,
                                init_scale=2.0 ** -int(rng.choice([8, 12, 16])), **base),
         every(pick(["jsonl", "csv"], 1)) + [("megatron", 10)]),
        ("fp16-cascade-noloss", Spec(kind="fp16-overflow", dtype="fp16", optimizer="sgd", at=at, length=12,
                                     factor=0.15 + 0.05 * (seed % 2), **sgd), [("deepspeed", 10)]),
        ("fp16-sawtooth-healthy", Spec(kind="healthy", dtype="fp16", steps=500, growth_interval=20, **base),
         [("deepspeed", 10), ("jsonl", 1)]),
    ]


# the divergence shapes (issue 25b): what each is as an incident (kind, metric, cause, whether
# it is a slow one dated at the smoothed loss's lowest point); None: a control
SHAPES = {
    "warmup-diverge": ("divergence", "loss", "lr-too-high", True),
    "collapse": ("divergence", "loss", "lr-discontinuity", False),
    "slow-climb": ("divergence", "loss", "schedule-misconfigured", True),
    "warmup-bump-healthy": None,
    "data-mix-healthy": None,
    "overfit-healthy": None,
    "noisy-long-healthy": None,
}


def shape_specs(seed: int):
    """(run name, Spec, formats, data) of the divergence shapes and their controls; `data`: the
    trainer's other data source (`trainer2.DATA`) or None. Settings and formats move with the
    seed."""
    from trainer2 import Spec

    rng = np.random.default_rng(seed + 900)
    lr = float(rng.choice([3e-3, 4e-3, 5e-3]))
    at = int(rng.choice([250, 300, 350]))
    base = dict(seed=seed, lr=lr, min_lr=lr / 10, corpus_seed=seed % 3)
    pick = lambda options, k=2: [options[j] for j in rng.permutation(len(options))[:k]]  # noqa: E731
    sparse = lambda: [(f, int(rng.choice([5, 10]))) for f in pick(["megatron", "nanogpt", "hf-console"], 1)]  # noqa: E731
    dense = lambda k=1: [(f, 1) for f in pick(["jsonl", "llm.c", "csv", "tensorboard"], k)]  # noqa: E731
    sgd_lr = float(rng.choice([3.5, 4.0, 5.0]))
    return [
        # SGD configured with an LR too high: the loss falls through warmup, then climbs to the
        # unigram plateau (about 3 nats) and stays: a divergence as the LR nears its peak
        ("warmup-diverge", Spec(kind="lr-too-high", optimizer="sgd", steps=800, warmup=100,
                                **{**base, "lr": sgd_lr, "min_lr": sgd_lr / 10}),
         dense() + sparse() + [("epochs", 50)], None),
        # the same at half that LR: a bump as warmup ends, that comes back
        ("warmup-bump-healthy", Spec(kind="healthy", optimizer="sgd", steps=800, warmup=100,
                                     **{**base, "lr": 2.0, "min_lr": 0.2}), dense() + sparse(), None),
        # the LR x80-150 from `at` on, for good: a jump to the unigram plateau that stays (collapse)
        ("collapse", Spec(kind="lr-discontinuity", steps=700, at=at, length=10_000,
                          factor=float(rng.choice([80, 100, 150])), **base), dense() + sparse(), None),
        # the LR climbing against its config over 3000 steps: a slow climb logged every 10, 50, 100
        ("slow-climb", Spec(kind="schedule-misconfigured", steps=3000, factor=float(rng.choice([25, 30])), **base),
         [("jsonl", 100), ("megatron", 10), ("epochs", 100)], None),
        # a data-mix change at `at` (a fifth of each batch from another corpus): the loss jumps
        # and comes back
        ("data-mix-healthy", Spec(kind="healthy", steps=700, at=at, factor=0.2, **base), dense() + sparse(), "shifted"),
        # a corpus learnt by heart: the train loss falls, the validation loss rises from step ~200
        ("overfit-healthy", Spec(kind="healthy", steps=1500, hidden=512, eval_every=50, **base),
         dense() + sparse(), "small"),
        # batch 8, 1500 steps: a loss noisy by about half a nat
        ("noisy-long-healthy", Spec(kind="healthy", steps=1500, batch=8, **base), dense() + sparse(), None),
    ]


def _formats(i: int, seed: int, spec) -> list[tuple[str, int]]:
    """Three formats per run, cycling; the logging interval is the trainer's habit (llm.c every
    step, Megatron/HF/nanoGPT every 5 or 10), tables every step or every 5. fp16 runs are also
    written every step in a table, where each GradScaler probe shows."""
    rng = np.random.default_rng(seed * 31 + i)
    fmts = [FORMAT_CYCLE[(3 * i + seed + j) % len(FORMAT_CYCLE)] for j in range(3)]
    if spec.dtype == "fp16" and not {"jsonl", "csv", "llm.c"} & set(fmts):
        fmts[0] = "jsonl"
    out = []
    for f in fmts:
        if f == "llm.c":
            interval = 1
        elif f in ("jsonl", "csv", "tensorboard"):
            interval = 1 if spec.dtype == "fp16" else int(rng.choice([1, 5]))
        else:
            interval = int(rng.choice([5, 10]))
        out.append((f, interval))
    return out


def _smoothed_min(loss: np.ndarray, start: int, w: int = 25) -> int:
    x = np.where(np.isfinite(loss), loss, np.nan)
    sm = np.convolve(np.nan_to_num(x, nan=np.nanmax(x)), np.ones(w) / w, mode="same")
    return start + int(np.argmin(sm[start:len(sm) - w // 2]))


def true_incidents(spec, records: list[dict], shape: str | None = None) -> list[dict]:
    """Each true incident as record indices: onset and the range it may be found in. `shape`:
    a divergence shape's name (`SHAPES`), whose truth is its own."""
    if shape is not None:
        return _shape_incidents(spec, records, shape)
    if spec.kind == "short":
        return _short_incidents(spec, records)
    if spec.kind not in TRUTH:
        return []
    kind, metric, cause = TRUTH[spec.kind]
    steps = [r["step"] for r in records]
    optional = False
    if spec.kind == "optimizer-reset":
        onset = next(i for i in range(1, len(steps)) if steps[i] <= steps[i - 1])
        lo, hi = onset, onset + 30
        optional = not reset_visible(records, onset)
    elif spec.kind == "fp16-persistent":
        # from the first overflow after it began; a log that begins already collapsed, at once
        onset = next(i for i, r in enumerate(records) if r["step"] >= spec.at and r.get("skipped"))
        onset = 0 if spec.init_scale < 1 else onset
        lo, hi = onset, onset + 30
    elif spec.kind == "fp16-overflow":
        onset = next(i for i, r in enumerate(records) if r["step"] >= spec.at and r.get("skipped"))
        lo, hi = onset, spec.at + spec.length + 30
    elif spec.kind == "schedule-misconfigured":
        loss = np.array([r["loss"] for r in records])
        onset = _smoothed_min(loss, spec.warmup)
        lo, hi = spec.warmup, len(records) - 1
    elif spec.kind == "numerics":
        onset = lo = spec.at
        hi = spec.at + 2
    else:
        onset = lo = spec.at
        hi = spec.at + spec.length + (2 if spec.kind == "long-tail-token" else 10)
    out = [{"kind": kind, "metric": metric, "cause": cause, "onset": onset,
            "range": [lo, min(hi, len(records) - 1)], "wide": spec.kind == "schedule-misconfigured",
            "optional": optional}]
    if spec.kind == "fp16-persistent":
        # Adam on gradients that underflow may blow the loss up later: a true event, not asked for
        out.append({"kind": "divergence", "metric": "loss", "cause": cause, "onset": hi,
                    "range": [hi, len(records) - 1], "wide": True,
                    "optional": True})
    return out


def _shape_incidents(spec, records: list[dict], shape: str) -> list[dict]:
    """A divergence shape's one incident: a slow one from the smoothed loss's lowest point after
    warmup's first steps to the log's end, a collapse from the LR's jump."""
    truth = SHAPES[shape]
    if truth is None:
        return []
    kind, metric, cause, slow = truth
    if slow:
        loss = np.array([r["loss"] for r in records])
        onset = _smoothed_min(loss, 13)
        lo, hi = max(0, onset - 50), len(records) - 1
    else:
        onset = lo = spec.at
        hi = spec.at + 30
    return [{"kind": kind, "metric": metric, "cause": cause, "onset": onset, "range": [lo, min(hi, len(records) - 1)],
             "wide": slow, "optional": False}]


def _short_incidents(spec, records: list[dict]) -> list[dict]:
    """The short run's two: the LR x factor for `length` steps at `at` (a spike), and the climb
    of the LR from `climb_from` on (a divergence to the log's end)."""
    loss = np.array([r["loss"] for r in records])
    spike = {"kind": "spike", "metric": "loss", "cause": "lr-discontinuity", "onset": spec.at,
             "range": [spec.at, spec.at + spec.length + 3], "wide": False, "optional": False}
    onset = _smoothed_min(loss, spec.climb_from, w=5)
    # a climb that the batch noise hides (the last 10 losses within two noise units of the 10
    # before the climb) is no required incident
    noise = np.std(np.diff(loss[spec.climb_from - 15:spec.climb_from])) / np.sqrt(2)
    rise = np.mean(loss[-10:]) - np.mean(loss[spec.climb_from - 10:spec.climb_from])
    climb = {"kind": CLIMB[0], "metric": CLIMB[1], "cause": CLIMB[2], "onset": onset,
             "range": [spec.climb_from, len(records) - 1], "wide": True, "optional": bool(rise < 2 * noise)}
    return [spike, climb]


def reset_visible(records: list[dict], onset: int, k: int = 10) -> bool:
    """Does the fresh optimizer show in the loss? The resumed steps see the same batches as the
    crashed run did at those steps, so the pairs isolate the reset: visible when the first `k`
    resumed steps lie above their twins by more than one step's own noise on average."""
    first = records[onset]["step"]
    twin = {r["step"]: r["loss"] for r in records[:onset]}
    pairs = [(r["loss"], twin[r["step"]]) for r in records[onset:onset + k] if r["step"] in twin]
    before = np.array([r["loss"] for r in records[:onset] if first - 60 <= r["step"] < first])
    noise = np.diff(before).std() / np.sqrt(2)
    return bool(pairs) and float(np.mean([a - b for a, b in pairs])) > noise


def probes(records: list[dict]) -> list[int]:
    """Record indices of the GradScaler's routine probes: a skip with no skip around it."""
    sk = [bool(r.get("skipped")) for r in records]
    return [i for i, s in enumerate(sk) if s and i >= 3 and not any(sk[i - 3:i]) and not any(sk[i + 1:i + 4])]


def _row_of(rows, index: int, after: bool = True) -> int | None:
    """Position of the written row that covers record `index` (or the next one written)."""
    for k, (_, covered) in enumerate(rows):
        if index in covered or (after and covered and covered[0] > index):
            return k
    return None


def _segments(rows) -> list[int]:
    seg, out = 0, []
    for k, (step, _) in enumerate(rows):
        if k and step <= rows[k - 1][0]:
            seg += 1
        out.append(seg)
    return out


def label_for(name: str, fmt: str, interval: int, spec, records, rows, shape: str | None = None) -> dict:
    segs = _segments(rows)
    incidents = []
    for inc in true_incidents(spec, records, shape):
        k0 = _row_of(rows, inc["onset"])
        a, b = _row_of(rows, inc["range"][0]), _row_of(rows, inc["range"][1], after=False)
        b = b if b is not None else len(rows) - 1
        if k0 is None:
            continue
        unit = max(1, interval) if fmt != "epochs" else 1
        # a slow rise: a quarter of its range, at least 25 steps (an eighth of a log too short
        # for that: a 60-step or 12-epoch one) and two lines
        whole = rows[-1][0] - rows[0][0]
        tol = max(3, 2 * unit) if not inc["wide"] else max(min(25, whole // 8), (rows[b][0] - rows[a][0]) // 4,
                                                             2 * unit)
        incidents.append({"kind": inc["kind"], "metric": inc["metric"], "cause": inc["cause"],
                          **({"optional": True, "note": "not caused on every seed (a reset's rise below the loss noise, a "
                                                "climb the batch noise hides, a later blow-up)"}
                             if inc["optional"] else {}),
                          "step": rows[k0][0], "range": [rows[a][0], rows[b][0]],
                          "segment": segs[k0] if segs[-1] else None,
                          "tolerance": tol, "step_tolerance": tol if inc["wide"] else unit})
    return {"run": name, "format": fmt, "interval": interval, "seed": spec.seed,
            "trainer": "charmlp-lab2", "dtype": spec.dtype, "injected": shape or spec.kind,
            "incidents": incidents, "control": not incidents,
            "probes": [rows[k][0] for k in (_row_of(rows, i, after=False) for i in probes(records))
                       if k is not None] if fmt in ("jsonl", "csv", "llm.c") and interval == 1 else [],
            "restarts": sum(1 for k in range(1, len(rows)) if rows[k][0] <= rows[k - 1][0])}


def label_path(run_dir: Path) -> Path:
    """Labels live beside the runs, never inside them: the reader must not see them."""
    return run_dir.parent.parent / "labels" / f"{run_dir.name}.json"


def _code_hash() -> str:
    h = hashlib.sha256()
    for f in ("trainer2.py", "formats.py", "synthetic.py"):
        h.update((HERE / f).read_bytes())
    return h.hexdigest()[:12]


def generate(seeds, cache: Path = CACHE, log=print) -> list[Path]:
    """Train and write every run of these seeds (cached); returns the written run dirs (their
    labels at `label_path`)."""
    import sys

    sys.path.insert(0, str(HERE))
    import torch
    from formats import WRITERS

    torch.set_num_threads(1)
    code = _code_hash()
    out = []
    bases = {}
    runs = [(seed, i, kind, spec, _formats(i, seed, spec), None, None) for seed in seeds
            for i, (kind, spec) in enumerate(specs(seed))]
    runs += [(seed, 100 + i, kind, spec, fmts, None, None) for seed in seeds
             for i, (kind, spec, fmts) in enumerate(judge_specs(seed))]
    runs += [(seed, 200 + i, kind, spec, fmts, data, kind) for seed in seeds
             for i, (kind, spec, fmts, data) in enumerate(shape_specs(seed))]
    for seed, _i, kind, spec, fmts, data, shape in runs:
        name = f"lab2-{kind}-s{seed}"
        key = hashlib.sha256(json.dumps([code, asdict(spec), fmts, data], default=str).encode()).hexdigest()[:12]
        dirs = [cache / "runs" / f"{name}-{f.replace('.', '')}" for f, _ in fmts]
        if all(label_path(d).exists() and json.loads(label_path(d).read_text()).get("key") == key
               for d in dirs):
            out += dirs
            continue
        result = _trained(spec, seed, cache, bases, log, name, fmts, data)
        meta = {**result.meta, "seed": seed}
        for (fmt, interval), d in zip(fmts, dirs):
            tmp = d.with_name(d.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            rows = WRITERS[fmt](result.records, meta, tmp, interval=interval)
            label = {**label_for(d.name, fmt, interval, spec, result.records, rows, shape), "key": key}
            shutil.rmtree(d, ignore_errors=True)
            os.replace(tmp, d)
            label_path(d).parent.mkdir(parents=True, exist_ok=True)
            label_path(d).write_text(json.dumps(label, indent=2) + "\n")
            out.append(d)
    return out


def _trainer_source(data: str | None) -> bytes:
    """What a run's cached records depend on: the trainer above its shapes' mark (so the runs
    trained before the shapes keep their records), and that part too for a run on other data."""
    from trainer2 import SHAPES_MARK

    src = (HERE / "trainer2.py").read_bytes()
    core = src[:src.index(SHAPES_MARK.encode())].rstrip(b"\n") + b"\n"
    return src + (data or "").encode() if data else core


def _trained(spec, seed: int, cache: Path, bases: dict, log, name: str, fmts, data: str | None = None):
    """The trained run's records, cached by the trainer's source and the spec (training is the
    slow part; writing the formats and the labels again is not)."""
    import pickle

    from trainer2 import Result, train, train_on

    h = hashlib.sha256(_trainer_source(data))
    h.update(json.dumps(asdict(spec), default=str).encode())
    path = cache / "records" / f"{name}-{h.hexdigest()[:12]}.pkl"
    if path.exists():
        records, meta = pickle.loads(path.read_bytes())
        return Result(spec, records, None, meta)
    log(f"training {name} ({spec.dtype}, {spec.steps} steps) -> {', '.join(f for f, _ in fmts)}")
    base = None
    if spec.kind == "fine-tune":
        if seed not in bases:
            bases[seed] = train(replace(spec, kind="healthy", steps=spec.base_steps, seed=seed + 1000,
                                        dtype="fp32", warmup=30, lr=spec.lr * 4, min_lr=spec.lr / 2.5)).model
        base = bases[seed]
    result = train_on(spec, data) if data else train(spec, base)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(pickle.dumps((result.records, result.meta)))
    os.replace(tmp, path)
    return result
