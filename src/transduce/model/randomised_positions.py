"""Position randomisation at training time, for length generalisation on algorithmic tasks.

A model trained on lengths 1..40 has only seen positions 0..39, so at length 400 most positions
are new to it. Two remedies draw the positions of each training pass at random instead:

- `offset` (the Universal Transformer paper, Dehghani et al. 2018: "positions starting with
  randomized offsets"; tensor2tensor's `position_start_index="random"`): positions
  k, k+1, ..., k+n-1 with k uniform in [0, n), n the padded length of the batch.
- `subset` (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length Generalization of
  Transformers"): n distinct positions drawn uniformly from [0, position_range) and sorted, so
  training sees the gaps and magnitudes of positions up to position_range.

Each stack (encoder, decoder) draws its own positions once per forward pass, from torch's global
CPU generator: the stream `train.seed` seeds and every checkpoint saves, so runs repeat exactly
and resume exactly. Only modules in training mode draw; evaluation uses 0..n-1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

MODES = ("none", "offset", "subset")


@dataclass(frozen=True)
class PositionRandomisation:
    """How a training pass picks its positions; `none` keeps 0..n-1."""

    mode: str = "none"
    position_range: int = 2048  # `subset` draws from [0, position_range)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown position randomisation '{self.mode}'; allowed: {', '.join(MODES)}")

    def draw(self, length: int) -> Tensor | None:
        """(length,) int64 positions for one training pass, or None for the usual 0..length-1."""
        if self.mode == "offset":
            start = int(torch.randint(length, ()))
            return torch.arange(start, start + length)
        if self.mode == "subset":
            if length > self.position_range:
                raise ValueError(
                    f"a training sequence of {length} positions does not fit in "
                    f"model.position_range={self.position_range}; allowed: model.position_range >= {length}"
                )
            return torch.randperm(self.position_range)[:length].sort().values
        return None
