"""Write one trained run (a list of per-step records) in the log formats the readers read, the
way each trainer writes it: what it logs every `interval` steps (the step's own value, or the
interval's mean where the trainer averages), its step numbering, its config.

Every writer returns `rows`: for each logged row, (the step written, the record indices it
covers), so the labels can be put in the format's own steps.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

Rows = list[tuple[int, list[int]]]

# format -> (writes the interval's mean loss, step written for record step s is s + offset)
FORMATS = {
    "jsonl": (False, 0), "csv": (False, 0), "hf-trainer-state": (True, 1), "tensorboard": (False, 0),
    "megatron": (True, 1), "nanogpt": (False, 0), "llm.c": (False, 0), "hf-console": (True, 1),
}


def _groups(records: list[dict], interval: int, offset: int) -> list[list[int]]:
    """Record indices grouped into logged rows: a row at each step where (step + offset) is a
    multiple of `interval`, covering the records since the previous row. A resume (the step
    going back) starts a new group."""
    groups, cur = [], []
    for i, r in enumerate(records):
        if cur and r["step"] <= records[cur[-1]]["step"]:
            cur = []              # the crashed run's unlogged tail is lost
        cur.append(i)
        if (r["step"] + offset) % interval == 0:
            groups.append(cur)
            cur = []
    return groups


def _mean_loss(records: list[dict], idx: list[int], key: str = "loss") -> float:
    vals = [records[i][key] for i in idx if not records[i].get("skipped")]
    if not vals:
        return records[idx[-1]][key]
    return float(np.mean(vals))


def _f(x: float, fmt: str = ".6g") -> str:
    if x is None:
        return "nan"
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return format(x, fmt)


def _manifest(meta: dict, run_id: str) -> dict:
    return {"run_id": run_id, "seed": meta.get("seed"), "dtype": meta["dtype"],
            "vocab_size": meta["vocab_size"], "config": meta["config"],
            "versions": {"trainer": "charmlp-lab2"}}


def _table_rows(records, interval, mean):
    out = []
    for g in _groups(records, interval, 0):
        last = records[g[-1]]
        row = {"step": last["step"], "loss": _mean_loss(records, g) if mean else last["loss"],
               "grad_norm": last["grad_norm"], "lr": last["lr"]}
        if "loss_scale" in last:
            row["loss_scale"] = last["loss_scale"]
            row["skipped"] = sum(records[i]["skipped"] for i in g)
        evals = [records[i]["val_loss"] for i in g if "val_loss" in records[i]]
        if evals:
            row["val_loss"] = evals[-1]
        row["tokens"] = last["tokens"]
        out.append((row, g))
    return out


def write_jsonl(records, meta, out: Path, interval: int = 1, manifest: bool = True) -> Rows:
    out.mkdir(parents=True, exist_ok=True)
    rows = _table_rows(records, interval, mean=False)
    with open(out / "metrics.jsonl", "w") as f:
        for row, _ in rows:
            f.write(json.dumps(row) + "\n")          # NaN/Infinity as Python's json writes them
    if manifest:
        (out / "manifest.json").write_text(json.dumps(_manifest(meta, out.name), indent=2))
    return [(row["step"], g) for row, g in rows]


def write_csv(records, meta, out: Path, interval: int = 1, manifest: bool = False) -> Rows:
    out.mkdir(parents=True, exist_ok=True)
    rows = _table_rows(records, interval, mean=False)
    cols = ["step", "loss", "grad_norm", "lr"] + (["loss_scale", "skipped"] if "loss_scale" in records[0]
                                                    else []) + ["val_loss", "tokens"]
    with open(out / "metrics.csv", "w") as f:
        f.write(",".join(cols) + "\n")
        for row, _ in rows:
            f.write(",".join("" if row.get(c) is None else str(row[c]) if c in ("step", "skipped", "tokens")
                             else _f(row[c], ".8g") for c in cols) + "\n")
    if manifest:
        (out / "manifest.json").write_text(json.dumps(_manifest(meta, out.name), indent=2))
    return [(row["step"], g) for row, g in rows]


def write_hf_trainer_state(records, meta, out: Path, interval: int = 10) -> Rows:
    """HF Trainer: global_step counts finished steps; the loss is the mean since the last log,
    rounded to 4 places; a resume loads log_history from the checkpoint, so the crashed run's
    rows after it are gone."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = meta["config"]
    history, rows = [], []
    for g in _groups(records, interval, 1):
        last = records[g[-1]]
        step = last["step"] + 1
        while history and history[-1]["step"] >= step:    # resumed: truncated to the checkpoint
            history.pop()
            rows.pop()
        entry = {"epoch": round(last["tokens"] / 180_000, 4), "grad_norm": last["grad_norm"],
                 "learning_rate": last["lr"], "loss": round(_mean_loss(records, g), 4), "step": step}
        history.append(entry)
        rows.append((step, g))
        evals = [records[i]["val_loss"] for i in g if "val_loss" in records[i]]
        if evals:
            history.append({"epoch": entry["epoch"], "eval_loss": evals[-1], "eval_runtime": 0.41,
                            "eval_samples_per_second": 9990.2, "step": step})
    state = {"best_metric": None, "best_model_checkpoint": None, "epoch": history[-1]["epoch"],
             "eval_steps": 50, "global_step": rows[-1][0], "is_hyper_param_search": False,
             "is_local_process_zero": True, "is_world_process_zero": True, "log_history": history,
             "logging_steps": interval, "max_steps": cfg["total_steps"], "num_train_epochs": 1,
             "save_steps": 50, "total_flos": 0.0, "train_batch_size": cfg["batch_size"]}
    (out / "trainer_state.json").write_text(json.dumps(state, indent=2))
    return rows


