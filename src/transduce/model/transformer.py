"""Encoder-decoder, encoder-only and decoder-only assemblies built from the same layers (the
builders that make them from the config: kinds.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .attention import causal_mask, padding_mask
from .cache import DecoderCache
from .embeddings import Embedding
from .layers import LayerInputs, Stack, StackInputs, StackOutput
from .ponder import Ponder
from .randomised_positions import PositionRandomisation
from .syntax import SyntaxMasks


@dataclass
class ModelOutput:
    """A forward pass's logits and, for ACT stacks, their ponder statistics by side."""

    logits: Tensor
    ponder: dict[str, Ponder] = field(default_factory=dict)


def _ponders(**sides: StackOutput | EncoderOutput) -> dict[str, Ponder]:
    return {side: out.ponder for side, out in sides.items() if out.ponder is not None}


@dataclass
class EncoderOutput:
    """Encoder states with their padding, as decoders and search consume them."""

    states: Tensor  # (batch, m, d)
    pad: Tensor  # (batch, m) bool, True at padding
    ponder: Ponder | None = None  # ACT statistics of a Universal encoder
    strides: Tensor | None = None  # (batch,) spacing of evaluation positions, for the decoder too

    @property
    def mask(self) -> Tensor:
        return padding_mask(self.pad)  # additive (batch, 1, 1, m)

    def select(self, index: Tensor) -> EncoderOutput:
        strides = self.strides.index_select(0, index) if self.strides is not None else None
        return EncoderOutput(
            self.states.index_select(0, index), self.pad.index_select(0, index), None, strides
        )


class OutputProjection(nn.Module):
    """logits = S W_o (+ b); W_o may be the (tied) target embedding matrix. The bias b is a
    fixed buffer, as Marian's `final_logits_bias` is: imported with the weights, never trained."""

    def __init__(self, d: int, vocab_size: int, *, tied: nn.Parameter | None, bias: bool) -> None:
        super().__init__()
        if tied is None:
            self.weight = nn.Parameter(torch.empty(vocab_size, d))
            nn.init.normal_(self.weight, std=d**-0.5)
        else:
            self.weight = tied
        self.register_buffer("bias", torch.zeros(vocab_size) if bias else None)

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.linear(x, self.weight, self.bias)


def _bidirectional(pad: Tensor) -> StackInputs:
    """Encoder inputs: every real position sees every real position (padding keys masked);
    a local window is applied by the attention module itself."""
    return StackInputs(LayerInputs(padding_mask(pad), pad=pad))


def _causal(
    ids: Tensor, pad_id: int, cache: DecoderCache | None, memory: EncoderOutput | None
) -> StackInputs:
    """Decoder inputs for ids (batch, n) that follow the cache's positions: position i sees
    positions <= i, and the memory when there is one."""
    offset = cache.position if cache is not None else 0
    n = ids.shape[1]
    mask = causal_mask(n, offset + n, offset, ids.device) if n > 1 else None
    shared = LayerInputs(mask, pad=ids.eq(pad_id))
    if memory is not None:
        shared.memory, shared.memory_mask = memory.states, memory.mask
    return StackInputs(shared, offset)


def _place(
    inputs: StackInputs,
    length: int,
    randomisation: PositionRandomisation,
    training: bool,
    strides: Tensor | None = None,
    drawn: Tensor | None = None,
) -> StackInputs:
    """`inputs` with the positions of the stack's `length` states (randomised_positions.py): in
    training the start of the pass's draw `drawn` or a draw of their own, in evaluation spread by
    `strides` or None (offset..offset+length-1)."""
    inputs.positions = randomisation.positions(length, inputs.offset, strides, training, drawn)
    inputs.redraw = randomisation.step_draws(training)
    return inputs


