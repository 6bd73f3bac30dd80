"""What the three examples share: a tiny corpus a small GPT learns in a minute on a laptop CPU,
rare tokens kept out of it (the long-tail-token case puts them in one batch), and the causes
each example can inject. No downloads: the tokens are made here, from a seed.
"""

from __future__ import annotations

import torch

VOCAB = 512
COMMON = 448                 # ids below this make up the corpus; the rest are rare
BLOCK = 32
CAUSES = ("none", "long-tail-token", "lr-discontinuity", "optimizer-reset", "fp16-overflow")


def sequences(n: int, block: int = BLOCK, seed: int = 0) -> torch.Tensor:
    """`n` token sequences of length block + 1 from a random bigram chain with a few likely
    successors per token: enough structure that the loss falls well below ln(VOCAB)."""
    gen = torch.Generator().manual_seed(seed)
    successors = torch.randint(0, COMMON, (COMMON, 4), generator=gen)
    out = torch.empty(n, block + 1, dtype=torch.long)
    out[:, 0] = torch.randint(0, COMMON, (n,), generator=gen)
    for t in range(1, block + 1):
        pick = torch.randint(0, 4, (n,), generator=gen)
        out[:, t] = successors[out[:, t - 1], pick]
    return out


def rare(n: int, block: int = BLOCK, seed: int = 1) -> torch.Tensor:
    """`n` sequences of tokens the corpus never has: a batch of them spikes the loss."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(COMMON, VOCAB, (n, block + 1), generator=gen)


def fp16_on_cpu() -> str | None:
    """None when this CPU runs fp16 autocast with a loss scaler; else why not."""
    try:
        with torch.autocast("cpu", dtype=torch.float16):
            y = torch.nn.functional.linear(torch.ones(2, 4), torch.ones(3, 4))
        if y.dtype != torch.float16:
            return "this torch build's CPU autocast does not run fp16"
        torch.amp.GradScaler("cpu")
    except (RuntimeError, TypeError, ValueError) as err:
        return f"fp16 on this CPU: {err}"
    return None


class Steps:
    """The training's steps on stderr, as `postmortem` shows long work: rich's bar on a
    terminal, a line every `every` steps in a pipe. Called with (step, loss) after each step."""

    def __init__(self, total: int, every: int = 50, enabled: bool = True):
        self.total, self.every, self.enabled, self.bar = total, every, enabled, None

    def __enter__(self) -> "Steps":
        import sys
        if self.enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.bar.__enter__()
            self.task = self.bar.add_task("training", total=self.total)
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def __call__(self, step: int, loss: float | None) -> None:
        import sys
        shown = f"step {step}" + (f" loss {loss:.4f}" if loss is not None else "")
        if self.bar is not None:
            self.bar.update(self.task, completed=min(step + 1, self.total), description=f"training: {shown}")
        elif self.enabled and (step % self.every == 0 or step == self.total - 1):
            print(f"training: {shown} of {self.total}", file=sys.stderr, flush=True)


def finished(out) -> None:
    """Where the run was written and what to type next."""
    from pathlib import Path
    out = Path(out)
    kept = sorted(p.name + ("/" if p.is_dir() else "") for p in out.iterdir()) if out.is_dir() else []
    print(f"wrote {out}: {', '.join(kept)}\n"
          f"next: postmortem analyze {out}    (then `postmortem replay {out}`, or `postmortem {out}` "
          "for the dashboard)")
