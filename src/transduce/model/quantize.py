"""Dynamic int8 quantisation for CPU inference: int8 weights, activations quantised on the fly.

A linear map of at least `MIN_WEIGHTS` weights becomes an `Int8Linear` on oneDNN's int8 GEMM
(the kernels PyTorch's own x86 quantisation lowers to): the FFNs, attention output projections,
the fused Q/K/V projections (split into a query and a key/value part, so that cross-attention
still projects only what it needs) and the output projection (untied from the embedding, which
stays float). A smaller one stays float32, pre-packed for oneDNN: quantising the activations
costs a pass over them on every call, which the int8 multiply repays only on a large matrix
(decoding a batch of 64 or 256 rows on this CPU: a 128 x 128 or 256 x 256 map is 0.3-0.7x as
fast in int8, a 512 x 512 one 1.6-1.8x, the 128 x 8000 output projection 1.4-1.7x;
bench/decode/int8_width.py measures whole models by width). Embeddings, layer norms and
attention arithmetic stay float32. Weights are plain int8 tensors with one scale
per output row; nothing goes through `torch.ao.quantization` or quantized tensor types, which
PyTorch has deprecated.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .linears import with_plain_linears
from .packed import pack_linears

MIN_WEIGHTS = 2**18  # in x out of the smallest linear map made int8: 512 x 512, 256 x 1024

# Activations use 7 bits: x86 CPUs without VNNI sum pairs of u8 x s8 products in 16 bits, which
# full 8-bit activations can overflow (fbgemm reduces the range on x86 for the same reason).
ACTIVATION_MAX = 127
WEIGHT_MAX = 127


class Int8Linear(nn.Module):
    """y = x W^T + b with W stored as int8 rows times a float scale each (max |row| / 127) and x
    quantised per call to unsigned 7-bit integers over its own range (scale and zero point)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(1).clamp_min(torch.finfo(torch.float32).tiny) / WEIGHT_MAX
        rows = torch.round(weight / scale[:, None]).clamp_(-WEIGHT_MAX, WEIGHT_MAX).to(torch.int8)
        self.out_features = linear.out_features
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("packed", torch.ops.onednn.qlinear_prepack(rows, None), persistent=False)
        self.register_buffer("scale", scale, persistent=False)
        self.register_buffer("zero", torch.zeros(len(scale), dtype=torch.long), persistent=False)
        bias = None if linear.bias is None else linear.bias.detach().float().clone()
        self.register_buffer("bias", bias, persistent=False)

    @property
    def weight(self) -> Tensor:
        """The float weight this layer computes with (its int8 rows times their scales)."""
        return self.rows.float() * self.scale[:, None]

    def forward(self, x: Tensor) -> Tensor:
        flat = x.reshape(-1, x.shape[-1]).float()
        if flat.shape[0] == 0:
            return x.new_zeros(*x.shape[:-1], self.out_features)
        low, high = (float(v) for v in torch.aminmax(flat))
        step = (max(high, 0.0) - min(low, 0.0)) / ACTIVATION_MAX or 1.0
        zero = round(-min(low, 0.0) / step)
        levels = flat.mul(1.0 / step).add_(zero).round_().clamp_(0, ACTIVATION_MAX).to(torch.uint8)
        out = torch.ops.onednn.qlinear_pointwise(
            levels, step, zero, self.packed, self.scale, self.zero, self.bias,
            1.0, 0, torch.float32, "none", [], "",
        )  # fmt: skip
        return out.reshape(*x.shape[:-1], self.out_features)


def quantize_int8(model: nn.Module, min_weights: int = MIN_WEIGHTS) -> nn.Module:
    """An int8 copy of a model for CPU decoding (the original is left untouched): its linear maps
    of at least `min_weights` weights in int8 (0: all of them), the others pre-packed float32."""
    model = with_plain_linears(model)
    for parent in list(model.modules()):
        for name, child in parent.named_children():
            if type(child) is nn.Linear and child.weight.numel() >= min_weights:
                setattr(parent, name, Int8Linear(child))
    pack_linears(model)
    return model
