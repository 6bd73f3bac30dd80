"""The token streams and `batch_at(step)`: the exact batch of any step, loader bugs included."""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch

from postmortem.minigpt.config import TrainConfig
from postmortem.minigpt.corpus import make_corpus, split
from postmortem.minigpt.tokenizer import train_tokenizer


class Data:
    """Train/val token streams; batches are a pure function of (seed, step)."""

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        train_text, val_text = split(make_corpus(cfg.n_sentences, seed=cfg.corpus_seed))
        self.tokenizer = train_tokenizer(train_text, cfg.vocab_size)
        end = self.tokenizer.token_to_id("<|end|>")

        def stream(lines: list[str]) -> np.ndarray:
            ids = []
            for enc in self.tokenizer.encode_batch(lines):
                ids += enc.ids + [end]
            return np.array(ids, dtype=np.int64)
        self.train, self.val = stream(train_text), stream(val_text)
        self.freq = Counter(self.train.tolist())
        # Pieces seen at most twice in training: the long tail a burst is made of.
        self.rare = np.array(sorted(t for t, c in self.freq.items() if c <= 2), dtype=np.int64)

    def _clean(self, step: int) -> np.ndarray:
        rng = np.random.default_rng([self.cfg.seed, step])
        T = self.cfg.block_size
        return rng.integers(0, len(self.train) - T - 1, self.cfg.batch_size)

    def batch_index(self, step: int) -> int:
        """The loader's index of the batch trained at `step` (the duplicate bug repeats one)."""
        inj = self.cfg.injection
        if inj.kind == "bad-data" and inj.step <= step < inj.step + inj.length:
            return inj.step
        return step

    def batch_at(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y) token ids, each (B, T)."""
        T = self.cfg.block_size
        starts = self._clean(self.batch_index(step))
        x = np.stack([self.train[s:s + T] for s in starts])
        y = np.stack([self.train[s + 1:s + T + 1] for s in starts])
        inj = self.cfg.injection
        if inj.kind == "long-tail-token" and step == inj.step:
            # A shard of junk made of long-tail pieces lands in one batch.
            rng = np.random.default_rng([self.cfg.seed, step, 7])
            rows = int(round(inj.fraction * len(x)))
            soup = rng.choice(self.rare, size=(rows, T + 1))
            x[:rows], y[:rows] = soup[:, :-1], soup[:, 1:]
        return torch.from_numpy(x), torch.from_numpy(y)

    def val_batches(self, n: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
        T, B = self.cfg.block_size, self.cfg.batch_size
        out = []
        for i in range(n):
            starts = np.arange(B) * ((len(self.val) - T - 1) // B) + i
            starts = np.minimum(starts, len(self.val) - T - 2)
            out.append((torch.from_numpy(np.stack([self.val[s:s + T] for s in starts])),
                        torch.from_numpy(np.stack([self.val[s + 1:s + T + 1] for s in starts]))))
        return out
