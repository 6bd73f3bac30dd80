"""Train a tiny GPT-2 with the Hugging Face Trainer, recorded for a post-mortem.

    python examples/hf_trainer/train.py --out runs/hf --inject long-tail-token
    postmortem analyze runs/hf            # the spike at step 250, its causes ranked
    postmortem replay runs/hf             # the steps again from checkpoint-200, in arms

One line makes the run diagnosable and replayable: the PostmortemCallback. It writes
metrics.jsonl and manifest.json into the output directory beside the checkpoint-N/ folders
the Trainer saves anyway, and names `build_trainer` below as the factory the replay calls to
build the same Trainer again. Keep everything that decides what a step does (the model, the
data, the schedule, the injected bugs here) inside the factory, so the replay runs it too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, PrinterCallback, Trainer, TrainerCallback, TrainingArguments
from transformers.utils import logging as hf_logging

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))       # examples/tinydata.py
import tinydata  # noqa: E402

from postmortem.integrations.hf import PostmortemCallback  # noqa: E402

SPIKE = 250          # where each injected cause strikes
RESUME_FROM = 200    # optimizer-reset: the checkpoint the crashed run resumes from


class Sequences(Dataset):
    """Token rows as the Trainer wants them; GPT-2 shifts the labels itself. The rows in
    `junk` are rare-token junk (the long-tail-token case: a corrupt shard)."""

    def __init__(self, rows: torch.Tensor):
        self.rows, self.junk = rows, {}

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        row = self.junk.get(i, self.rows[i])
        return {"input_ids": row, "labels": row}


class ScheduleBugTrainer(Trainer):
    """lr-discontinuity: the cosine schedule the arguments ask for, x25 for 15 steps."""

    def create_scheduler(self, num_training_steps, optimizer=None):
        made = self.lr_scheduler is None
        scheduler = super().create_scheduler(num_training_steps, optimizer)
        if made:
            scheduler.lr_lambdas = [lambda s, f=f: f(s) * (25.0 if SPIKE <= s < SPIKE + 15 else 1.0)
                                    for f in scheduler.lr_lambdas]
        return scheduler


def fp16_overflow(trainer: Trainer) -> None:
    """fp16-overflow: from step 250 for 12 steps the MLP hidden units are scaled by 3e4 and
    the output back down: exact in fp32, inf in fp16 (the scaler skips those steps)."""
    gain = lambda: 3e4 if SPIKE <= trainer.state.global_step < SPIKE + 12 else 1.0  # noqa: E731
    for block in trainer.model.transformer.h:
        block.mlp.act.register_forward_hook(lambda m, i, out: out * gain())
        block.mlp.c_proj.register_forward_hook(lambda m, i, out: out / gain())


def fp16_unavailable() -> str | None:
    """Why this machine cannot run the fp16 case, or None."""
    if not torch.cuda.is_available():
        return "accelerate runs fp16 mixed precision only on a GPU (on a CPU the Trainer trains in fp32)"
    return None


def build_trainer(output_dir: str, inject: str = "none", steps: int = 400, accumulate: int = 1,
                  bf16: bool = False) -> Trainer:
    """The run's Trainer: the script trains it, `postmortem replay` builds it again. A step
    is 16 sequences, in `accumulate` micro-batches."""
    hot = inject == "optimizer-reset"        # a fresh Adam only hurts at a high LR
    args = TrainingArguments(
        output_dir=output_dir, max_steps=steps, per_device_train_batch_size=16 // accumulate,
        gradient_accumulation_steps=accumulate, bf16=bf16, use_cpu=not torch.cuda.is_available(),
        learning_rate=5e-2 if hot else 3e-3, lr_scheduler_type="cosine", warmup_steps=150 if hot else 40,
        weight_decay=0.1, adam_beta2=0.95, max_grad_norm=1.0, seed=1234,
        fp16=inject == "fp16-overflow", save_strategy="steps", save_steps=50,
        logging_steps=1, report_to="none", disable_tqdm=True, dataloader_pin_memory=False)
    torch.manual_seed(args.seed)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=tinydata.VOCAB, n_positions=64, n_embd=48, n_layer=2,
                                       n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                       bos_token_id=0, eos_token_id=0))
    data = Sequences(tinydata.sequences(steps * 16))
    cls = ScheduleBugTrainer if inject == "lr-discontinuity" else Trainer
    trainer = cls(model=model, args=args, train_dataset=data,
                  callbacks=[PostmortemCallback(trainer_factory="train:build_trainer", factory_kwargs={
                      "inject": inject, "steps": steps, "accumulate": accumulate, "bf16": bf16})])
    if inject == "long-tail-token":
        # the rows the seeded shuffle puts into step 250's micro-batches are rare-token junk
        batches = list(trainer.get_train_dataloader().batch_sampler)
        rows = [i for b in batches[SPIKE * accumulate:(SPIKE + 1) * accumulate] for i in b]
        data.junk = dict(zip(rows, tinydata.rare(len(rows))))
    if inject == "fp16-overflow":
        fp16_overflow(trainer)
    trainer.remove_callback(PrinterCallback)     # quiet: every step's numbers go to metrics.jsonl
    return trainer


class Crash(TrainerCallback):
    """optimizer-reset, part 1: the run dies after step 249 (checkpoint-250 is not kept)."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == SPIKE:
            control.should_training_stop = True
            control.should_save = False


class DropOptimizerState(TrainerCallback):
    """optimizer-reset, part 2: the resume restores the model and the schedule, but the bug
    empties the optimizer (Adam's m, v and step count start again)."""

    def on_train_begin(self, args, state, control, optimizer=None, **kwargs):
        optimizer.state.clear()


class ShowSteps(TrainerCallback):
    """Each logged step on stderr (tinydata.Steps): the Trainer's own bar is off, its tqdm
    would interleave with the records."""

    def __init__(self, shown: tinydata.Steps):
        self.shown = shown

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.shown(state.global_step - 1, logs["loss"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="the output directory (the run)")
    p.add_argument("--inject", default="none", choices=tinydata.CAUSES)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--accumulate", type=int, default=1, choices=(1, 2, 4, 8, 16),
                   help="gradient accumulation: micro-batches a step")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (CPU or GPU)")
    a = p.parse_args(argv)
    if a.inject == "fp16-overflow" and (why := fp16_unavailable()):
        print(f"train.py: fp16-overflow skipped: {why}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)     # one thread: the replay's sums in the same order, bit for bit
    hf_logging.disable_progress_bar()
    with tinydata.Steps(a.steps) as shown:
        trainer = build_trainer(a.out, a.inject, a.steps, a.accumulate, a.bf16)
        trainer.add_callback(ShowSteps(shown))
        if a.inject != "optimizer-reset":
            trainer.train()
        else:
            trainer.add_callback(Crash())
            trainer.train()
            trainer = build_trainer(a.out, a.inject, a.steps, a.accumulate, a.bf16)
            trainer.add_callback(DropOptimizerState())
            trainer.add_callback(ShowSteps(shown))
            trainer.train(resume_from_checkpoint=str(Path(a.out) / f"checkpoint-{RESUME_FROM}"))
    tinydata.finished(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
