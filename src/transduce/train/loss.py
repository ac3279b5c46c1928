"""Label-smoothed cross entropy; padding positions never contribute."""

from __future__ import annotations

from torch import Tensor


def label_smoothed_loss(
    logits: Tensor, target: Tensor, smoothing: float, pad_id: int
) -> tuple[Tensor, Tensor]:
    """Summed loss against q = (1 - eps) * onehot + eps / V, and the summed plain NLL.

    One log-softmax serves both: loss = (1 - eps) * NLL + eps * mean_v(-log p_v) per token.
    logits: (batch, n, V); target: (batch, n). Returns (smoothed_sum, nll_sum).
    """
    logp = logits.float().log_softmax(-1)
    keep = target.ne(pad_id)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (batch, n)
    uniform = -logp.mean(-1)
    per_token = (1.0 - smoothing) * nll + smoothing * uniform
    return per_token.masked_fill(~keep, 0.0).sum(), nll.masked_fill(~keep, 0.0).sum().detach()
