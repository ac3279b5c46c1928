"""Feed-forward network, the residual + LayerNorm sub-layer wrapper, layers and stacks.

One layer class serves the encoder (self-attention + FFN) and the decoder (masked
self-attention + cross-attention + FFN); nothing is duplicated between the two.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .cache import LayerCache

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "swish": F.silu,
}


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2, position-wise; inner dropout optional."""

    def __init__(self, d: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        self.w1 = nn.Linear(d, d_ff)
        self.w2 = nn.Linear(d_ff, d)
        self.act = ACTIVATIONS[activation]
        self.dropout = nn.Dropout(dropout)
        for lin in (self.w1, self.w2):
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(self.dropout(self.act(self.w1(x))))


class SubLayer(nn.Module):
    """post: LayerNorm(x + Dropout(F(x)));  pre: x + Dropout(F(LayerNorm(x)))."""

    def __init__(self, d: int, norm: str, dropout: float, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d, eps=eps)
        self.pre = norm == "pre"
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre:
            return x + self.dropout(fn(self.norm(x)))
        return self.norm(x + self.dropout(fn(x)))


class TransformerLayer(nn.Module):
    """Self-attention, optional cross-attention to a memory, and FFN, each in a SubLayer."""

    def __init__(
        self,
        d: int,
        heads: int,
        d_ff: int,
        dropout: float,
        attention_dropout: float = 0.0,
        ffn_dropout: float = 0.0,
        norm: str = "post",
        activation: str = "relu",
        cross_attention: bool = False,
        eps: float = 1e-5,
        transition: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d, heads, attention_dropout)
        self.self_sub = SubLayer(d, norm, dropout, eps)
        self.cross_attn = MultiHeadAttention(d, heads, attention_dropout) if cross_attention else None
        self.cross_sub = SubLayer(d, norm, dropout, eps) if cross_attention else None
        self.ffn = transition if transition is not None else FeedForward(d, d_ff, ffn_dropout, activation)
        self.ffn_sub = SubLayer(d, norm, dropout, eps)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: LayerCache | None = None,
        score_mask: Tensor | None = None,
        record: dict[str, Tensor] | None = None,
    ) -> Tensor:
        """x: (batch, n, d). `record`, when given, receives the attention weights."""
        want = record is not None

        def self_attention(h: Tensor) -> Tensor:
            out, w = self.self_attn(
                h, mask=mask, score_mask=score_mask, cache=cache.self_kv if cache else None, need_weights=want
            )
            if record is not None and w is not None:
                record["self"] = w
            return out

        x = self.self_sub(x, self_attention)
        if self.cross_attn is not None and self.cross_sub is not None and memory is not None:
            cross = self.cross_attn

            def cross_attention(h: Tensor) -> Tensor:
                out, w = cross(
                    h, memory, mask=memory_mask, cache=cache.cross_kv if cache else None, need_weights=want
                )
                if record is not None and w is not None:
                    record["cross"] = w
                return out

            x = self.cross_sub(x, cross_attention)
        return self.ffn_sub(x, self.ffn)


class Stack(nn.Module):
    """L layers, plus a final LayerNorm for pre-norm models."""

    def __init__(self, layers: list[TransformerLayer], d: int, norm: str, eps: float = 1e-5) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = nn.LayerNorm(d, eps=eps) if norm == "pre" else None

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        caches: list[LayerCache] | None = None,
        score_masks: list[Tensor | None] | None = None,
        records: list[dict[str, Tensor]] | None = None,
    ) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                mask,
                memory,
                memory_mask,
                cache=caches[i] if caches is not None else None,
                score_mask=score_masks[i] if score_masks is not None else None,
                record=records[i] if records is not None else None,
            )
        return self.final_norm(x) if self.final_norm is not None else x
