"""Feed-forward network, the residual + LayerNorm sub-layer wrapper, layers and stacks.

One layer class serves the encoder (self-attention + FFN) and the decoder (masked
self-attention + cross-attention + FFN); nothing is duplicated between the two. Stacks of
distinct layers (here) and the Universal Transformer's recurrent stack (universal.py) share
one interface: `forward(x, StackInputs, caches) -> StackOutput` and `new_cache()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention, combine_masks
from .cache import LayerCache
from .ponder import Ponder

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "swish": F.silu,
}


class FeedForward(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2, position-wise; inner dropout optional."""

    def __init__(self, d: int, d_ff: int, *, dropout: float = 0.0, activation: str = "relu") -> None:
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


class SeparableConv(nn.Module):
    """The UT paper's convolutional transition: a depthwise convolution over positions
    (one width-k filter per channel), then the position-wise FFN as the pointwise part.

    Causal (decoder): position i sees positions i-k+1..i, and with a cache the last k-1 inputs
    are kept so incremental decoding equals a full pass. Otherwise the window is centred.
    Padding is zeroed before the convolution, so real positions never read it.
    """

    def __init__(
        self, d: int, d_ff: int, *, kernel: int, causal: bool, dropout: float = 0.0, activation: str = "relu"
    ) -> None:
        super().__init__()
        self.depthwise = nn.Conv1d(d, d, kernel, groups=d)
        self.pointwise = FeedForward(d, d_ff, dropout=dropout, activation=activation)
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

    def __init__(self, d: int, *, norm: str, dropout: float, eps: float = 1e-5) -> None:
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
        *,
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
        self.self_attn = MultiHeadAttention(d, heads, dropout=attention_dropout, local_radius=local_radius)
        self.self_sub = SubLayer(d, norm=norm, dropout=dropout, eps=eps)
        self.cross_attn = MultiHeadAttention(d, heads, dropout=attention_dropout) if cross_attention else None
        self.cross_sub = SubLayer(d, norm=norm, dropout=dropout, eps=eps) if cross_attention else None
        self.ffn: FeedForward | SeparableConv = (
            FeedForward(d, d_ff, dropout=ffn_dropout, activation=activation)
            if conv_kernel is None
            else SeparableConv(
                d, d_ff, kernel=conv_kernel, causal=causal, dropout=ffn_dropout, activation=activation
            )
        )
        self.ffn_sub = SubLayer(d, norm=norm, dropout=dropout, eps=eps)

    def forward(self, x: Tensor, inputs: LayerInputs | None = None) -> Tensor:
        """x: (batch, n, d) -> (batch, n, d)."""
        given = inputs or LayerInputs()
        cache, memory = given.cache, given.memory
        self_attn = self.self_attn
        x = self.self_sub(
            x,
            lambda h: self_attn(
                h, mask=given.mask, score_mask=given.score_mask, cache=cache.self_kv if cache else None
            ),
        )
        if self.cross_attn is not None and self.cross_sub is not None and memory is not None:
            cross = self.cross_attn
            x = self.cross_sub(
                x, lambda h: cross(h, memory, mask=given.memory_mask, cache=cache.cross_kv if cache else None)
            )
        ffn = self.ffn
        if isinstance(ffn, SeparableConv):  # the convolution reads neighbours: padding and cache matter
            return self.ffn_sub(x, lambda h: ffn(h, given.pad, cache))
        return self.ffn_sub(x, ffn)


@dataclass
class LayerInputs:
    """What one layer reads besides the states."""

    mask: Tensor | None = None  # additive self-attention mask
    memory: Tensor | None = None  # encoder states, for cross-attention
    memory_mask: Tensor | None = None
    pad: Tensor | None = None  # (batch, n) True at padding, for convolutional transitions
    cache: LayerCache | None = None  # incremental decoding
    score_mask: Tensor | None = None  # multiplicative self-attention mask (syntax)


@dataclass
class StackInputs:
    """What a stack's layers read besides the states; each kind of stack takes what it needs."""

    shared: LayerInputs  # the same for every layer (no cache or score mask)
    offset: int = 0  # absolute position of the first state (incremental decoding)
    # The states' positions (randomised_positions.py): (n,) drawn in training, (batch, n) spread in
    # evaluation; None for offset..offset+n-1. A Universal Transformer adds them at every step.
    positions: Tensor | None = None
    redraw: Callable[[int], Tensor | None] | None = None  # draws each later UT step's (per_step)
    score_masks: list[Tensor | None] | None = None  # per layer
    layer_masks: list[Tensor | None] | None = None  # extra additive masks per layer (syntax)

    def layer(self, i: int, caches: list[LayerCache] | None) -> LayerInputs:
        """The inputs of layer (or recurrent step) i."""
        mask = self.shared.mask
        return replace(
            self.shared,
            mask=combine_masks(mask, self.layer_masks[i]) if self.layer_masks is not None else mask,
            cache=caches[i] if caches is not None else None,
            score_mask=self.score_masks[i] if self.score_masks is not None else None,
        )


@dataclass
class StackOutput:
    states: Tensor  # (batch, n, d)
    ponder: Ponder | None = None  # ACT statistics of a Universal stack that halts adaptively


class Stack(nn.Module):
    """L layers, plus a final LayerNorm for pre-norm models."""

    def __init__(self, layers: list[TransformerLayer], *, d: int, norm: str, eps: float = 1e-5) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = nn.LayerNorm(d, eps=eps) if norm == "pre" else None

    @property
    def depth(self) -> int:
        """Layer applications per pass (what per-layer masks and caches are counted in)."""
        return len(self.layers)

    def new_cache(self) -> list[LayerCache]:
        return [LayerCache() for _ in self.layers]

    def forward(self, x: Tensor, inputs: StackInputs, caches: list[LayerCache] | None = None) -> StackOutput:
        for i, layer in enumerate(self.layers):
            x = layer(x, inputs.layer(i, caches))
        return StackOutput(self.final_norm(x) if self.final_norm is not None else x)
