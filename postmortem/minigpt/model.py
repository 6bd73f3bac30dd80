"""A nanoGPT-style mini-GPT: pre-LN blocks, GELU MLP, causal attention, tied embeddings."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    vocab_size: int = 512
    block_size: int = 32
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    init_std: float = 0.02          # the bad-init sample multiplies this by 100


class ResidualProjection(nn.Linear):
    """A projection back into the residual stream: GPT-2 draws its initial weights
    1/sqrt(2 n_layer) smaller (GPT._init)."""


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = ResidualProjection(cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)     # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.proj = ResidualProjection(4 * cfg.n_embd, cfg.n_embd)
        # Outlier features: the fp16-overflow sample scales the hidden units up and the
        # output back down. Exact in fp32; past 65504 in fp16, where it becomes inf.
        self.gain = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.fc(x))
        if self.gain == 1.0:
            return self.proj(h)
        return self.proj(h * self.gain) / self.gain


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.wte.weight                      # tied embeddings
        self.apply(self._init)

    def _init(self, m: nn.Module) -> None:
        # GPT-2: N(0, 0.02); residual projections scaled by 1/sqrt(2 n_layer)
        std = self.cfg.init_std
        if isinstance(m, nn.Linear):
            scale = 1 / math.sqrt(2 * self.cfg.n_layer) if isinstance(m, ResidualProjection) else 1.0
            nn.init.normal_(m.weight, 0.0, std * scale)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, std)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Token ids (B, T) -> logits (B, T, V)."""
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    def param_groups(self, weight_decay: float) -> list[dict]:
        """AdamW groups: 2-D weights decay; biases, LayerNorm and embeddings' 1-D params do not."""
        decay = [p for p in self.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.dim() < 2]
        return [{"params": decay, "weight_decay": weight_decay},
                {"params": no_decay, "weight_decay": 0.0}]


class TokenLoss(nn.Module):
    """Per-token cross-entropy, (B, T) — the replay's probes read it token by token."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(),
                               reduction="none").view_as(targets)


class NaiveTokenLoss(nn.Module):
    """The numerics bug: log(softmax(x)) by hand. A probability that underflows to 0 gives
    log(0) = -inf, and the loss goes to inf, then NaN."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(logits.float(), dim=-1)
        picked = probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return -torch.log(picked)
