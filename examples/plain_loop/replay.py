"""The plain loop's replay factory: the run's own objects, handed to postmortem's replay.

train.py copies this file beside the run and names it in the manifest
(`"replay": {"entrypoint": "replay:make_replay"}`); `postmortem replay OUT` imports it from
OUT and calls it for each arm. Under `--nproc N` torch.distributed is set up before the call:
the model goes into DDP and `batch_at` gives this rank its part of the batch.
"""

import torch
import torch.distributed as dist
import train

from postmortem.replay import Replayable


def make_replay(manifest, run_dir, device):
    args = train.settings(["--out", str(run_dir)])
    vars(args).update(manifest.args)                      # the settings the run trained with
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    device = torch.device(device)
    model, optimizer, scheduler, scaler = train.build(args, device)
    forward = train.wrap(model, device, world)
    data = train.corpus(args)
    return Replayable(
        model=model, optimizer=optimizer, scheduler=scheduler, dtype=args.dtype, clip=train.CLIP,
        scaler=scaler if scaler.is_enabled() else None,
        batch_at=lambda step: train.batch_at(args, data, step, rank, world),
        loss=lambda step, batch: train.per_token_loss(args, model, step, *batch, forward=forward),
        scheduled_lr=lambda step: train.scheduled_lr(args, step),           # the schedule without the bug
        token_frequency=train.token_counts(data))
