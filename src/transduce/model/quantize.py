"""Dynamic int8 quantisation for CPU inference: int8 weights, activations quantised on the fly.

Every linear map becomes torch's dynamically quantised Linear: the FFNs, attention output
projections, the fused Q/K/V projections (split into a query and a key/value part, so that
cross-attention still projects only what it needs) and the output projection (untied from the
embedding, which stays float). Embeddings, layer norms and attention arithmetic stay float32.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor, nn

from .attention import FusedQKV, MultiHeadAttention
from .transformer import OutputProjection


class SplitQKV(nn.Module):
    """FusedQKV's interface over two separate linear maps (quantisable one by one)."""

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


def quantize_int8(model: nn.Module) -> nn.Module:
    """An int8 copy of a model for CPU decoding (the original is left untouched)."""
    model = copy.deepcopy(model).eval()
    for module in model.modules():
        if isinstance(module, MultiHeadAttention) and isinstance(module.in_proj, FusedQKV):
            module.in_proj = SplitQKV(module.in_proj)
    if isinstance(getattr(model, "output", None), OutputProjection):
        model.output = _as_linear(model.output)
    with warnings.catch_warnings():  # torch announces a future API for quantised tensors
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*deprecated", category=UserWarning)
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
