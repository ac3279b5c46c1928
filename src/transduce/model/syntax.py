"""Syntax-aware self-attention masks from tree distances omega(i, j) (survey section 3.2).

- hard (eq. 55): M = 1 where omega <= omega_max, else the pair gets no attention at all; it is
  applied additively as 0 / -inf, so masked weights are exactly zero.
- standard: DNorm = the standardised score of -omega over each row, squashed into (0, 1)
  with a sigmoid (Chen et al., 2018a), so M falls as omega grows.
- inverse: DNorm = 1 / (1 + omega), normalised to sum to 1 over each row (Xu et al., 2021b;
  the + 1 keeps a word's distance 0 to itself finite).
- given: M is supplied directly, e.g. a parser's head probabilities, already in [0, 1].
Soft masks are added to the scaled scores (eq. 53) or multiply them (eq. 54). Only the chosen
encoder layers and heads are masked; the others get the neutral mask (0 added, 1 multiplied).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .attention import NEG_INF


def hard_mask(omega: Tensor, omega_max: int) -> Tensor:
    """Additive 0 / -inf: only pairs within `omega_max` tree steps attend."""
    return torch.zeros(omega.shape, device=omega.device).masked_fill(omega > omega_max, NEG_INF)


def standard_mask(omega: Tensor) -> Tensor:
    """sigmoid of the row-standardised -omega: in (0, 1), decreasing with distance.
    Negative omega marks padding: left out of the row statistics, and given 0."""
    valid = omega >= 0
    count = valid.sum(-1, keepdim=True).clamp(min=1)
    neg = torch.where(valid, -omega.float(), torch.zeros_like(omega, dtype=torch.float))
    mean = neg.sum(-1, keepdim=True) / count
    var = torch.where(valid, (neg - mean) ** 2, torch.zeros_like(neg)).sum(-1, keepdim=True) / count
    z = (neg - mean) / var.sqrt().clamp(min=1e-6)
    return torch.where(valid, torch.sigmoid(z), torch.zeros_like(z))


def inverse_mask(omega: Tensor) -> Tensor:
    """1 / (1 + omega), normalised over each row: in (0, 1], decreasing with distance.
    Negative omega marks padding, which gets 0."""
    inv = torch.where(omega >= 0, 1.0 / (1.0 + omega.float().clamp(min=0)), torch.zeros(()))
    return inv / inv.sum(-1, keepdim=True).clamp(min=1e-12)


@dataclass(kw_only=True)
class SyntaxMasks:
    """Turns a batch's omega (or given M) into per-layer additive and multiplicative masks."""

    kind: str  # hard | standard | inverse | given
    apply: str  # additive | multiplicative (soft kinds only)
    omega_max: int
    layers: list[int] | None  # None: every encoder layer
    heads: list[int] | None  # None: every head
    num_heads: int

    def matrix(self, syntax: Tensor) -> Tensor:
        """(batch, m, m) omega or given M -> the mask values M (additive -inf for hard)."""
        if self.kind == "hard":
            return hard_mask(syntax, self.omega_max)
        if self.kind == "standard":
            return standard_mask(syntax)
        if self.kind == "inverse":
            return inverse_mask(syntax)
        return syntax.float()

    def per_layer(self, syntax: Tensor, num_layers: int) -> tuple[list[Tensor | None], list[Tensor | None]]:
        """(additive, multiplicative) mask lists, one entry per layer, each (batch, heads, m, m)."""
        values = self.matrix(syntax).unsqueeze(1)  # (batch, 1, m, m)
        additive = self.kind == "hard" or self.apply == "additive"
        if self.heads is not None:
            chosen = torch.zeros(self.num_heads, dtype=torch.bool, device=syntax.device)
            chosen[self.heads] = True
            neutral = torch.zeros_like(values) if additive else torch.ones_like(values)
            values = torch.where(chosen[None, :, None, None], values, neutral)
        layers = range(num_layers) if self.layers is None else self.layers
        masked = [i in layers for i in range(num_layers)]
        add = [values if m and additive else None for m in masked]
        mul = [values if m and not additive else None for m in masked]
        return add, mul
