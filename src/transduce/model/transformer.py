"""Encoder-decoder, encoder-only and decoder-only assemblies built from the same layers."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..config import ModelConfig
from .attention import causal_mask, combine_masks, padding_mask
from .cache import DecoderCache
from .embeddings import Embedding
from .layers import Stack, TransformerLayer
from .syntax import SyntaxMasks
from .universal import UniversalStack, universal_cache


@dataclass
class EncoderOutput:
    """Encoder states with their padding, as decoders and search consume them."""

    states: Tensor  # (batch, m, d)
    pad: Tensor  # (batch, m) bool, True at padding

    @property
    def mask(self) -> Tensor:
        return padding_mask(self.pad)  # additive (batch, 1, 1, m)

    def select(self, index: Tensor) -> EncoderOutput:
        return EncoderOutput(self.states.index_select(0, index), self.pad.index_select(0, index))


class OutputProjection(nn.Module):
    """logits = S W_o (+ b); W_o may be the (tied) target embedding matrix."""

    def __init__(self, d: int, vocab_size: int, tied: nn.Parameter | None, bias: bool) -> None:
        super().__init__()
        if tied is None:
            self.weight = nn.Parameter(torch.empty(vocab_size, d))
            nn.init.normal_(self.weight, std=d**-0.5)
        else:
            self.weight = tied
        self.bias = nn.Parameter(torch.zeros(vocab_size)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.linear(x, self.weight, self.bias)


def _universal_args(stack: nn.Module, offset: int) -> dict:
    """Universal stacks add coordinates themselves, so they need the position offset."""
    return {"offset": offset} if isinstance(stack, UniversalStack) else {}


def _self_attention_mask(
    pad: Tensor | None, q_len: int, k_len: int, offset: int, causal: bool, device: torch.device
) -> Tensor | None:
    """Key padding and causality; a local window is applied by the attention module itself."""
    return combine_masks(
        padding_mask(pad) if pad is not None else None,
        causal_mask(q_len, k_len, offset, device) if causal and q_len > 1 else None,
    )


class EncoderDecoder(nn.Module):
    """The paper's model: encode the source once, decode the target left to right."""

    def __init__(
        self,
        src_embed: Embedding,
        tgt_embed: Embedding,
        encoder: Stack,
        decoder: Stack,
        output: OutputProjection,
        pad_id: int,
        syntax: SyntaxMasks | None = None,
    ) -> None:
        super().__init__()
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.encoder, self.decoder, self.output = encoder, decoder, output
        self.pad_id, self.syntax = pad_id, syntax

    def encode(
        self,
        src: Tensor,
        factors: Tensor | None = None,
        syntax: Tensor | None = None,
        records: list[dict[str, Tensor]] | None = None,
    ) -> EncoderOutput:
        """src: (batch, m) token ids; factors: (batch, k, m) tag ids of factored input;
        syntax: (batch, m, m) tree distances omega (or M itself for syntax_mask='given')."""
        pad = src.eq(self.pad_id)
        mask = _self_attention_mask(pad, src.shape[1], src.shape[1], 0, False, src.device)
        additive = multiplicative = None
        if self.syntax is not None:
            if syntax is None:
                raise ValueError("this model masks attention with source trees; give their distances (omega)")
            additive, multiplicative = self.syntax.per_layer(syntax, len(self.encoder.layers))
        states = self.encoder(
            self.src_embed(src, factors=factors),
            mask,
            score_masks=multiplicative,
            layer_masks=additive,
            records=records,
            pad=pad,
            **_universal_args(self.encoder, 0),
        )
        return EncoderOutput(states, pad)

    def decode(
        self,
        tgt: Tensor,
        memory: EncoderOutput,
        cache: DecoderCache | None = None,
        records: list[dict[str, Tensor]] | None = None,
    ) -> Tensor:
        """tgt: (batch, n) ids (only the new ones when a cache is given) -> (batch, n, vocab)."""
        offset = cache.position if cache is not None else 0
        n = tgt.shape[1]
        mask = _self_attention_mask(None, n, offset + n, offset, True, tgt.device)
        x = self.decoder(
            self.tgt_embed(tgt, offset),
            mask,
            memory.states,
            memory.mask,
            caches=cache.layers if cache is not None else None,
            records=records,
            pad=tgt.eq(self.pad_id),
            **_universal_args(self.decoder, offset),
        )
        if cache is not None:
            cache.advance(n)
        return self.output(x)

    def new_cache(self) -> DecoderCache:
        if isinstance(self.decoder, UniversalStack):
            return universal_cache(self.decoder)
        return DecoderCache.empty(len(self.decoder.layers))

    def auxiliary_loss(self, tau: float) -> Tensor | None:
        """tau x the mean ACT ponder cost of the last forward pass, or None without ACT."""
        costs = [
            s.ponder_loss()
            for s in (self.encoder, self.decoder)
            if isinstance(s, UniversalStack) and s.halt is not None
        ]
        return tau * sum(costs) if costs else None

    def forward(
        self, src: Tensor, tgt: Tensor, factors: Tensor | None = None, syntax: Tensor | None = None
    ) -> Tensor:
        return self.decode(tgt, self.encode(src, factors, syntax))