def write_tensorboard(records, meta, out: Path, interval: int = 1) -> Rows:
    """torch.utils.tensorboard's SummaryWriter; a resumed run opens a second event file."""
    from torch.utils.tensorboard import SummaryWriter

    out.mkdir(parents=True, exist_ok=True)
    rows, writer, wall = [], None, 1.7e9
    prev = None
    for row, g in _table_rows(records, interval, mean=False):
        if writer is None or (prev is not None and row["step"] <= prev):
            if writer is not None:
                writer.close()
                wall += 3600
            writer = SummaryWriter(log_dir=str(out), filename_suffix=f".{len(rows)}")
            writer.add_text("config", json.dumps(meta["config"]), 0, walltime=wall)
        s = row["step"]
        t = wall + s
        writer.add_scalar("train/loss", row["loss"], s, walltime=t)
        writer.add_scalar("train/grad_norm", row["grad_norm"], s, walltime=t)
        writer.add_scalar("train/learning_rate", row["lr"], s, walltime=t)
        if "loss_scale" in row:
            writer.add_scalar("train/loss_scale", row["loss_scale"], s, walltime=t)
        if "val_loss" in row:
            writer.add_scalar("eval/loss", row["val_loss"], s, walltime=t)
        rows.append((s, g))
        prev = s
    writer.close()
    return rows


