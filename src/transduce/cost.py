"""Parameter and FLOP accounting from the survey's Table 1, checked against the built model.

Multiplications are counted as Table 1 does (one per multiply-add); FLOPs = 2 x that.
For a sentence pair with m source and n target tokens:
  self-attention   4d^2 params;  4 m d^2 + 2 m^2 d   (projections + Q K^T + weights V)
  cross-attention  4d^2 params;  2 n d^2 + 2 m d^2 + 2 m n d
  feed-forward     2 d d_ff + d + d_ff params;  2 m d d_ff
  layer norm       2d params;  2 m d
A convolutional transition (UT paper) adds its depthwise filters: k d + d params, k m d mults.
Table 1 omits the attention biases (4d per attention block); the `measured` column counts
every tensor of the built model, biases included. For a Universal Transformer the count of
applications is the number of steps, while the parameters of the shared layer exist once.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from .config import ModelConfig
from .model import build_model
from .model.kinds import assembly_for
from .model.layers import TransformerLayer


@dataclass
class CostRow:
    """One Table 1 line: a sub-model applied `times` times."""

    side: str
    module: str
    times: int
    params_formula: int  # per application, Table 1's formula
    params_measured: int  # per application, counted on the model (0 when not built)
    mults: int  # multiplications per application for the whole sequence(s)


def _numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _layers(model: nn.Module, side: str) -> list[TransformerLayer]:
    """The distinct layers of one side's stack (a Universal Transformer's shared layer once)."""
    stack = getattr(model, side, None)
    return [m for m in stack.modules() if isinstance(m, TransformerLayer)] if stack is not None else []


def cost_table(cfg: ModelConfig, src_len: int, tgt_len: int, model: nn.Module | None = None) -> list[CostRow]:
    """Rows for encoder and decoder sub-models; `model` fills the measured counts."""
    d, f = cfg.d_model, cfg.d_ff
    m, n = src_len, tgt_len
    rows: list[CostRow] = []
    universal = cfg.arch == "universal"  # one shared layer applied `steps` times
    assembly = assembly_for(cfg.kind)
    enc_layers = (cfg.encoder_steps if universal else cfg.encoder_layers) if assembly.encoder else 0
    dec_layers = (cfg.decoder_steps if universal else cfg.decoder_layers) if assembly.decoder else 0
    cross = assembly.cross_attention
    conv = cfg.transition == "conv"
    k = cfg.conv_kernel
    transition_name = "conv transition" if conv else "feed-forward"

    def transition(length: int) -> tuple[int, int]:
        """Params and mults of one transition application over `length` positions."""
        params, mults = 2 * d * f + d + f, 2 * length * d * f
        return (params + k * d + d, mults + k * length * d) if conv else (params, mults)

    def measured(side: str, attr: str) -> int:
        layers = _layers(model, side) if model is not None else []
        if not layers:
            return 0
        first = layers[0]
        if attr == "norm":
            return _numel(first.self_sub.norm)
        return _numel(getattr(first, attr))

    def row(side: str, module: str, times: int, params: int, attr: str, mults: int) -> CostRow:
        return CostRow(side, module, times, params, measured(side, attr), mults)

    for side, times, length in (("encoder", enc_layers, m), ("decoder", dec_layers, n)):
        if not times:
            continue
        rows.append(
            row(side, "self-attention", times, 4 * d * d, "self_attn", 4 * length * d * d + 2 * length**2 * d)
        )
        if side == "decoder" and cross:
            rows.append(
                row(
                    side,
                    "cross-attention",
                    times,
                    4 * d * d,
                    "cross_attn",
                    2 * (n + m) * d * d + 2 * m * n * d,
                )
            )
        params, mults = transition(length)
        rows.append(row(side, transition_name, times, params, "ffn", mults))
        norms = 3 if side == "decoder" and cross else 2
        rows.append(row(side, "layer norm", norms * times, 2 * d, "norm", 2 * length * d))
    return rows


def embedding_params(model: nn.Module) -> int:
    """Parameters outside the layer stacks: embeddings, output projection, final norms, heads."""
    unique = {id(layer): layer for side in ("encoder", "decoder") for layer in _layers(model, side)}
    inside = sum(_numel(layer) for layer in unique.values())  # a UT's shared layer counts once
    return _numel(model) - inside


def output_mults(cfg: ModelConfig, vocab: int, tgt_len: int) -> int:
    """The pre-softmax projection: d x V multiplications per target token (a classifier's head
    over classes is not counted)."""
    return tgt_len * cfg.d_model * vocab if assembly_for(cfg.kind).decoder else 0


def flops_per_token(
    cfg: ModelConfig, vocab: int, src_len: int, tgt_len: int, training: bool = False
) -> float:
    """Forward FLOPs (2 x multiplications) per target token; training = 3 x forward."""
    mults = sum(r.times * r.mults for r in cost_table(cfg, src_len, tgt_len))
    mults += output_mults(cfg, vocab, tgt_len)
    tokens = tgt_len if assembly_for(cfg.kind).decoder else src_len  # a classifier's: its source
    return (6.0 if training else 2.0) * mults / tokens


@dataclass
class CostReport:
    """What `transduce inspect` prints: Table 1 rows (measured counts filled), the totals."""

    rows: list[CostRow]
    embedding_params: int  # outside the layer stacks (see embedding_params)
    total_params: int
    forward_flops: float  # per target token


def model_cost(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, src_len: int, tgt_len: int) -> CostReport:
    """Build the model `cfg` describes and account for it, for m = `src_len` and n = `tgt_len`."""
    model = build_model(cfg, src_vocab, tgt_vocab)
    return CostReport(
        cost_table(cfg, src_len, tgt_len, model),
        embedding_params(model),
        _numel(model),
        flops_per_token(cfg, tgt_vocab, src_len, tgt_len),
    )
