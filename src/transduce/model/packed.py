"""Float32 linear maps with weights pre-packed for oneDNN, for CPU decoding.

A plain `linear` hands its weight to the BLAS in the stored row-major layout on every call.
oneDNN can reorder a weight once into the blocked layout its kernels read; on the
few-rows-at-a-time multiplies of step-by-step decoding that makes each multiply 1.3-3x faster on
this CPU (docs/results/decoding.md). The arithmetic is the same float32 sum of products, in another
order. The packed copy is for decoding only: no gradients, CPU only, not saved.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .linears import with_plain_linears

ROWS_HINT = 128  # the row count oneDNN tunes the layout for; decoding batches times beams


def packing_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class PackedLinear(nn.Module):
    """y = x W^T + b with W held in oneDNN's blocked layout."""

    def __init__(self, linear: nn.Linear, keep_weight: bool = False) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        weight = linear.weight.detach().float().contiguous()
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, ROWS_HINT)
        # the plain matrix too, where rows of it are wanted (the output projection: shortlists)
        self.weight = weight if keep_weight else None
        self.bias = None if linear.bias is None else linear.bias.detach().float().clone()

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"expected {self.in_features} input features, got {x.shape[-1]}")
        if x.numel() == 0:
            return x.new_empty(*x.shape[:-1], self.out_features)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        bias = self.bias is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={bias}"


def pack_linears(module: nn.Module, root: bool = True) -> None:
    """Every plain nn.Linear in `module` replaced, in place, by its packed form where packing is
    available (the output projection keeps its plain matrix too)."""
    if not packing_available():
        return
    for name, child in module.named_children():
        if type(child) is nn.Linear:
            setattr(module, name, PackedLinear(child, keep_weight=root and name == "output"))
        else:
            pack_linears(child, root=False)


def pack_for_cpu(model: nn.Module) -> nn.Module:
    """A decoding copy of a float32 CPU model with every linear map packed (the original is left
    untouched); the model itself where packing is unavailable or the model is not on the CPU."""
    if not packing_available() or any(p.device.type != "cpu" for p in model.parameters()):
        return model
    if any(p.dtype != torch.float32 for p in model.parameters()):
        return model
    model = with_plain_linears(model)
    pack_linears(model)
    return model
