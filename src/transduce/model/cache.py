"""Incremental-decoding state: self-attention K/V appended per step, cross K/V computed once."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


class KVCache:
    """Preallocated keys/values of one self-attention layer, grown by doubling when full.

    Held as (rows, capacity, heads, d_head), handed out as (rows, heads, filled, d_head) views: a
    row's filled positions are then one contiguous block, which beam search's reordering copies
    with PyTorch's vectorised gather on CUDA (strided blocks took its element-wise one, a quarter
    of beam search's device time on an H200)."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.length = 0
        self._spare: tuple[Tensor, Tensor] | None = None

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append k, v (batch, heads, new, d_head); return all valid keys and values."""
        new = k.shape[2]
        end = self.length + new
        if self.k is None or end > self.k.shape[1]:
            self._grow(k, max(end, 2 * self.k.shape[1] if self.k is not None else self.capacity))
        assert self.k is not None and self.v is not None
        self.k[:, self.length : end] = k.transpose(1, 2)
        self.v[:, self.length : end] = v.transpose(1, 2)
        self.length = end
        return self.k[:, :end].transpose(1, 2), self.v[:, :end].transpose(1, 2)

    def _grow(self, like: Tensor, size: int) -> None:
        b, h, _, dh = like.shape
        k = like.new_empty(b, size, h, dh)
        v = like.new_empty(b, size, h, dh)
        if self.k is not None and self.v is not None:
            k[:, : self.length] = self.k[:, : self.length]
            v[:, : self.length] = self.v[:, : self.length]
        self.k, self.v = k, v

    def reorder(self, index: Tensor) -> None:
        """Select batch rows (beam reordering or dropping finished sentences).

        Only the filled positions are gathered. Without autograd they go straight into a
        spare buffer of the same shape that is kept between calls, so beam search neither
        allocates nor copies twice per step.
        """
        if self.k is None or self.v is None:
            return
        _, cap, h, dh = self.k.shape
        rows, n = index.numel(), self.length
        spare = self._spare
        if spare is None or spare[0].shape != (rows, cap, h, dh):
            spare = (self.k.new_empty(rows, cap, h, dh), self.v.new_empty(rows, cap, h, dh))
        if torch.is_grad_enabled():
            spare[0][:, :n] = self.k[:, :n].index_select(0, index)
            spare[1][:, :n] = self.v[:, :n].index_select(0, index)
        else:
            torch.index_select(self.k[:, :n], 0, index, out=spare[0][:, :n])
            torch.index_select(self.v[:, :n], 0, index, out=spare[1][:, :n])
        old = (self.k, self.v)
        self.k, self.v = spare
        self._spare = old if old[0].shape == spare[0].shape else None


class StaticKVCache:
    """Keys/values of one self-attention layer in buffers of a fixed capacity, written at a step
    position held on the device: every decoder step has the same shapes, so a CUDA graph can replay
    it (decode/static.py). Attention reads all `capacity` positions; the caller masks those after
    the current one."""

    def __init__(self, k: Tensor, v: Tensor, position: Tensor) -> None:
        self.k, self.v = k, v  # (rows, capacity, heads, d_head), laid out as KVCache's
        self.position = position  # () long, shared by every layer of the step

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write k, v (rows, heads, 1, d_head) at the step's position; return the whole buffers
        as (rows, heads, capacity, d_head) views."""
        index = self.position.view(1)
        self.k.index_copy_(1, index, k.transpose(1, 2))
        self.v.index_copy_(1, index, v.transpose(1, 2))
        return self.k.transpose(1, 2), self.v.transpose(1, 2)


class StaticKV:
    """Cross-attention keys/values: computed from the encoder output once per source."""

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def reorder(self, index: Tensor) -> None:
        if self.k is not None and self.v is not None:
            self.k = self.k.index_select(0, index)
            self.v = self.v.index_select(0, index)


@dataclass
class LayerCache:
    self_kv: KVCache | StaticKVCache = field(default_factory=KVCache)
    cross_kv: StaticKV = field(default_factory=StaticKV)
    conv: Tensor | None = None  # last k-1 inputs of a causal convolutional transition


@dataclass
class DecoderCache:
    """All layers' caches plus how many target positions they hold.

    Made by the decoder stack (`new_cache`): Universal Transformer decoders keep one
    LayerCache per recurrent step, sharing one cross-attention StaticKV.
    """

    layers: list[LayerCache]
    position: int = 0

    def reorder(self, index: Tensor, sources: Tensor | None = None) -> None:
        """Select rows: `index` for per-row state, `sources` for the cross-attention K/V.

        Beam search keeps one K/V row per source (its beams read it grouped), so reordering
        beams leaves it alone (`sources=None`) and only dropping finished sources selects it.
        """
        done: set[int] = set()
        for layer in self.layers:
            layer.self_kv.reorder(index)
            if layer.conv is not None:
                layer.conv = layer.conv.index_select(0, index)
            if sources is not None and id(layer.cross_kv) not in done:  # UT steps share one StaticKV
                layer.cross_kv.reorder(sources)
                done.add(id(layer.cross_kv))

    def advance(self, steps: int) -> None:
        self.position += steps
