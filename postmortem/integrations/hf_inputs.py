"""A Trainer step's input_ids, end to end: what the callback hashes while the run trains
and what the replay hashes again to check that its batch is the logged one."""

from __future__ import annotations

import torch


def step_inputs(ids: list[torch.Tensor]) -> torch.Tensor:
    """The input_ids of a step's micro-batches, end to end: what its batch hash is of."""
    return ids[0] if len(ids) == 1 else torch.cat([t.reshape(-1) for t in ids])
