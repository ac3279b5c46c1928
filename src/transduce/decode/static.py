"""Decoding with fixed shapes: preallocated caches and a decoder step a CUDA graph replays.

Search (search.py, sampling.py) drops finished rows and reorders beams, so its batch shrinks and
its cache grows: every step has new shapes, and on a GPU each of a step's hundreds of small
kernels is launched from Python (about 3 ms per `base` step, whatever the batch). A
`StaticDecoder` gives search the same interface (`encode`, `decode`, `new_cache`) over buffers
whose shapes never change during a search: R decoder rows and S memory rows, keys and values for
`capacity` positions, the step's position a tensor on the device. Rows that search drops stay in
the buffers (computed and ignored), a beam reordering copies rows between slots, and the step
itself (embedding, layers, output projection) is the same computation every time, so on CUDA it
is captured once as a CUDA graph and then replayed, one launch per step.

Search's own logic is unchanged, so outputs are those of the dynamic cache (tested) up to the
order of floating-point sums. Buffers are rounded up (rows to 8, positions to 16) so that batches
of similar size share one captured step (`StepPool`).
"""

from __future__ import annotations

import math
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..model.cache import LayerCache, StaticKV, StaticKVCache
from ..model.embeddings import LearnedPositions
from ..model.layers import LayerInputs, SeparableConv, Stack, StackInputs
from ..model.transformer import EncoderDecoder, EncoderOutput

ROWS_MULTIPLE = 8  # rows, memory positions and cache positions are rounded up to these
POSITIONS_MULTIPLE = 16
POOL_SIZE = 8  # captured steps kept per model


def static_unsupported(model: nn.Module) -> str | None:
    """Why `model` cannot decode with fixed shapes, or None if it can: a plain Transformer
    encoder-decoder (its decoder a stack of distinct layers with an FFN, target positions 0, 1, ...
    as in training; the encoder may be anything)."""
    if not isinstance(model, EncoderDecoder):
        return (
            "it is not one encoder-decoder model (ensembles, language models and classifiers decode as usual)"
        )
    if not isinstance(model.decoder, Stack):
        return "its decoder is a Universal Transformer stack"
    if any(isinstance(layer.ffn, SeparableConv) for layer in model.decoder.layers):
        return "its decoder's transition is a convolution"
    if model.tgt_embed.factors is not None:
        return "its target side is factored"
    if model.randomisation.evaluation != "dense":
        return "its positions are spread at evaluation (model.position_eval)"
    return None


def _round_up(n: int, multiple: int) -> int:
    return multiple * math.ceil(n / multiple)


@dataclass(frozen=True)
class _Shape:
    rows: int  # decoder rows R (a multiple of the memory rows)
    sources: int  # memory rows S
    memory: int  # memory positions m
    capacity: int  # cache positions


