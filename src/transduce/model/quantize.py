"""Dynamic int8 quantisation for CPU inference: int8 weights, activations quantised on the fly.

Every linear map becomes torch's dynamically quantised Linear: the FFNs, attention output
projections, the fused Q/K/V projections (split into a query and a key/value part, so that
cross-attention still projects only what it needs) and the output projection (untied from the
embedding, which stays float). Embeddings, layer norms and attention arithmetic stay float32.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from .linears import with_plain_linears


def quantize_int8(model: nn.Module) -> nn.Module:
    """An int8 copy of a model for CPU decoding (the original is left untouched)."""
    model = with_plain_linears(model)
    with warnings.catch_warnings():  # torch announces a future API for quantised tensors
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*deprecated", category=UserWarning)
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
