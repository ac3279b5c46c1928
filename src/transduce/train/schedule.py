"""The paper's learning rate: lr = scale * d^-0.5 * min(step^-0.5, step * warmup^-1.5)."""

from __future__ import annotations


def inverse_sqrt_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """Linear warmup for `warmup` steps, then decay with the inverse square root of the step."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