class EncoderDecoder(nn.Module):
    """The paper's model: encode the source once, decode the target left to right."""

    kind = "encoder_decoder"

    def __init__(
        self,
        *,
        src_embed: Embedding,
        tgt_embed: Embedding,
        encoder: Stack,
        decoder: Stack,
        output: OutputProjection,
        pad_id: int,
        syntax: SyntaxMasks | None = None,
        randomisation: PositionRandomisation | None = None,
    ) -> None:
        super().__init__()
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.encoder, self.decoder, self.output = encoder, decoder, output
        self.pad_id, self.syntax = pad_id, syntax
        self.randomisation = randomisation or PositionRandomisation()

    def encode(
        self, src: Tensor, factors: Tensor | None = None, syntax: Tensor | None = None
    ) -> EncoderOutput:
        """src: (batch, m) token ids; factors: (batch, k, m) tag ids of factored input;
        syntax: (batch, m, m) tree distances omega (or M itself for syntax_mask='given')."""
        return self._encode(src, factors, syntax, None)

    def _encode(
        self, src: Tensor, factors: Tensor | None, syntax: Tensor | None, drawn: Tensor | None
    ) -> EncoderOutput:
        """`encode`; in a training pass that drew its positions once, `drawn` is that draw."""
        pad = src.eq(self.pad_id)
        inputs = _bidirectional(pad)
        if self.syntax is not None:
            if syntax is None:
                raise ValueError("this model masks attention with source trees; give their distances (omega)")
            inputs.layer_masks, inputs.score_masks = self.syntax.per_layer(syntax, self.encoder.depth)
        strides = None if self.training else self.randomisation.evaluation_strides(pad)
        _place(inputs, src.shape[1], self.randomisation, self.training, strides, drawn)
        out = self.encoder(self.src_embed(src, factors=factors, positions=inputs.positions), inputs)
        return EncoderOutput(out.states, pad, out.ponder, strides)

    def _decoder(
        self, tgt: Tensor, memory: EncoderOutput, cache: DecoderCache | None, drawn: Tensor | None = None
    ) -> StackOutput:
        inputs = _causal(tgt, self.pad_id, cache, memory)
        strides = memory.strides  # each target takes its source's spacing
        if strides is not None and strides.shape[0] != tgt.shape[0]:  # beams grouped per source row
            strides = strides.repeat_interleave(tgt.shape[0] // strides.shape[0])
        _place(inputs, tgt.shape[1], self.randomisation, self.training, strides, drawn)
        out = self.decoder(
            self.tgt_embed(tgt, inputs.offset, positions=inputs.positions),
            inputs,
            cache.layers if cache else None,
        )
        if cache is not None:
            cache.advance(tgt.shape[1])
        return out

    def decode(self, tgt: Tensor, memory: EncoderOutput, cache: DecoderCache | None = None) -> Tensor:
        """tgt: (batch, n) ids (only the new ones when a cache is given) -> (batch, n, vocab)."""
        return self.output(self.decode_states(tgt, memory, cache))

    def decode_states(self, tgt: Tensor, memory: EncoderOutput, cache: DecoderCache | None = None) -> Tensor:
        """`decode` before the output projection (batch, n, d), for projections onto part of the
        vocabulary (decode/shortlist.py)."""
        return self._decoder(tgt, memory, cache).states

    def new_cache(self) -> DecoderCache:
        return DecoderCache(self.decoder.new_cache())

    def forward(
        self, src: Tensor, tgt: Tensor, factors: Tensor | None = None, syntax: Tensor | None = None
    ) -> ModelOutput:
        """Teacher-forced logits (batch, n, vocab) with the ponder statistics of both sides."""
        drawn = self.randomisation.pass_draw(max(src.shape[1], tgt.shape[1])) if self.training else None
        memory = self._encode(src, factors, syntax, drawn)
        decoded = self._decoder(tgt, memory, None, drawn)
        return ModelOutput(self.output(decoded.states), _ponders(encoder=memory, decoder=decoded))


@dataclass
class NoMemory:
    """What a decoder-only model encodes: nothing to attend to. Search selects its rows as it does
    an encoder output's; the prompt reaches the model as forced tokens instead."""

    rows: int

    def select(self, index: Tensor) -> NoMemory:
        return NoMemory(index.numel())


class LanguageModel(nn.Module):
    """Decoder-only: causal self-attention layers without cross-attention.

    `encode`/`decode`/`new_cache` give it the interface search and scoring use for an
    encoder-decoder, with nothing encoded: what it continues is fed as target tokens."""

    kind = "decoder"

    def __init__(
        self,
        *,
        embed: Embedding,
        decoder: Stack,
        output: OutputProjection,
        pad_id: int,
        randomisation: PositionRandomisation | None = None,
    ) -> None:
        super().__init__()
        self.embed, self.decoder, self.output, self.pad_id = embed, decoder, output, pad_id
        self.randomisation = randomisation or PositionRandomisation()

    def forward(self, ids: Tensor, cache: DecoderCache | None = None) -> ModelOutput:
        """ids: (batch, n) (only the new ones when a cache is given) -> logits (batch, n, vocab)."""
        inputs = _place(
            _causal(ids, self.pad_id, cache, None), ids.shape[1], self.randomisation, self.training
        )
        caches = cache.layers if cache else None
        out = self.decoder(self.embed(ids, inputs.offset, positions=inputs.positions), inputs, caches)
        if cache is not None:
            cache.advance(ids.shape[1])
        return ModelOutput(self.output(out.states), _ponders(decoder=out))

    def encode(self, src: Tensor, **source: Tensor) -> NoMemory:
        return NoMemory(src.shape[0])

    def decode(self, ids: Tensor, memory: NoMemory, cache: DecoderCache | None = None) -> Tensor:
        """ids: (batch, n) (only the new ones when a cache is given) -> logits (batch, n, vocab)."""
        return self(ids, cache).logits

    def new_cache(self) -> DecoderCache:
        return DecoderCache(self.decoder.new_cache())


class EncoderClassifier(nn.Module):
    """Encoder-only with a sequence (masked mean pooling) or per-token classification head."""

    kind = "encoder"

    def __init__(
        self,
        *,
        embed: Embedding,
        encoder: Stack,
        num_classes: int,
        pad_id: int,
        per_token: bool,
        randomisation: PositionRandomisation | None = None,
    ) -> None:
        super().__init__()
        self.embed, self.encoder, self.pad_id = embed, encoder, pad_id
        self.head = nn.Linear(embed.tokens.embedding_dim, num_classes)
        self.per_token = per_token
        self.randomisation = randomisation or PositionRandomisation()

    def forward(self, ids: Tensor) -> ModelOutput:
        """Logits (batch, len, classes) per token, or (batch, classes) per sequence."""
        pad = ids.eq(self.pad_id)
        inputs = _place(_bidirectional(pad), ids.shape[1], self.randomisation, self.training)
        out = self.encoder(self.embed(ids, positions=inputs.positions), inputs)
        if self.per_token:
            return ModelOutput(self.head(out.states), _ponders(encoder=out))
        keep = (~pad).unsqueeze(-1).to(out.states.dtype)
        pooled = (out.states * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        return ModelOutput(self.head(pooled), _ponders(encoder=out))

    def classify(self, ids: Tensor) -> Tensor:
        """Class logits of `forward`, for decoding (an Ensemble answers with log-probabilities)."""
        return self(ids).logits
