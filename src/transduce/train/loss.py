"""Label-smoothed cross entropy; padding positions never contribute."""

from __future__ import annotations

import torch
from torch import Tensor


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Summed smoothed loss with its gradient written directly: keep * (softmax - q) per token.

    Autograd through log_softmax, gather and mean would zero-fill a (tokens, V) gradient for
    the gather, add it to the mean's, then run log_softmax's backward: four passes over the
    largest tensor of a training step. The closed form takes two, and keeps one (tokens, V)
    tensor (the log-probabilities) for the backward pass.
    """

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, smoothing: float, keep: Tensor) -> tuple[Tensor, Tensor]:
        logp = logits.float().log_softmax(-1)
        nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (batch, n)
        uniform = -logp.mean(-1)
        per_token = (1.0 - smoothing) * nll + smoothing * uniform
        nll_sum = nll.masked_fill(~keep, 0.0).sum()
        ctx.save_for_backward(logp, target, keep)
        ctx.smoothing, ctx.logits_dtype = smoothing, logits.dtype
        ctx.mark_non_differentiable(nll_sum)
        return per_token.masked_fill(~keep, 0.0).sum(), nll_sum

    @staticmethod
    def backward(ctx, grad: Tensor, _: Tensor) -> tuple[Tensor, None, None, None]:
        logp, target, keep = ctx.saved_tensors
        eps, vocab = ctx.smoothing, logp.shape[-1]
        out = torch.exp(logp).sub_(eps / vocab)  # softmax minus the uniform part of q
        out.scatter_add_(-1, target.unsqueeze(-1), logp.new_full((*target.shape, 1), eps - 1.0))
        out.mul_((keep.to(logp.dtype) * grad).unsqueeze(-1))
        return out.to(ctx.logits_dtype), None, None, None


def label_smoothed_loss(
    logits: Tensor, target: Tensor, smoothing: float, pad_id: int
) -> tuple[Tensor, Tensor]:
    """Summed loss against q = (1 - eps) * onehot + eps / V, and the summed plain NLL.

    One log-softmax serves both: loss = (1 - eps) * NLL + eps * mean_v(-log p_v) per token.
    logits: (batch, n, V); target: (batch, n), `pad_id` where nothing is scored (it may lie
    outside 0..V-1, as a class target's -1 does). Returns (smoothed_sum, nll_sum); only the first
    carries a gradient.
    """
    keep = target.ne(pad_id)
    return _SmoothedCrossEntropy.apply(logits, target.masked_fill(~keep, 0), smoothing, keep)