def write_megatron(records, meta, out: Path, interval: int = 10) -> Rows:
    """Megatron-LM stdout: the args dump, then `iteration N/ M |` lines (1-based iterations) with
    the interval's mean loss over the iterations that were not skipped, the loss scale, the
    skipped and NaN counts; validation blocks."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = meta["config"]
    fp16 = meta["dtype"] == "fp16"
    args = {"lr": cfg["lr_max"], "min_lr": cfg["min_lr"], "lr_decay_style": cfg["schedule"],
            "lr_warmup_iters": cfg["warmup_steps"], "train_iters": cfg["total_steps"],
            "global_batch_size": cfg["batch_size"], "fp16": fp16, "bf16": False,
            "clip_grad": 0.0, "adam_beta1": cfg.get("betas", [0.9, 0.999])[0],
            "adam_beta2": cfg.get("betas", [0.9, 0.999])[1], "log_interval": interval,
            "loss_scale_window": 40, "seed": meta.get("seed", 0)}
    if fp16:
        args.update({k: cfg[k] for k in ("loss_scale", "initial_loss_scale", "min_loss_scale") if k in cfg})
    lines = ["using world size: 1, data-parallel size: 1, tensor-model-parallel size: 1",
             "------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * max(3, 48 - len(k))} {v}" for k, v in sorted(args.items())]
    lines += ["-------------------- end of arguments ---------------------",
              "> building train, validation, and test datasets ...", "training ..."]
    rows = []
    total = cfg["total_steps"]
    for g in _groups(records, interval, 1):
        last = records[g[-1]]
        it = last["step"] + 1
        skipped = sum(records[i].get("skipped", 0) for i in g)
        nans = sum(1 for i in g if not math.isfinite(records[i]["loss"]))
        good = [records[i]["loss"] for i in g if not records[i].get("skipped") and math.isfinite(records[i]["loss"])]
        norms = [records[i]["grad_norm"] for i in g if not records[i].get("skipped")]
        parts = [f" iteration {it:8d}/{total:8d}", f" consumed samples: {last['tokens']:12d}",
                 f" elapsed time per iteration (ms): {np.mean([records[i]['time_ms'] for i in g]):.1f}",
                 f" learning rate: {last['lr']:.3E}", f" global batch size: {cfg['batch_size']:5d}"]
        if good:
            parts.append(f" lm loss: {np.mean(good):.6E}")
        if fp16 and "loss_scale" in last:
            parts.append(f" loss scale: {last['loss_scale']:.1f}")
        if norms:
            parts.append(f" grad norm: {_f(norms[-1], '.3f')}")
        parts += [f" number of skipped iterations: {skipped:3d}", f" number of nan iterations: {nans:3d}"]
        lines.append("|".join(parts) + " |")
        rows.append((it, g))
        evals = [records[i]["val_loss"] for i in g if "val_loss" in records[i]]
        if evals:
            v = evals[-1]
            lines += ["-" * 100, f" validation loss at iteration {it} | lm loss value: {v:.6E} | "
                      f"lm loss PPL: {_f(math.exp(min(v, 700)), '.6E')} | ", "-" * 100]
    (out / "train.log").write_text("\n".join(lines) + "\n")
    return rows


def _last_value_log(records, interval: int, path: Path, head: list[str], eval_line, train_line) -> Rows:
    """A text log that prints the logged step's own values, an eval line before it."""
    lines, rows = list(head), []
    for g in _groups(records, interval, 0):
        last = records[g[-1]]
        evals = [records[i]["val_loss"] for i in g if "val_loss" in records[i]]
        if evals:
            lines.append(eval_line(last, evals[-1]))
        lines.append(train_line(last))
        rows.append((last["step"], g))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return rows


def write_nanogpt(records, meta, out: Path, interval: int = 10) -> Rows:
    """nanoGPT's train.py: `iter N: loss X, time Tms, mfu M%` (that iteration's loss) every
    log_interval, `step N: train loss X, val loss Y` at evals; no LR, no grad norm."""
    head = [f"tokens per iteration will be: {meta['config']['batch_size'] * 8:,}",
            "Initializing a new model from scratch", "number of parameters: 0.03M",
            "num decayed parameter tensors: 3, with 15,680 parameters", "using fused AdamW: False"]
    return _last_value_log(
        records, interval, out / "train.log", head,
        lambda r, v: f"step {r['step']}: train loss {_f(r['loss'], '.4f')}, val loss {_f(v, '.4f')}",
        lambda r: f"iter {r['step']}: loss {_f(r['loss'], '.4f')}, time {r['time_ms']:.2f}ms, "
                  f"mfu {-100.0 if r['step'] < 5 else 1.23:.2f}%")


def write_llmc(records, meta, out: Path, interval: int = 1) -> Rows:
    """llm.c's logger: `s:N trl:X lr:Y norm:Z` every step, `s:N tel:X` at evals."""
    return _last_value_log(
        records, interval, out / "main.log", [],
        lambda r, v: f"s:{r['step']} tel:{_f(v, '.6f')}",
        lambda r: f"s:{r['step']} trl:{_f(r['loss'], '.6f')} lr:{r['lr']:.6e} norm:{_f(r['grad_norm'], '.4f')}")


