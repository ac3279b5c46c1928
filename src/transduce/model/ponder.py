"""ACT's ponder statistics: returned by a Universal stack's pass, read by training and plots."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Ponder:
    """Per-position ACT statistics of one pass (padding positions are 0)."""

    steps: Tensor  # (batch, n) steps taken
    remainder: Tensor  # (batch, n)
    weights: Tensor  # (steps, batch, n) halting weights per step
    pad: Tensor | None = None  # (batch, n) True at padding

    @property
    def cost(self) -> Tensor:
        """Ponder cost per position: steps + remainder."""
        return self.steps + self.remainder

    def real(self, values: Tensor) -> Tensor:
        """The entries of a (batch, n) tensor at the non-padding positions, flattened."""
        return values[~self.pad] if self.pad is not None else values.flatten()

    def mean_cost(self) -> Tensor:
        """Mean ponder cost over the real positions: the quantity ACT's loss term penalises."""
        return self.real(self.cost).mean()


def ponder_loss(ponders: dict[str, Ponder], tau: float) -> Tensor | None:
    """tau x the summed mean ponder cost of the ACT stacks of one pass, or None without ACT."""
    costs = [p.mean_cost() for p in ponders.values()]
    return tau * sum(costs) if costs else None


@dataclass(frozen=True)
class PonderWeights:
    """ACT's ponder cost weight tau of each stack along training: 0 for the first `start` updates,
    then rising linearly over `ramp` updates to the stack's tau (at once when `ramp` is 0)."""

    encoder: float
    decoder: float
    start: int = 0
    ramp: int = 0

    def factor(self, update: Tensor) -> Tensor | None:
        """The share of tau at update `update` (1-based, a device scalar: nothing waits for the
        device), or None where it is 1 from the first update."""
        if not self.start and not self.ramp:
            return None
        if not self.ramp:
            return (update > self.start).float()
        return ((update - self.start).float() / self.ramp).clamp(0.0, 1.0)

    def loss(self, ponders: dict[str, Ponder], update: Tensor) -> Tensor | None:
        """The weighted ponder cost of one pass's ACT stacks at update `update`, or None without ACT."""
        if self.encoder == self.decoder:  # as ponder_loss computes it, to the bit
            cost = ponder_loss(ponders, self.encoder)
        else:
            taus = {"encoder": self.encoder, "decoder": self.decoder}
            parts = [taus[side] * p.mean_cost() for side, p in ponders.items()]
            cost = torch.stack(parts).sum() if parts else None
        factor = self.factor(update)
        return cost if cost is None or factor is None else cost * factor
