"""The model kinds: what each is made of, and how it is built from the model config.

`ASSEMBLIES` is the one place the model package dispatches on `model.kind`; training keeps its
own table of what it does with each kind (train/objective.py), decoding its own
(decode/kinds.py). Builders read the typed config once and hand plain values to keyword-only
constructors, so every module can also be built in a test without a config file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from ..config import ModelConfig
from ..data.specials import BOS, EOS
from .embeddings import Embedding
from .layers import Stack, TransformerLayer
from .randomised_positions import PositionRandomisation
from .syntax import SyntaxMasks
from .transformer import EncoderClassifier, EncoderDecoder, LanguageModel, OutputProjection
from .universal import UniversalStack


@dataclass(frozen=True)
class Vocabularies:
    """What a builder needs besides the config: the sizes of the data's vocabularies."""

    src: int
    tgt: int
    pad_id: int
    factors: list[int] | None  # each source factor's tag vocabulary size (factored input)


def _layer(cfg: ModelConfig, *, cross: bool, causal: bool) -> TransformerLayer:
    return TransformerLayer(
        d=cfg.d_model,
        heads=cfg.heads,
        d_ff=cfg.d_ff,
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        ffn_dropout=cfg.ffn_dropout,
        norm=cfg.norm,
        activation=cfg.activation,
        cross_attention=cross,
        eps=cfg.layer_norm_eps,
        conv_kernel=cfg.conv_kernel if cfg.transition == "conv" else None,
        causal=causal,
        local_radius=cfg.local_window if not (cross or causal) else None,  # encoder self-attention only
    )


def _stack(cfg: ModelConfig, *, layers: int, steps: int, cross: bool, causal: bool) -> Stack | UniversalStack:
    """`layers` distinct layers, or for a Universal Transformer one layer shared across `steps`."""
    if cfg.arch == "universal":
        return UniversalStack(
            _layer(cfg, cross=cross, causal=causal),
            d=cfg.d_model,
            steps=steps,
            norm=cfg.norm,
            act=cfg.act,
            act_epsilon=cfg.act_epsilon,
            halt_bias=cfg.act_halt_bias,
            min_steps=cfg.act_min_steps,
            halt_detach=cfg.act_halt_detach,
            layout=cfg.pos_layout,
            eps=cfg.layer_norm_eps,
        )
    return Stack(
        [_layer(cfg, cross=cross, causal=causal) for _ in range(layers)],
        d=cfg.d_model,
        norm=cfg.norm,
        eps=cfg.layer_norm_eps,
    )


def _encoder(cfg: ModelConfig) -> Stack | UniversalStack:
    """Bidirectional self-attention over the source."""
    return _stack(cfg, layers=cfg.encoder_layers, steps=cfg.encoder_steps, cross=False, causal=False)


def _decoder(cfg: ModelConfig, *, cross: bool) -> Stack | UniversalStack:
    """Causal self-attention, and cross-attention to an encoder's states when `cross`."""
    return _stack(cfg, layers=cfg.decoder_layers, steps=cfg.decoder_steps, cross=cross, causal=True)


def _embedding(cfg: ModelConfig, vocab_size: int, pad_id: int) -> Embedding:
    return Embedding(
        vocab_size,
        cfg.d_model,
        pad_id=pad_id,
        dropout=cfg.dropout,
        positions="none" if cfg.arch == "universal" else cfg.positions,  # a UT adds them at each step
        max_positions=cfg.max_positions,
        layout=cfg.pos_layout,
        scale=cfg.scale_embeddings,
        position_offset=cfg.position_offset,
        frequencies=cfg.pos_frequencies,
        token_row=(BOS, EOS) if cfg.decoder_start_row == "eos" else None,
    )


def _output(cfg: ModelConfig, tgt_embed: Embedding, vocab_size: int) -> OutputProjection:
    tied = tgt_embed.tokens.weight if cfg.tie_embeddings in ("decoder", "all") else None
    return OutputProjection(cfg.d_model, vocab_size, tied=tied, bias=cfg.final_logits_bias)


def _syntax(cfg: ModelConfig) -> SyntaxMasks | None:
    if cfg.syntax_mask == "none":
        return None
    return SyntaxMasks(
        kind=cfg.syntax_mask,
        apply=cfg.syntax_apply,
        omega_max=cfg.omega_max,
        layers=cfg.syntax_layers,
        heads=cfg.syntax_heads,
        num_heads=cfg.heads,
    )


