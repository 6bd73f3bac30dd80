"""A tiny GPT trained with Lightning, recorded for postmortem: copy the callback line into your own run.

    python examples/lightning/train.py --out runs/lt --inject long-tail-token
    postmortem analyze runs/lt          # the spike at step 250, its causes ranked
    postmortem replay runs/lt           # the steps around it again, from Lightning's own .ckpt files

`build()` is the factory the replay calls to rebuild the LightningModule and its data; the
module's `per_token_loss(batch, step)` is the loss `training_step` averages, which the replay's
per-token probe reads unreduced. CPU, no downloads, well under a minute.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import warnings
from pathlib import Path

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, Sampler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # examples/ for tinydata
import tinydata  # noqa: E402

from postmortem.integrations.lightning import PostmortemCallback  # noqa: E402
from postmortem.minigpt.model import GPT, GPTConfig  # noqa: E402

BATCH = 16
EPOCH_STEPS = 50          # one pass over the corpus; a checkpoint at the end of each (a clean resume)
AT = 250                  # where an injected cause strikes


class LitGPT(pl.LightningModule):
    def __init__(self, inject: str = "none", steps: int = 400, lr_max: float = 3e-3, min_lr: float = 3e-4,
                 warmup_steps: int = 40, schedule: str = "cosine", weight_decay: float = 0.1,
                 n_layer: int = 2, n_embd: int = 48):
        super().__init__()
        self.save_hyperparameters()          # the manifest's config and the replay's build() arguments
        self.model = GPT(GPTConfig(tinydata.VOCAB, tinydata.BLOCK, n_layer, 4, n_embd))

    def per_token_loss(self, batch, step: int) -> torch.Tensor:
        """Cross-entropy of every token, (B, T): what the replay's per-token probe reads."""
        x, y = batch
        overflow = self.hparams.inject == "fp16-overflow" and AT <= step < AT + 12
        for block in self.model.blocks:      # the injected outlier features: past 65504 in fp16
            block.mlp.gain = 1e5 if overflow else 1.0
        logits = self.model(x)
        return F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), reduction="none").view_as(y)

    def training_step(self, batch, batch_idx):
        return self.per_token_loss(batch, self.global_step).mean()

    def scheduled_lr(self, step: int) -> float:
        """Linear warmup, then cosine to min_lr: the schedule the config promises."""
        h = self.hparams
        if step < h.warmup_steps:
            return h.lr_max * (step + 1) / h.warmup_steps
        progress = min(1.0, (step - h.warmup_steps) / max(1, h.steps - h.warmup_steps))
        return h.min_lr + (h.lr_max - h.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))

    def applied_lr(self, step: int) -> float:
        lr = self.scheduled_lr(step)
        if self.hparams.inject == "lr-discontinuity" and AT <= step < AT + 15:
            lr *= 25                         # the bug: a rescaled LR the config does not say
        return lr

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.model.param_groups(self.hparams.weight_decay), lr=self.hparams.lr_max,
                                betas=(0.9, 0.95), eps=1e-8, fused=False)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: self.applied_lr(s) / self.hparams.lr_max)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class JunkAt(Sampler):
    """The epoch's order (a seeded shuffle per epoch, as DistributedSampler does) with the rows
    of one step's batch swapped for a shard of rare tokens: the long-tail-token case."""

    def __init__(self, order: Sampler, junk: range | None, step: int):
        self.order, self.junk, self.step, self.epoch = order, junk, step, 0

    def set_epoch(self, epoch: int) -> None:     # Lightning calls it before each epoch
        self.epoch = epoch
        self.order.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self):
        rows = list(self.order)
        if self.junk is not None and self.epoch == self.step // EPOCH_STEPS:
            at = (self.step % EPOCH_STEPS) * BATCH
            rows[at:at + BATCH] = self.junk
        return iter(rows)


