"""Label-smoothed cross entropy; padding positions never contribute."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def label_smoothed_loss(
    logits: Tensor, target: Tensor, smoothing: float, pad_id: int
) -> tuple[Tensor, Tensor]:
    """Summed loss against q = (1 - eps) * onehot + eps / V, and the summed plain NLL.

    logits: (batch, n, V); target: (batch, n). Returns (smoothed_sum, nll_sum).
    """
    flat, tgt = logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1)
    smoothed = F.cross_entropy(flat, tgt, ignore_index=pad_id, label_smoothing=smoothing, reduction="sum")
    nll = F.cross_entropy(flat, tgt, ignore_index=pad_id, reduction="sum")
    return smoothed, nll.detach()
