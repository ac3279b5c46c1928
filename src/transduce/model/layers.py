"""Feed-forward network, the residual + LayerNorm sub-layer wrapper, layers and stacks.

One layer class serves the encoder (self-attention + FFN) and the decoder (masked
self-attention + cross-attention + FFN); nothing is duplicated between the two.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention, combine_masks
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

    def forward(self, x: Tensor, pad: Tensor | None = None, cache: LayerCache | None = None) -> Tensor:
        """Position-wise, so padding and the decoding cache do not concern it."""
        return self.w2(self.dropout(self.act(self.w1(x))))


class SeparableConv(nn.Module):
    """The UT paper's convolutional transition: a depthwise convolution over positions
    (one width-k filter per channel), then the position-wise FFN as the pointwise part.

    Causal (decoder): position i sees positions i-k+1..i, and with a cache the last k-1 inputs
    are kept so incremental decoding equals a full pass. Otherwise the window is centred.
    Padding is zeroed before the convolution, so real positions never read it.
    """

    def __init__(
        self, d: int, d_ff: int, kernel: int, causal: bool, dropout: float = 0.0, activation: str = "relu"
    ) -> None:
        super().__init__()
        self.depthwise = nn.Conv1d(d, d, kernel, groups=d)
        self.pointwise = FeedForward(d, d_ff, dropout, activation)
        self.kernel, self.causal = kernel, causal

    def forward(self, x: Tensor, pad: Tensor | None = None, cache: LayerCache | None = None) -> Tensor:
        """x: (batch, n, d); pad: (batch, n) True at padding."""
        if pad is not None:
            x = x.masked_fill(pad.unsqueeze(-1), 0.0)
        k = self.kernel
        if self.causal:
            past = cache.conv if cache is not None else None
            if past is None:
                past = x.new_zeros(x.shape[0], k - 1, x.shape[2])
            full = torch.cat([past, x], dim=1)
            if cache is not None:
                cache.conv = full[:, full.shape[1] - (k - 1) :]
        else:
            full = F.pad(x, (0, 0, (k - 1) // 2, k // 2))
        return self.pointwise(self.depthwise(full.transpose(1, 2)).transpose(1, 2))


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
    """Self-attention, optional cross-attention to a memory, and a transition, each in a SubLayer.

    The transition is the FFN, or with `conv_kernel` a depthwise-separable convolution
    (causal when `causal`, as in decoders).
    """

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
        conv_kernel: int | None = None,
        causal: bool = False,
        local_radius: int | None = None,
    ) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d, heads, attention_dropout, local_radius=local_radius)
        self.self_sub = SubLayer(d, norm, dropout, eps)
        self.cross_attn = MultiHeadAttention(d, heads, attention_dropout) if cross_attention else None
        self.cross_sub = SubLayer(d, norm, dropout, eps) if cross_attention else None
        self.ffn: FeedForward | SeparableConv = (
            FeedForward(d, d_ff, ffn_dropout, activation)
            if conv_kernel is None
            else SeparableConv(d, d_ff, conv_kernel, causal, ffn_dropout, activation)
        )
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
        pad: Tensor | None = None,
    ) -> Tensor:
        """x: (batch, n, d); pad: (batch, n) True at padding, for convolutional transitions.
        `record`, when given, receives the attention weights."""
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
        return self.ffn_sub(x, lambda h: self.ffn(h, pad, cache))


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
        pad: Tensor | None = None,
        layer_masks: list[Tensor | None] | None = None,
    ) -> Tensor:
        """layer_masks: extra additive self-attention masks per layer (e.g. syntax)."""
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                combine_masks(mask, layer_masks[i]) if layer_masks is not None else mask,
                memory,
                memory_mask,
                cache=caches[i] if caches is not None else None,
                score_mask=score_masks[i] if score_masks is not None else None,
                record=records[i] if records is not None else None,
                pad=pad,
            )
        return self.final_norm(x) if self.final_norm is not None else x