class LanguageModel(nn.Module):
    """Decoder-only: causal self-attention layers without cross-attention."""

    def __init__(self, embed: Embedding, decoder: Stack, output: OutputProjection, pad_id: int) -> None:
        super().__init__()
        self.embed, self.decoder, self.output, self.pad_id = embed, decoder, output, pad_id

    def forward(self, ids: Tensor, cache: DecoderCache | None = None) -> Tensor:
        offset = cache.position if cache is not None else 0
        n = ids.shape[1]
        mask = _self_attention_mask(None, n, offset + n, offset, True, ids.device)
        x = self.decoder(
            self.embed(ids, offset),
            mask,
            caches=cache.layers if cache is not None else None,
            pad=ids.eq(self.pad_id),
        )
        if cache is not None:
            cache.advance(n)
        return self.output(x)

    def new_cache(self) -> DecoderCache:
        return DecoderCache.empty(len(self.decoder.layers))


class EncoderClassifier(nn.Module):
    """Encoder-only with a sequence (masked mean pooling) or per-token classification head."""

    def __init__(
        self,
        embed: Embedding,
        encoder: Stack,
        num_classes: int,
        pad_id: int,
        per_token: bool,
    ) -> None:
        super().__init__()
        self.embed, self.encoder, self.pad_id = embed, encoder, pad_id
        self.head = nn.Linear(embed.tokens.embedding_dim, num_classes)
        self.per_token = per_token

    def forward(self, ids: Tensor) -> Tensor:
        pad = ids.eq(self.pad_id)
        mask = _self_attention_mask(pad, ids.shape[1], ids.shape[1], 0, False, ids.device)
        states = self.encoder(self.embed(ids), mask, pad=pad)
        if self.per_token:
            return self.head(states)  # (batch, len, classes)
        keep = (~pad).unsqueeze(-1).to(states.dtype)
        pooled = (states * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        return self.head(pooled)  # (batch, classes)


def _layer(cfg: ModelConfig, cross: bool, causal: bool) -> TransformerLayer:
    return TransformerLayer(
        cfg.d_model,
        cfg.heads,
        cfg.d_ff,
        cfg.dropout,
        cfg.attention_dropout,
        cfg.ffn_dropout,
        cfg.norm,
        cfg.activation,
        cross,
        cfg.layer_norm_eps,
        cfg.conv_kernel if cfg.transition == "conv" else None,
        causal,
        cfg.local_window if not (cross or causal) else None,  # encoder self-attention only
    )


def _stack(cfg: ModelConfig, layers: int, cross: bool, causal: bool) -> Stack | UniversalStack:
    """L distinct layers, or for a Universal Transformer one layer shared across its steps."""
    if cfg.arch == "universal":
        steps = cfg.decoder_steps if cross else cfg.encoder_steps
        return UniversalStack(
            _layer(cfg, cross, causal),
            cfg.d_model,
            steps,
            cfg.norm,
            cfg.act,
            cfg.act_epsilon,
            cfg.pos_layout,
            cfg.layer_norm_eps,
        )
    return Stack(
        [_layer(cfg, cross, causal) for _ in range(layers)], cfg.d_model, cfg.norm, cfg.layer_norm_eps
    )


def _embedding(cfg: ModelConfig, vocab_size: int, pad_id: int) -> Embedding:
    return Embedding(
        vocab_size,
        cfg.d_model,
        pad_id,
        cfg.dropout,
        "none" if cfg.arch == "universal" else cfg.positions,
        cfg.max_positions,
        cfg.pos_layout,
        cfg.scale_embeddings,
    )


def _syntax(cfg: ModelConfig) -> SyntaxMasks | None:
    if cfg.syntax_mask == "none":
        return None
    return SyntaxMasks(
        cfg.syntax_mask, cfg.syntax_apply, cfg.omega_max, cfg.syntax_layers, cfg.syntax_heads, cfg.heads
    )


def build_model(
    cfg: ModelConfig, src_vocab: int, tgt_vocab: int, pad_id: int = 0, factor_vocabs: list[int] | None = None
) -> nn.Module:
    """Read the model config once and assemble plain modules from it.

    factor_vocabs: the tag vocabulary size of each source factor (factored input), if any.
    """
    if cfg.kind == "encoder":
        assert cfg.num_classes is not None
        return EncoderClassifier(
            _embedding(cfg, src_vocab, pad_id),
            _stack(cfg, cfg.encoder_layers, False, False),
            cfg.num_classes,
            pad_id,
            cfg.classifier == "token",
        )
    tgt_embed = _embedding(cfg, tgt_vocab, pad_id)
    tied = tgt_embed.tokens.weight if cfg.tie_embeddings in ("decoder", "all") else None
    output = OutputProjection(cfg.d_model, tgt_vocab, tied, cfg.final_logits_bias)
    if cfg.kind == "decoder":
        return LanguageModel(tgt_embed, _stack(cfg, cfg.decoder_layers, False, True), output, pad_id)
    if cfg.tie_embeddings == "all":
        if src_vocab != tgt_vocab:
            raise ValueError(
                f"model.tie_embeddings='all' needs one shared vocabulary, but the source has "
                f"{src_vocab} entries and the target {tgt_vocab}; use 'decoder' or 'none'"
            )
        src_embed = _embedding(cfg, src_vocab, pad_id)
        src_embed.tokens = tgt_embed.tokens
    else:
        src_embed = _embedding(cfg, src_vocab, pad_id)
    if factor_vocabs:
        src_embed.add_factors(factor_vocabs, cfg.factor_combine, pad_id)
    return EncoderDecoder(
        src_embed,
        tgt_embed,
        _stack(cfg, cfg.encoder_layers, False, False),
        _stack(cfg, cfg.decoder_layers, True, True),
        output,
        pad_id,
        _syntax(cfg),
    )
