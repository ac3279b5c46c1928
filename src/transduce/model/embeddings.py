"""Token embeddings scaled by sqrt(d), plus sinusoidal or learned positions, then dropout."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoid(positions: Tensor, d: int, layout: str = "interleaved", frequencies: str = "paper") -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), for any positions.

    `layout="halves"` puts all sines first and all cosines after (Marian's convention).
    `frequencies="tensor2tensor"` spaces the d/2 frequencies from 1 to exactly 1/10000,
    pos / 10000^(i/(d/2 - 1)), as tensor2tensor's get_timing_signal_1d and fairseq (so M2M100 and
    NLLB) do; the paper's lowest is 1/10000^((d-2)/d). An odd d leaves the last column zero.
    positions: (n,) integer or float tensor. Returns (n, d) float32.
    """
    half = d // 2
    if frequencies == "paper":
        step = 2.0 * math.log(10000.0) / d
    elif frequencies == "tensor2tensor":
        step = math.log(10000.0) / max(half - 1, 1)
    else:
        raise ValueError(f"unknown sinusoid frequencies '{frequencies}'; allowed: paper, tensor2tensor")
    freq = torch.exp(torch.arange(half, dtype=torch.float64, device=positions.device) * -step)
    angles = positions.to(torch.float64)[:, None] * freq[None, :]  # (n, d/2)
    out = torch.zeros(positions.numel(), d, dtype=torch.float64, device=positions.device)
    if layout == "interleaved":
        out[:, 0 : 2 * half : 2] = torch.sin(angles)
        out[:, 1 : 2 * half : 2] = torch.cos(angles)
    elif layout == "halves":
        out[:, :half] = torch.sin(angles)
        out[:, half : 2 * half] = torch.cos(angles)
    else:
        raise ValueError(f"unknown sinusoid layout '{layout}'; allowed: interleaved, halves")
    return out.float()


class SinusoidalPositions(nn.Module):
    """Fixed encodings, computed for as many positions as asked (never a length limit).

    Position p is encoded as the sinusoid of p + `offset`: fairseq's models number their first
    token padding_idx + 1 (2 in M2M100 and NLLB), and the table is read at those rows."""

    def __init__(
        self,
        d: int,
        layout: str = "interleaved",
        initial: int = 1024,
        *,
        offset: int = 0,
        frequencies: str = "paper",
    ) -> None:
        super().__init__()
        self.d, self.layout, self.offset, self.frequencies = d, layout, offset, frequencies
        self.register_buffer("table", self._rows(initial), persistent=False)

    def _rows(self, count: int) -> Tensor:
        """The encodings of positions 0..count-1 (sinusoids of offset..offset+count-1)."""
        return sinusoid(torch.arange(count) + self.offset, self.d, self.layout, self.frequencies)

    def _cover(self, end: int) -> None:
        """Grow the table to hold positions 0..end-1."""
        if end > self.table.shape[0]:
            self.table = self._rows(max(end, 2 * self.table.shape[0])).to(self.table.device)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        self._cover(offset + length)
        return self.table[offset : offset + length]  # (length, d)

    def at(self, positions: Tensor) -> Tensor:
        """The encodings of arbitrary positions (..., n) -> (..., n, d), e.g. randomised ones."""
        self._cover(int(positions.max()) + 1)
        return self.table[positions.to(self.table.device)]


class LearnedPositions(nn.Module):
    """Learned absolute position embeddings (the paper's Table 3 row E)."""

    def __init__(self, d: int, max_positions: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_positions, d))
        nn.init.normal_(self.weight, std=d**-0.5)

    def _check(self, end: int) -> None:
        if end > self.weight.shape[0]:
            raise ValueError(
                f"sequence position {end} exceeds model.max_positions={self.weight.shape[0]} "
                "of the learned position embeddings"
            )

    def forward(self, length: int, offset: int = 0) -> Tensor:
        self._check(offset + length)
        return self.weight[offset : offset + length]

    def at(self, positions: Tensor) -> Tensor:
        """The embeddings of arbitrary positions (..., n) -> (..., n, d), e.g. randomised ones."""
        self._check(int(positions.max()) + 1)
        return self.weight[positions.to(self.weight.device)]