# Each builder creates its modules in a fixed order: a seed gives the same initial weights.


def _encoder_decoder(
    cfg: ModelConfig, vocabs: Vocabularies, randomisation: PositionRandomisation
) -> EncoderDecoder:
    tgt_embed = _embedding(cfg, vocabs.tgt, vocabs.pad_id)
    output = _output(cfg, tgt_embed, vocabs.tgt)
    src_embed = _embedding(cfg, vocabs.src, vocabs.pad_id)
    if cfg.tie_embeddings == "all":
        if vocabs.src != vocabs.tgt:
            raise ValueError(
                f"model.tie_embeddings='all' needs one shared vocabulary, but the source has "
                f"{vocabs.src} entries and the target {vocabs.tgt}; use 'decoder' or 'none'"
            )
        src_embed.tokens = tgt_embed.tokens
    if vocabs.factors:
        src_embed.add_factors(vocabs.factors, cfg.factor_combine, vocabs.pad_id)
    return EncoderDecoder(
        src_embed=src_embed,
        tgt_embed=tgt_embed,
        encoder=_encoder(cfg),
        decoder=_decoder(cfg, cross=True),
        output=output,
        pad_id=vocabs.pad_id,
        syntax=_syntax(cfg),
        randomisation=randomisation,
    )


def _language_model(
    cfg: ModelConfig, vocabs: Vocabularies, randomisation: PositionRandomisation
) -> LanguageModel:
    embed = _embedding(cfg, vocabs.tgt, vocabs.pad_id)
    output = _output(cfg, embed, vocabs.tgt)
    return LanguageModel(
        embed=embed,
        decoder=_decoder(cfg, cross=False),
        output=output,
        pad_id=vocabs.pad_id,
        randomisation=randomisation,
    )


def _classifier(
    cfg: ModelConfig, vocabs: Vocabularies, randomisation: PositionRandomisation
) -> EncoderClassifier:
    assert cfg.num_classes is not None  # the config refuses an encoder without it
    return EncoderClassifier(
        embed=_embedding(cfg, vocabs.src, vocabs.pad_id),
        encoder=_encoder(cfg),
        num_classes=cfg.num_classes,
        pad_id=vocabs.pad_id,
        per_token=cfg.classifier == "token",
        randomisation=randomisation,
    )


@dataclass(frozen=True)
class Assembly:
    """What a model of one kind is made of, and the function that builds it."""

    encoder: bool  # a bidirectional stack reads the source
    decoder: bool  # a causal stack predicts tokens of the target vocabulary
    factors: bool  # reads factored source tokens (tags beside each word)
    build: Callable[[ModelConfig, Vocabularies, PositionRandomisation], nn.Module]

    @property
    def cross_attention(self) -> bool:
        """The decoder attends to the encoder's states: the paper's encoder-decoder."""
        return self.encoder and self.decoder

    @property
    def classifier(self) -> bool:
        """A head over the encoder's states predicts classes instead of tokens."""
        return not self.decoder


ASSEMBLIES: dict[str, Assembly] = {
    "encoder_decoder": Assembly(encoder=True, decoder=True, factors=True, build=_encoder_decoder),
    "decoder": Assembly(encoder=False, decoder=True, factors=False, build=_language_model),
    "encoder": Assembly(encoder=True, decoder=False, factors=False, build=_classifier),
}


def assembly_for(kind: str) -> Assembly:
    """The table's row for model.kind `kind` (ValueError naming the kinds there are)."""
    if kind not in ASSEMBLIES:
        raise ValueError(f"unknown model.kind '{kind}'; allowed: {', '.join(ASSEMBLIES)}")
    return ASSEMBLIES[kind]


def build_model(
    cfg: ModelConfig, src_vocab: int, tgt_vocab: int, pad_id: int = 0, factor_vocabs: list[int] | None = None
) -> nn.Module:
    """Read the model config once and assemble plain modules from it.

    factor_vocabs: the tag vocabulary size of each source factor (factored input), if any;
    only encoder-decoders read factors.
    """
    randomisation = PositionRandomisation(
        cfg.position_randomisation, cfg.position_range, cfg.position_draw, cfg.position_eval
    )
    vocabs = Vocabularies(src_vocab, tgt_vocab, pad_id, factor_vocabs)
    return assembly_for(cfg.kind).build(cfg, vocabs, randomisation)