class _Step:
    """One fixed-shape decoder step: its input, cache and output buffers, run eagerly or as a
    captured CUDA graph. `tokens` and the caches are written between runs; `position` advances
    inside the step."""

    def __init__(
        self, model: EncoderDecoder, shape: _Shape, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.model, self.shape = model, shape
        d = model.tgt_embed.tokens.embedding_dim
        layers = list(model.decoder.layers)
        heads, d_head = layers[0].self_attn.heads, layers[0].self_attn.d_head
        kv_shape = (shape.rows, shape.capacity, heads, d_head)  # as StaticKVCache holds them
        self.position = torch.zeros((), dtype=torch.long, device=device)
        self.tokens = torch.zeros(shape.rows, 1, dtype=torch.long, device=device)
        self.memory = torch.zeros(shape.sources, shape.memory, d, dtype=dtype, device=device)
        self.memory_mask = torch.zeros(shape.sources, 1, 1, shape.memory, dtype=dtype, device=device)
        self.self_kv = [
            StaticKVCache(
                torch.zeros(kv_shape, dtype=dtype, device=device),
                torch.zeros(kv_shape, dtype=dtype, device=device),
                self.position,
            )
            for _ in layers
        ]
        self.cross = [StaticKV() for _ in layers]
        self.key_positions = torch.arange(shape.capacity, device=device)
        self.signal, self.positions = self._position_signal(dtype, device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: Tensor | None = None

    def _position_signal(self, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, int]:
        """The target positions' encodings for every cache position (capacity, d), and how many
        positions the model has: a learned table ends (the rows past it stay zero, never read)."""
        embed = self.model.tgt_embed
        table = torch.zeros(self.shape.capacity, embed.tokens.embedding_dim, dtype=dtype, device=device)
        rows = self.shape.capacity
        if isinstance(embed.positions, LearnedPositions):
            rows = min(rows, embed.positions.weight.shape[0])
        if embed.positions is not None:
            table[:rows] = embed.positions(rows, 0).to(dtype)
        return table, rows

    def load(self, memory: EncoderOutput) -> None:
        """Take a new search's encoder output: memory rows beyond it and positions beyond its
        length are padding (masked; padding rows attend to their zero states, so they stay finite)."""
        states = memory.states.to(self.memory.dtype)
        s, m = states.shape[:2]
        self.memory.zero_()
        self.memory[:s, :m] = states
        self.memory_mask.zero_()
        self.memory_mask[:s, 0, 0, m:] = -math.inf
        self.memory_mask[:s, 0, 0, :m] = memory.mask[:, 0, 0].to(self.memory_mask.dtype)
        for layer, cross in zip(self.model.decoder.layers, self.cross, strict=True):
            assert layer.cross_attn is not None
            k, v = layer.cross_attn.project_kv(self.memory)
            if cross.k is None or cross.v is None:
                cross.k, cross.v = k, v
            else:  # a captured step reads these very tensors
                cross.k.copy_(k)
                cross.v.copy_(v)
        self.position.zero_()

    def _compute(self) -> Tensor:
        """Embedding at the step's position, the decoder layers on the fixed buffers, logits."""
        embed = self.model.tgt_embed
        index = self.position.view(1)
        x = embed.tokens(self.tokens) * embed.scale + self.signal.index_select(0, index)  # (R, 1, d)
        mask = torch.zeros(self.shape.capacity, dtype=x.dtype, device=x.device)
        mask = mask.masked_fill(self.key_positions > self.position, -math.inf).view(1, 1, 1, -1)
        shared = LayerInputs(mask, memory=self.memory, memory_mask=self.memory_mask)
        caches = [
            LayerCache(self_kv=kv, cross_kv=cross) for kv, cross in zip(self.self_kv, self.cross, strict=True)
        ]
        states = self.model.decoder(x, StackInputs(shared), caches).states
        self.position.add_(1)
        return self.model.output(states)  # (R, 1, vocab)

    def run(self) -> Tensor:
        """The step's logits (R, 1, vocab); on CUDA from a graph captured at the first run."""
        if self.tokens.device.type != "cuda":
            return self._compute()
        if self.graph is None:
            self._capture()
        assert self.graph is not None and self.logits is not None
        self.graph.replay()
        return self.logits

    def _capture(self) -> None:
        """Warm up on a side stream (allocations, kernel choices), then record one step; the
        warm-up's writes are at positions that the search's own first steps overwrite."""
        start = int(self.position)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._compute()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.logits = self._compute()
        self.position.fill_(start)
        self.graph = graph


class StepPool:
    """Captured steps by shape, a few per model, so that batches of similar size reuse one."""

    def __init__(self) -> None:
        self.steps: OrderedDict[tuple, _Step] = OrderedDict()

    def get(self, model: EncoderDecoder, shape: _Shape, dtype: torch.dtype, device: torch.device) -> _Step:
        key = (shape, dtype, device)
        if key in self.steps:
            self.steps.move_to_end(key)
        else:
            self.steps[key] = _Step(model, shape, dtype, device)
            while len(self.steps) > POOL_SIZE:
                self.steps.popitem(last=False)
        return self.steps[key]


_POOLS: weakref.WeakKeyDictionary[nn.Module, StepPool] = weakref.WeakKeyDictionary()


class _Memory:
    """The encoder output as search holds it. Selecting rows before the first step selects them
    (sampling repeats each source); from then on the buffers hold the rows and the cache tracks
    which are still searched, so selecting changes nothing."""

    def __init__(self, output: EncoderOutput) -> None:
        self.output, self.fixed = output, False

    def select(self, index: Tensor) -> _Memory:
        return self if self.fixed else _Memory(self.output.select(index))


class _SlotCache:
    """Search's cache: which buffer slot holds each row search still decodes. Decoder row i of
    memory row j lies in slot sources[j] * g + i % g (g: decoder rows per memory row, the beam)."""

    def __init__(self, decoder: StaticDecoder) -> None:
        self.decoder = decoder
        self.step: _Step | None = None
        self.rows = self.sources = torch.zeros(0, dtype=torch.long)  # slots, on the device
        self.group = 1
        self.filled = 0  # positions written

    def _slots(self) -> Tensor:
        g = self.group
        return (self.sources[:, None] * g + torch.arange(g, device=self.sources.device)).reshape(-1)

    def start(self, tokens: Tensor, memory: _Memory) -> None:
        memory.fixed = True
        sources = memory.output.states.shape[0]
        if tokens.shape[0] % sources:
            raise ValueError(f"{tokens.shape[0]} decoder rows cannot be grouped over {sources} memory rows")
        self.group = tokens.shape[0] // sources
        shape = _Shape(
            rows=self.group * _round_up(sources, ROWS_MULTIPLE),
            sources=_round_up(sources, ROWS_MULTIPLE),
            memory=_round_up(memory.output.states.shape[1], ROWS_MULTIPLE),
            capacity=_round_up(self.decoder.capacity, POSITIONS_MULTIPLE),
        )
        model = self.decoder.model
        pool = _POOLS.setdefault(model, StepPool())
        self.step = pool.get(model, shape, memory.output.states.dtype, tokens.device)
        self.step.load(memory.output)
        self.sources = torch.arange(sources, device=tokens.device)
        self.rows = self._slots()

    def reorder(self, index: Tensor, sources: Tensor | None = None) -> None:
        """Row i continues row index[i]; `sources` selects the memory rows still searched. All on
        the device: beam search reorders at every step and reads back only every few."""
        assert self.step is not None
        taken = self.rows[index]
        if sources is not None:
            self.sources = self.sources[sources]
        self.rows = self._slots()
        if index is sources and self.group == 1:  # dropping rows (greedy, sampling): each stays put
            return
        n = self.filled
        for kv in self.step.self_kv:
            for buffer in (kv.k, kv.v):
                buffer[:, :n].index_copy_(0, self.rows, buffer[:, :n].index_select(0, taken))

    def decode(self, tokens: Tensor, memory: _Memory) -> Tensor:
        """Logits (rows searched, 1, vocab) of the next position."""
        if self.step is None:
            self.start(tokens, memory)
        assert self.step is not None
        if self.filled >= self.step.positions:  # as the dynamic cache's embedding refuses it
            raise ValueError(
                f"sequence position {self.filled + 1} exceeds the {self.step.positions} positions of the "
                "static cache or of the model's learned position embeddings"
            )
        rows = self.rows
        self.step.tokens.index_copy_(0, rows, tokens[:, -1:])
        logits = self.step.run()
        self.filled += 1
        return logits.index_select(0, rows)


class StaticDecoder:
    """`model` for search (the Seq2Seq protocol), decoding with fixed-shape buffers of `capacity`
    target positions: at least the longest output search may produce."""

    kind = "encoder_decoder"

    def __init__(self, model: EncoderDecoder, capacity: int) -> None:
        self.model, self.capacity = model, capacity

    def encode(self, src: Tensor, **source: Tensor) -> _Memory:
        return _Memory(self.model.encode(src, **source))

    def new_cache(self) -> _SlotCache:
        return _SlotCache(self)

    def decode(self, tgt: Tensor, memory: _Memory, cache: _SlotCache | None = None) -> Tensor:
        """tgt: (rows, 1) the newest token of each row search decodes."""
        if cache is None:
            raise ValueError("a static decoder decodes one position at a time, with its cache")
        return cache.decode(tgt, memory)