class TinyData(pl.LightningDataModule):
    def __init__(self, inject: str = "none", seed: int = 0):
        super().__init__()
        self.corpus = tinydata.sequences(EPOCH_STEPS * BATCH)
        junk = tinydata.rare(BATCH) if inject == "long-tail-token" else tinydata.sequences(0)
        self.rows = torch.cat([self.corpus, junk])
        self.junk = range(len(self.corpus), len(self.rows)) if len(junk) else None
        self.seed = seed

    def token_frequency(self) -> dict[int, int]:
        """How often each token id is in the corpus: the per-token probe's 'seen in training'."""
        ids, counts = torch.unique(self.corpus[:, 1:], return_counts=True)
        return dict(zip(ids.tolist(), counts.tolist()))

    def train_dataloader(self) -> DataLoader:
        # a seeded order per epoch: the replay draws the same batches, and a resume at an epoch end too
        order = DistributedSampler(range(len(self.corpus)), num_replicas=1, rank=0, shuffle=True, seed=self.seed)
        pairs = [(r[:-1], r[1:]) for r in self.rows]
        return DataLoader(pairs, batch_size=BATCH, sampler=JunkAt(order, self.junk, AT), drop_last=True)


def build(inject: str = "none", steps: int = 400, **hparams):
    """The replay's factory: the module and its data, as the run built them."""
    return LitGPT(inject, steps, **hparams), TinyData(inject)


class DropOptimizerState(pl.Callback):
    """The optimizer-reset bug: the resume clears Adam's moments and step counts."""

    def on_load_checkpoint(self, trainer, pl_module, checkpoint):
        for state in checkpoint["optimizer_states"]:
            state["state"] = {}


class CrashAt(pl.Callback):
    """The machine goes away before step `step` (the optimizer-reset case's crash)."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            raise RuntimeError(f"simulated crash before step {self.step}")


def trainer(out: Path, steps: int, args, *more: pl.Callback) -> pl.Trainer:
    keep = pl.callbacks.ModelCheckpoint(dirpath=out / "checkpoints", every_n_train_steps=50, save_top_k=-1)
    # Trainer(precision="16-mixed") turns into bf16 on a CPU; the plugin keeps fp16 and its loss scaler
    precision = ({"plugins": [pl.plugins.MixedPrecision("16-mixed", "cpu")]} if args.precision == "16-mixed"
                 else {"precision": args.precision})
    return pl.Trainer(max_steps=steps, default_root_dir=out, **precision, gradient_clip_val=1.0,
                      accumulate_grad_batches=args.accumulate,
                      callbacks=[PostmortemCallback(factory="train:build"), keep, *more],
                      accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, num_sanity_val_steps=0)


class ShowSteps(pl.Callback):
    """Each step on stderr (tinydata.Steps) instead of Lightning's own bar."""

    def __init__(self, shown: tinydata.Steps):
        self.shown = shown

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        self.shown(trainer.global_step - 1, float(loss) if loss is not None else None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--inject", choices=tinydata.CAUSES, default="none")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--precision", choices=["32-true", "bf16-mixed", "16-mixed"],
                   help="default: 16-mixed for fp16-overflow, else 32-true")
    p.add_argument("--accumulate", type=int, default=1,
                   help="micro-batches a step (the injected causes are placed for 1)")
    args = p.parse_args(argv)
    args.precision = args.precision or ("16-mixed" if args.inject == "fp16-overflow" else "32-true")
    if args.precision == "16-mixed" and (why := tinydata.fp16_on_cpu()):
        print(f"skipped: {why}", file=sys.stderr)
        return 0
    # quiet, as a script: no banners, tips or the warnings a CPU run of a toy model draws
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", ".*(does not have many workers|treespec|exists and is not empty).*")
    torch.set_num_threads(1)       # the sums of a 1-thread CPU replay, in the same order
    pl.seed_everything(1234, verbose=False)
    # the optimizer-reset case trains hotter (as the sample run does): a fresh Adam then shows
    hot = {"lr_max": 5e-2, "min_lr": 5e-3, "warmup_steps": 150} if args.inject == "optimizer-reset" else {}
    module, data = build(args.inject, args.steps, **hot)
    with tinydata.Steps(args.steps) as shown:
        if args.inject != "optimizer-reset":
            trainer(args.out, args.steps, args, ShowSteps(shown)).fit(module, data)
        else:
            # the run crashes before step 245, then resumes from the step-200 checkpoint, its optimizer reset
            try:
                trainer(args.out, args.steps, args, CrashAt(245), ShowSteps(shown)).fit(module, data)
            except RuntimeError as err:
                print(f"{err}: resuming from step 200", file=sys.stderr)
            module, data = build(args.inject, args.steps, **hot)
            resumed = trainer(args.out, args.steps, args, DropOptimizerState(), ShowSteps(shown))
            resumed.fit(module, data, ckpt_path=args.out / "checkpoints" / "epoch=3-step=200.ckpt")
    tinydata.finished(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