def write_hf_console(records, meta, out: Path, interval: int = 10) -> Rows:
    """The HF Trainer's console dicts, each after the training bar's frame (its counter is the
    global step: the reader takes it)."""
    out.mkdir(parents=True, exist_ok=True)
    total = meta["config"]["total_steps"]
    lines, rows = ["***** Running training *****", f"  Total optimization steps = {total}"], []
    for g in _groups(records, interval, 1):
        last = records[g[-1]]
        d = {"loss": round(_mean_loss(records, g), 4), "grad_norm": last["grad_norm"],
             "learning_rate": last["lr"], "epoch": round(last["tokens"] / 180_000, 2)}
        body = ", ".join(f"'{k}': {_f(v, 'r') if isinstance(v, float) and not math.isfinite(v) else repr(v)}"
                         for k, v in d.items())
        pct = int(100 * (last["step"] + 1) / total)
        lines.append(f"{pct:3d}%|{'#' * (pct // 10):<10}| {last['step'] + 1}/{total} [00:10<00:20, 9.5it/s]")
        lines.append("{" + body + "}")
        rows.append((last["step"] + 1, g))
        evals = [records[i]["val_loss"] for i in g if "val_loss" in records[i]]
        if evals:
            lines.append("{" + f"'eval_loss': {evals[-1]!r}, 'eval_runtime': 0.41, "
                         f"'eval_samples_per_second': 9990.2, 'epoch': {d['epoch']}" + "}")
    lines.append("{'train_runtime': 12.3, 'train_samples_per_second': 99.1, 'train_loss': 1.9, 'epoch': 1.0}")
    (out / "console.log").write_text("\n".join(lines) + "\n")
    return rows


def write_epochs(records, meta, out: Path, interval: int = 50) -> Rows:
    """Keras' CSVLogger: one row per epoch (`interval` steps), numbered from 0, the epoch's mean
    loss, the LR and the epoch's last validation loss."""
    out.mkdir(parents=True, exist_ok=True)
    lines, rows = ["epoch,loss,lr,val_loss"], []
    groups = [list(range(k, min(k + interval, len(records)))) for k in range(0, len(records), interval)]
    for epoch, g in enumerate(groups):
        if len(g) < interval // 2:
            break                              # a last partial epoch is not written
        last = records[g[-1]]
        evals = [records[i]["val_loss"] for i in g if "val_loss" in records[i]]
        lines.append(f"{epoch},{_f(_mean_loss(records, g), '.6f')},{last['lr']:.6g},"
                     f"{_f(evals[-1], '.6f') if evals else ''}")
        rows.append((epoch, g))
    (out / "training.log.csv").write_text("\n".join(lines) + "\n")
    return rows


def write_deepspeed(records, meta, out: Path, interval: int = 10) -> Rows:
    """DeepSpeed's engine log with no loss in it: `[Rank 0] step=N, skipped=K, lr=[..]` every
    `interval` steps (K: the skipped steps so far) and the loss scaler's OVERFLOW line at every
    skipped step (at its floor the scale is 'reduced' to itself)."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = "[2024-05-01 10:00:00,000] [INFO]"
    lines = [f"{stamp} [config.py:1000:print] DeepSpeedEngine configuration:",
             f"{stamp} [config.py:1004:print]   fp16_enabled ................. {meta['dtype'] == 'fp16'}",
             f"{stamp} [config.py:1004:print]   loss_scale ................... "
             f"{meta['config'].get('loss_scale') or 0}"]
    rows, skipped = [], 0
    for g in _groups(records, interval, 1):
        for i in g:
            r = records[i]
            if r.get("skipped"):
                skipped += 1
                nxt = records[i + 1]["loss_scale"] if i + 1 < len(records) else r["loss_scale"] / 2
                lines.append(f"{stamp} [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                             f"Skipping step. Attempted loss scale: {r['loss_scale']:g}, reducing to {nxt:g}")
        last = records[g[-1]]
        lines.append(f"{stamp} [logging.py:96:log_dist] [Rank 0] step={last['step'] + 1}, skipped={skipped}, "
                     f"lr=[{last['lr']:.6e}], mom=[(0.9, 0.95)]")
        rows.append((last["step"] + 1, g))
    (out / "deepspeed.log").write_text("\n".join(lines) + "\n")
    return rows


WRITERS = {"jsonl": write_jsonl, "csv": write_csv, "hf-trainer-state": write_hf_trainer_state,
           "tensorboard": write_tensorboard, "megatron": write_megatron, "nanogpt": write_nanogpt,
           "llm.c": write_llmc, "hf-console": write_hf_console, "epochs": write_epochs,
           "deepspeed": write_deepspeed}
