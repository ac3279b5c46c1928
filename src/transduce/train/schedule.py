"""The paper's learning rate: lr = scale * d^-0.5 * min(step^-0.5, step * warmup^-1.5)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def inverse_sqrt_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """Linear warmup for `warmup` steps, then decay with the inverse square root of the step."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@dataclass(frozen=True, slots=True)
class InverseSqrt:
    """`inverse_sqrt_lr` of a run's settings, on the host or on the device."""

    d_model: int
    warmup: int
    scale: float = 1.0

    def __call__(self, step: int) -> float:
        return inverse_sqrt_lr(step, self.d_model, self.warmup, self.scale)

    @property
    def peak(self) -> float:
        """The highest rate, reached at the end of the warm-up."""
        return self(self.warmup)

    def on_device(self, step: Tensor, dtype: torch.dtype) -> Tensor:
        """The rate at a step counted on the device, computed there (no synchronisation). In
        float64 it may differ from `__call__` in the last bit (pow against rsqrt)."""
        s = step.to(dtype).clamp(min=1)
        return torch.minimum(s.rsqrt(), s * self.warmup**-1.5) * (self.scale * self.d_model**-0.5)
