"""The usual remedies of each pattern: what the editor offers for section 5. Suggestions,
never filled in for the author: the remediation has to be what this run needs."""

from __future__ import annotations

REMEDIES: dict[str, tuple[str, ...]] = {
    "long-tail-token": (
        "filter or dedupe the documents behind the suspect batch (junk, long runs of rare tokens)",
        "shuffle at the document level so rare-token text is not concentrated in one batch",
        "skip a batch whose loss exceeds 3x the running mean, and log its index",
        "lower lr_max or warm up longer so one batch's gradient cannot dominate",
    ),
    "fp16-overflow": (
        "train in bf16 instead of fp16 (same range as fp32)",
        "keep the dynamic loss scaler and log the scale every step",
        "compute softmax, norms and the loss in fp32 (autocast does; hand-written code may not)",
        "bound the activations: QK-layernorm, or scale the residual branches at init",
    ),
    "lr-discontinuity": (
        "derive the LR from the global step, never from a counter that restarts",
        "save and restore the scheduler state with every checkpoint",
        "plot lr(step) from the config before training and after every resume",
    ),
    "optimizer-reset": (
        "save and restore the optimizer state (Adam moments) with every checkpoint",
        "on a resume without the moments, re-warm the LR over a few hundred steps",
        "assert on resume that optimizer.state is not empty",
    ),
    "numerics": (
        "use F.cross_entropy / log_softmax instead of log(softmax(x))",
        "add an epsilon where dividing or taking a log; clamp before exp",
        "find the first non-finite module with forward hooks (postmortem replay) and fix that op",
    ),
    "bad-data": (
        "fix the loader so no batch repeats (log a hash of every batch and check it)",
        "reseed the shuffle each epoch and assert the sampler covers the dataset once",
    ),
    "lr-too-high": (
        "lower lr_max by 2-3x",
        "lengthen the warmup",
        "clip the grad norm at 1.0",
    ),
    "schedule-misconfigured": (
        "fix the schedule (warmup, then decay to lr_min by total_steps) and plot it before training",
        "check warmup_steps and total_steps against the run's real length",
    ),
    "weight-decay": (
        "exclude biases, norms and embeddings from weight decay",
        "set weight decay to about 0.1 for AdamW, not 1.0",
    ),
    "bad-init": (
        "initialise with std 0.02 and scale the residual projections by 1/sqrt(2 n_layer)",
        "check the loss at step 0 is about ln(vocab size) before training",
    ),
}


def remedies_for(pattern: str | None) -> tuple[str, ...]:
    return REMEDIES.get(pattern or "", ())
