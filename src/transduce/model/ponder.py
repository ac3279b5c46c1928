"""ACT's ponder statistics: returned by a Universal stack's pass, read by training and plots."""

from __future__ import annotations

from dataclasses import dataclass

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
