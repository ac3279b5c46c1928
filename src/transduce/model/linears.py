"""A decoding copy of a model whose every linear map is a plain, separately replaceable nn.Linear.

Inference rewrites (int8 quantisation, pre-packed float32 weights) swap nn.Linear modules; two
maps are not modules of that kind in a trained model: the fused Q/K/V projection, whose query and
key/value slices cross-attention calls separately, and the output projection, which may share
its matrix with the target embedding. This copy splits the first and unties the second.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from .attention import FusedQKV, MultiHeadAttention
from .transformer import OutputProjection


class SplitQKV(nn.Module):
    """FusedQKV's interface over two separate linear maps (replaceable one by one)."""

    def __init__(self, fused: FusedQKV) -> None:
        super().__init__()
        d = fused.out_features // 3
        bias = fused.bias is not None
        self.q = nn.Linear(fused.in_features, d, bias=bias)
        self.kv = nn.Linear(fused.in_features, 2 * d, bias=bias)
        with torch.no_grad():
            self.q.weight.copy_(fused.weight[:d])
            self.kv.weight.copy_(fused.weight[d:])
            if bias:
                self.q.bias.copy_(fused.bias[:d])
                self.kv.bias.copy_(fused.bias[d:])

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.q(x), self.kv(x)], dim=-1)

    def query(self, x: Tensor) -> Tensor:
        return self.q(x)

    def key_value(self, x: Tensor) -> Tensor:
        return self.kv(x)


def _as_linear(output: OutputProjection) -> nn.Linear:
    vocab, d = output.weight.shape
    linear = nn.Linear(d, vocab, bias=output.bias is not None)
    with torch.no_grad():
        linear.weight.copy_(output.weight)
        if output.bias is not None:
            linear.bias.copy_(output.bias)
        else:
            linear.bias = None
    return linear


def with_plain_linears(model: nn.Module) -> nn.Module:
    """A copy in eval mode with Q/K/V split and the output projection untied (the original is
    left untouched)."""
    model = copy.deepcopy(model).eval()
    for module in model.modules():
        if isinstance(module, MultiHeadAttention) and isinstance(module.in_proj, FusedQKV):
            module.in_proj = SplitQKV(module.in_proj)
    if isinstance(getattr(model, "output", None), OutputProjection):
        model.output = _as_linear(model.output)
    return model