class Embedding(nn.Module):
    """x = Dropout(E[ids] * sqrt(d) + P[offset : offset + len]), or P at the given `positions`
    (drawn at random in training, spread in evaluation: randomised_positions.py)."""

    def __init__(
        self,
        vocab_size: int,
        d: int,
        *,
        pad_id: int,
        dropout: float,
        positions: str = "sinusoidal",
        max_positions: int = 1024,
        layout: str = "interleaved",
        scale: bool = True,
        position_offset: int = 0,
        frequencies: str = "paper",
        token_row: tuple[int, int] | None = None,
    ) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d, padding_idx=pad_id)
        # (token, row): that token id reads another's row (fairseq's decoder starts from </s>'s)
        self.token_row = token_row
        nn.init.normal_(self.tokens.weight, std=d**-0.5)
        with torch.no_grad():
            self.tokens.weight[pad_id].zero_()
        self.scale = math.sqrt(d) if scale else 1.0
        # positions="none": a UT adds its coordinates at every step instead
        self.positions: SinusoidalPositions | LearnedPositions | None = None
        if positions == "sinusoidal":
            self.positions = SinusoidalPositions(d, layout, offset=position_offset, frequencies=frequencies)
        elif positions == "learned":
            self.positions = LearnedPositions(d, max_positions)
        self.dropout = nn.Dropout(dropout)
        self.factors: nn.ModuleList | None = None
        self.combine: nn.Module | None = None

    def add_factors(self, vocab_sizes: list[int], combine: str, pad_id: int) -> None:
        """Factored input (survey eqs. 51-52): one tag embedding table per factor, combined
        with the word embedding by a sum, or by a one- or two-layer FFN over their concatenation."""
        d = self.tokens.embedding_dim
        self.factors = nn.ModuleList(nn.Embedding(size, d, padding_idx=pad_id) for size in vocab_sizes)
        for table in self.factors:
            nn.init.normal_(table.weight, std=d**-0.5)
        width = d * (len(vocab_sizes) + 1)
        if combine == "ffn1":
            self.combine = nn.Linear(width, d)
        elif combine == "ffn2":
            self.combine = nn.Sequential(nn.Linear(width, d), nn.ReLU(), nn.Linear(d, d))

    def _words(self, ids: Tensor, factors: Tensor | None) -> Tensor:
        if self.token_row is not None:
            ids = ids.masked_fill(ids.eq(self.token_row[0]), self.token_row[1])
        x = self.tokens(ids) * self.scale  # (batch, len, d)
        if self.factors is None:
            return x
        if factors is None or factors.shape[1] != len(self.factors):
            got = "none" if factors is None else factors.shape[1]
            raise ValueError(f"this model takes {len(self.factors)} tag factor(s) per token; got {got}")
        tags = [table(factors[:, k]) * self.scale for k, table in enumerate(self.factors)]
        if self.combine is None:
            return x + sum(tags)
        return self.combine(torch.cat([x, *tags], dim=-1))

    def forward(
        self, ids: Tensor, offset: int = 0, factors: Tensor | None = None, positions: Tensor | None = None
    ) -> Tensor:
        """ids: (batch, len), the first at position `offset`; factors: (batch, k, len) tag ids when
        the model is factored; positions: (len,) or (batch, len) to add instead of
        offset..offset+len-1."""
        x = self._words(ids, factors)
        if self.positions is not None:
            n = ids.shape[1]
            signal = self.positions(n, offset) if positions is None else self.positions.at(positions)
            x = x + signal.to(x.dtype)
        return self.dropout(x)
