"""Scaled dot-product and multi-head attention with additive and multiplicative masks.

softmax((Q K^T / sqrt(d_k)) * M_mul + M_add) V. M_add holds 0 or -inf (key padding, causal,
local window) or soft syntax biases (survey eq. 53); M_mul is the survey's eq. 54 score mask.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .cache import KVCache, StaticKV, StaticKVCache

NEG_INF = float("-inf")


def padding_mask(pad: Tensor) -> Tensor:
    """(batch, k_len) bool, True at padding -> additive (batch, 1, 1, k_len)."""
    mask = torch.zeros(pad.shape, dtype=torch.float32, device=pad.device)
    return mask.masked_fill(pad, NEG_INF)[:, None, None, :]


def causal_mask(q_len: int, k_len: int, offset: int = 0, device: torch.device | None = None) -> Tensor:
    """Additive (q_len, k_len): the query at absolute position offset + i sees keys j <= offset + i."""
    i = torch.arange(q_len, device=device)[:, None] + offset
    j = torch.arange(k_len, device=device)[None, :]
    return torch.zeros(q_len, k_len, device=device).masked_fill(j > i, NEG_INF)


def local_mask(
    q_len: int, k_len: int, radius: int, offset: int = 0, device: torch.device | None = None
) -> Tensor:
    """Additive (q_len, k_len) for restricted self-attention: only |i - j| <= radius is seen."""
    i = torch.arange(q_len, device=device)[:, None] + offset
    j = torch.arange(k_len, device=device)[None, :]
    return torch.zeros(q_len, k_len, device=device).masked_fill((i - j).abs() > radius, NEG_INF)


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Sum the additive masks that are present (broadcasting), or None if there are none."""
    present = [m for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = out + m
    return out


def scaled_dot_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    score_mask: Tensor | None = None,
    dropout: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Attention over (batch, heads, len, d_head) tensors.

    Uses torch's fused kernel unless weights are wanted or a multiplicative mask is given;
    the plain path computes the same formula step by step and returns the weights.
    """
    if mask is not None and mask.dtype != q.dtype:
        mask = mask.to(q.dtype)
    if score_mask is None and not need_weights:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout), None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (batch, heads, q_len, k_len)
    if score_mask is not None:
        scores = scores * score_mask.to(scores.dtype)
    if mask is not None:
        scores = scores + mask
    weights = scores.softmax(dim=-1)
    dropped = F.dropout(weights, p=dropout) if dropout > 0 else weights
    return dropped @ v, weights


def group_queries(q: Tensor, batch: int, *masks: Tensor | None) -> tuple[Tensor, Callable[[Tensor], Tensor]]:
    """Join g consecutive query rows per key row (the beams of one source) into one row.

    q: (g * batch, heads, n, d_head) -> (batch, heads, g * n, d_head), and the function that
    splits a result (output or weights) back per row. Masks must have one row per key row (or
    broadcast). Each source's g x n queries then attend together, so beam search keeps and
    reads one copy of the cross-attention keys/values per source instead of one per beam.
    """
    rows, h, n, dh = q.shape
    if rows % batch:
        raise ValueError(f"{rows} query rows cannot be grouped over {batch} key rows")
    for m in masks:
        if m is not None and m.dim() == 4 and (m.shape[0] not in (1, batch) or m.shape[2] != 1):
            raise ValueError(f"a grouped attention mask must be (batch or 1, _, 1, m), got {tuple(m.shape)}")
    g = rows // batch

    def ungroup(x: Tensor) -> Tensor:  # (batch, h, g * n, e) -> (g * batch, h, n, e)
        return x.view(batch, h, g, n, x.shape[-1]).transpose(1, 2).reshape(rows, h, n, x.shape[-1])

    return q.view(batch, g, h, n, dh).transpose(1, 2).reshape(batch, h, g * n, dh), ungroup


def local_attention(
    q: Tensor, k: Tensor, v: Tensor, radius: int, key_bias: Tensor | None, dropout: float = 0.0
) -> Tensor:
    """Restricted self-attention (|i - j| <= radius) in blocks, linear in length.

    Queries go in blocks of B positions; block b sees keys [bB - radius, bB + B + radius), so
    time and memory grow with n * (B + 2 radius) instead of n^2. key_bias: additive
    (batch, 1, 1, n) key padding mask. Every query may always see itself, so a padding query
    whose whole window is padding stays finite (real queries are unaffected: they are not
    padding). Equals full attention with `local_mask` at every real position (tested).
    """
    b, h, n, dh = q.shape
    block = max(radius, 32)
    width = block + 2 * radius
    blocks = -(-n // block)
    total = blocks * block
    qb = F.pad(q, (0, 0, 0, total - n)).view(b, h, blocks, block, dh)

    def windows(x: Tensor) -> Tensor:  # (b, h, n, dh) -> (b, h, blocks, width, dh)
        return F.pad(x, (0, 0, radius, total - n + radius)).unfold(2, width, block).transpose(-1, -2)

    i = torch.arange(block, device=q.device)[:, None]
    j = torch.arange(width, device=q.device)[None, :]
    offset = j - i  # key position - query position + radius
    allowed = (offset >= 0) & (offset <= 2 * radius)
    bias = torch.zeros(block, width, device=q.device).masked_fill(~allowed, NEG_INF)  # (block, width)
    bias = bias.expand(b, 1, blocks, block, width)
    keys = torch.zeros(b, n, device=q.device) if key_bias is None else key_bias.reshape(b, n).float()
    keys = F.pad(keys, (radius, total - n + radius), value=NEG_INF).unfold(
        1, width, block
    )  # (b, blocks, width)
    bias = bias + keys[:, None, :, None, :]
    bias = torch.where(offset == radius, torch.zeros((), device=q.device), bias).to(q.dtype)
    out = F.scaled_dot_product_attention(qb, windows(k), windows(v), attn_mask=bias, dropout_p=dropout)
    return out.reshape(b, h, total, dh)[:, :, :n]


def _is_key_mask(mask: Tensor | None) -> bool:
    return mask is None or (mask.dim() == 4 and mask.shape[1] == 1 and mask.shape[2] == 1)


class FusedQKV(nn.Linear):
    """W^Q; W^K; W^V stacked in one (3d, d) projection: one matmul for self-attention, and
    its query or key/value rows alone for cross-attention."""

    def query(self, x: Tensor) -> Tensor:
        d = self.out_features // 3
        return F.linear(x, self.weight[:d], self.bias[:d] if self.bias is not None else None)

    def key_value(self, x: Tensor) -> Tensor:
        d = self.out_features // 3
        return F.linear(x, self.weight[d:], self.bias[d:] if self.bias is not None else None)


class MultiHeadAttention(nn.Module):
    """h heads of d_k = d / h with one fused Q/K/V projection and an output projection W^O."""

    def __init__(
        self, d: int, heads: int, *, dropout: float = 0.0, bias: bool = True, local_radius: int | None = None
    ) -> None:
        """local_radius: restrict self-attention to |i - j| <= radius (blocked, linear in length)."""
        super().__init__()
        self.d, self.heads, self.d_head = d, heads, d // heads
        self.dropout, self.local_radius = dropout, local_radius
        self.recorder: list[Tensor] | None = None  # set by `record_attention`
        self.in_proj: FusedQKV | nn.Module = FusedQKV(d, 3 * d, bias=bias)  # rows: W^Q; W^K; W^V
        self.out_proj = nn.Linear(d, d, bias=bias)
        nn.init.xavier_uniform_(self.in_proj.weight)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if bias:
            nn.init.zeros_(self.in_proj.bias)
            nn.init.zeros_(self.out_proj.bias)

    def _split(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape  # (batch, len, d) -> (batch, heads, len, d_head)
        return x.view(b, n, self.heads, self.d_head).transpose(1, 2)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of a memory (the encoder output), each (batch, heads, m, d_head)."""
        k, v = self.in_proj.key_value(memory).chunk(2, dim=-1)
        return self._split(k), self._split(v)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        mask: Tensor | None = None,
        score_mask: Tensor | None = None,
        cache: KVCache | StaticKVCache | StaticKV | None = None,
    ) -> Tensor:
        """Self-attention when memory is None, else cross-attention to memory.

        x: (batch, n, d). A KVCache appends this call's keys/values (self-attention), a
        StaticKVCache writes them at its position;
        a StaticKV stores the memory's keys/values on first use (cross-attention). In
        cross-attention x may hold g consecutive rows per memory row (beams): see
        `group_queries`. While a recorder is set, the weights are appended to it.
        """
        need_weights = self.recorder is not None
        if memory is None:
            q, k, v = (self._split(t) for t in self.in_proj(x).chunk(3, dim=-1))
            if isinstance(cache, (KVCache, StaticKVCache)):
                k, v = cache.update(k, v)
        else:
            q = self._split(self.in_proj.query(x))
            if isinstance(cache, StaticKV):
                if cache.k is None:
                    cache.k, cache.v = self.project_kv(memory)
                k, v = cache.k, cache.v
            else:
                k, v = self.project_kv(memory)
        p = self.dropout if self.training else 0.0
        if memory is None and self.local_radius is not None:
            if cache is None and score_mask is None and not need_weights and _is_key_mask(mask):
                return self._merge(local_attention(q, k, v, self.local_radius, mask, p))
            n = q.shape[2]
            mask = combine_masks(mask, local_mask(n, n, self.local_radius, 0, q.device)).clone()
            mask.diagonal(dim1=-2, dim2=-1).zero_()  # as in local_attention: padding rows stay finite
        ungroup = None
        if memory is not None and q.shape[0] != k.shape[0]:
            q, ungroup = group_queries(q, k.shape[0], mask, score_mask)
        out, weights = scaled_dot_product(
            q, k, v, mask, score_mask=score_mask, dropout=p, need_weights=need_weights
        )
        if ungroup is not None:
            out, weights = ungroup(out), ungroup(weights) if weights is not None else None
        if self.recorder is not None and weights is not None:
            self.recorder.append(weights)
        return self._merge(out)

    def _merge(self, heads: Tensor) -> Tensor:
        """(batch, heads, n, d_head) -> the output projection of the joined heads (batch, n, d)."""
        b, _, n, _ = heads.shape
        return self.out_proj(heads.transpose(1, 2).reshape(b, n, self.d))


@contextmanager
def record_attention(model: nn.Module) -> Iterator[dict[str, list[Tensor]]]:
    """Capture attention weights while the block runs, for plots and inspection.

    Yields {module name: [one (batch, heads, queries, keys) tensor per call]}, in module
    order; a Universal Transformer's shared layer gets one entry per recurrent step. Only
    recording modules leave the fused kernel, so ordinary calls pay nothing.
    """
    modules = [(name, m) for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)]
    records: dict[str, list[Tensor]] = {}
    for name, module in modules:
        module.recorder = records.setdefault(name, [])
    try:
        yield records
    finally:
        for _, module in modules:
            module.recorder = None
