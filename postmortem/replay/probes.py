"""Probes on replayed steps: first non-finite module (forward, backward, after the step),
per-layer grad norms, Adam moments and g^2/v, per-token losses, batch hashes."""

from __future__ import annotations

import warnings

import torch

from postmortem.run.record import batch_hash


def _counts(t) -> dict | None:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        return None
    return {"nan": int(torch.isnan(t).sum()), "+inf": int(torch.isposinf(t).sum()),
            "-inf": int(torch.isneginf(t).sum()), "zeros": int((t == 0).sum()), "size": t.numel()}


def _first_tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (tuple, list)):
        return next((t for t in x if isinstance(t, torch.Tensor)), None)
    return None


def first_nonfinite(replay, step: int, batch=None) -> dict:
    """Re-run one step with hooks on every module (the way Debugger V2 finds the first bad
    tensor): the first module whose output is non-finite in the forward pass, the first
    whose gradient is in the backward pass, and the first parameter after the step."""
    found: dict = {"forward": None, "backward": None, "after_step": None}
    handles = []

    def fwd(name):
        def hook(mod, inputs, output):
            out = _first_tensor(output)
            if found["forward"] is None and out is not None and out.is_floating_point() \
                    and not torch.isfinite(out).all():
                found["forward"] = {"module": name, "input": _counts(_first_tensor(inputs)),
                                    "output": _counts(out)}
        return hook

    def bwd(name):
        def hook(mod, grad_input, grad_output):
            g = _first_tensor(grad_output)
            if found["backward"] is None and g is not None and not torch.isfinite(g).all():
                found["backward"] = {"module": name, "grad_output": _counts(g),
                                     "grad_input": _counts(_first_tensor(grad_input))}
        return hook

    for name, mod in replay.modules():
        handles.append(mod.register_forward_hook(fwd(name)))
        if next(mod.parameters(recurse=False), None) is not None or not list(mod.children()):
            handles.append(mod.register_full_backward_hook(bwd(name)))
    try:
        with warnings.catch_warnings():     # modules fed by integer ids have no input grads
            warnings.simplefilter("ignore", UserWarning)
            row = replay.forward_backward(step, batch)
        replay.optimizer_step(row)
    finally:
        for h in handles:
            h.remove()
    for name, p in replay.model.named_parameters():
        if not torch.isfinite(p).all():
            found["after_step"] = {"parameter": name, **(_counts(p.detach()) or {})}   # a float tensor: counted
            break
    return found


def layer_stats(replay) -> dict[str, dict]:
    """Per-layer grad norm, Adam moment norms and mean g^2/v, with the grads of the last
    backward still in place (before the optimizer step)."""
    out = {}
    state = replay.optimizer.state
    for name, p in replay.model.named_parameters():
        if p.grad is None or p.dim() < 2:
            continue
        g = p.grad.detach().float()
        entry = {"grad_norm": float(g.norm())}
        st = state.get(p, {})
        if "exp_avg_sq" in st:
            v = st["exp_avg_sq"].float()
            entry["adam_m_norm"] = float(st["exp_avg"].norm())
            entry["adam_v_norm"] = float(v.norm())
            entry["g2_over_v"] = float((g * g / (v + 1e-16)).mean())
        out[name.removesuffix(".weight")] = entry
    return out


@torch.no_grad()
def per_token(replay, step: int, top: int = 10) -> dict:
    """Per-token losses of the step's batch on the current weights: the histogram and the
    tokens behind the heavy tail, with their training-set frequencies."""
    batch = replay.batch_on_device(step)
    losses = replay.per_token_loss(step, batch).float().flatten()
    finite = losses[torch.isfinite(losses)]
    levels = torch.tensor([0.5, 0.9, 0.99], device=finite.device)
    q = torch.quantile(finite, levels).tolist() if len(finite) else [None] * 3
    order = torch.argsort(torch.nan_to_num(losses, nan=float("inf")), descending=True)[:top]
    freq = replay.token_frequency
    decode = replay.decode or str
    targets = replay.targets_of(batch).flatten()
    tail = targets[losses > q[1]].tolist() if q[1] is not None else []
    rare = [t for t in tail if freq is not None and freq.get(t, 0) <= 2]
    return {
        "mean": float(finite.mean()) if len(finite) else None,
        "p50": q[0], "p90": q[1], "p99": q[2],
        "heavy_tail": [{"token": decode(int(targets[i])), "loss": float(losses[i]),
                        "train_count": None if freq is None else int(freq.get(int(targets[i]), 0))}
                       for i in order],
        "rare_share_of_tail": (len(rare) / len(tail)) if tail and freq is not None else None,
    }


def hashes(replay, step: int, before: int = 50, after: int = 3) -> dict[int, str]:
    """Batch hashes of the 50 steps before the incident and a few after."""
    return {s: batch_hash(replay.inputs_of(replay.batch_at(s))) for s in range(max(0, step - before), step + after + 1)}
