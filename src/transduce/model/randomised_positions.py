"""Position randomisation at training time, for length generalisation on algorithmic tasks.

A model trained on lengths 1..40 has only seen positions 0..39, so at length 400 most positions
are new to it. Two remedies draw the positions of each training pass at random instead:

- `offset` (the Universal Transformer paper, Dehghani et al. 2018: "positions starting with
  randomized offsets"; tensor2tensor's `position_start_index="random"`): positions
  k, k+1, ..., k+n-1 with k uniform in [0, n), n the padded length of the batch. Training
  on lengths up to 40 thus meets positions below 80 only.
- `offset_range`: the same run of n positions with k uniform in [0, position_range - n], so
  that training meets every position below position_range, dense as evaluation uses them.
- `subset` (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length Generalization of
  Transformers"): n distinct positions drawn uniformly from [0, position_range) and sorted, so
  training sees the gaps and magnitudes of positions up to position_range.

Who draws (`model.position_draw`): `shared` (the default) draws once per training pass of an
encoder-decoder, for the longer of its source and target, and each stack takes the first n
positions of that draw, so source position i and target position i keep one encoding, as they
do at evaluation; `per_stack` lets the encoder and the decoder draw their own (with it, a
Transformer trained on copy at lengths 1..40 had not learned even those lengths after 1000
updates, measured on the CPU); `per_step` draws anew at every recurrent step of each stack of
a Universal Transformer, which is what tensor2tensor does (its `step_preprocess` adds the
position signal inside the step function, and `position_start_index="random"` draws the offset
there; a stack of distinct layers adds positions once, so there `per_step` is `per_stack`).
Models without a target (classifiers, language models) draw per stack at least. With `shared`
and `per_stack` a Universal Transformer's steps share their stack's draw.

Positions are arguments, as torchtune's `input_pos` and nanoGPT's `pos` are: an assembly in
training mode draws them (model/transformer.py) and hands them down, to the embeddings as
`positions` and to a stack in `StackInputs.positions` (a Universal Transformer adds them at every
step; with `per_step` it draws each later step's through `StackInputs.redraw`). No module keeps a
draw between calls. Draws come from torch's global CPU generator: the stream `train.seed` seeds
and every checkpoint saves, so runs repeat exactly and resume exactly.

Evaluation (`model.position_eval`) uses 0..n-1 (`dense`), or, after `subset` training,
0, s, 2s, ... with s = position_range // n for a source of n tokens (`spread`): the sorted
positions of a random subset lie on average about that far apart, so a model that only ever saw
sparse positions is not evaluated on dense ones it never met (Ruoss et al. draw a random subset at
test time too; the spread keeps evaluation deterministic). Each sentence takes its own s from its
own length, so its result does not depend on the batch it is decoded in, and its target takes the
source's s, so that source and target position i still match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

MODES = ("none", "offset", "offset_range", "subset")
DRAWS = ("shared", "per_stack", "per_step")
EVALUATIONS = ("dense", "spread")


@dataclass(frozen=True)
class PositionRandomisation:
    """How a model picks its positions: the settings only, never a draw. The assemblies ask it for
    each stack's positions and pass them down as arguments (`StackInputs.positions`, the
    embeddings' `positions`); `none` and `dense` keep 0..n-1."""

    mode: str = "none"
    position_range: int = 2048
    draw_for: str = "shared"
    evaluation: str = "dense"

    def __post_init__(self) -> None:
        for value, allowed, what in (
            (self.mode, MODES, "position randomisation"),
            (self.draw_for, DRAWS, "position draw"),
            (self.evaluation, EVALUATIONS, "evaluation positions"),
        ):
            if value not in allowed:
                raise ValueError(f"unknown {what} '{value}'; allowed: {', '.join(allowed)}")

    def draw(self, length: int) -> Tensor | None:
        """(length,) int64 positions for one training pass, or None for the usual 0..length-1."""
        if self.mode == "offset":
            start = int(torch.randint(length, ()))
            return torch.arange(start, start + length)
        if self.mode in ("offset_range", "subset") and length > self.position_range:
            raise ValueError(
                f"a training sequence of {length} positions does not fit in "
                f"model.position_range={self.position_range}; allowed: model.position_range >= {length}"
            )
        if self.mode == "offset_range":
            start = int(torch.randint(self.position_range - length + 1, ()))
            return torch.arange(start, start + length)
        if self.mode == "subset":
            return torch.randperm(self.position_range)[:length].sort().values
        return None

    def pass_draw(self, length: int) -> Tensor | None:
        """With draw_for='shared', the one draw of a training pass whose longest sequence has
        `length` positions; every stack of the pass takes its first positions. None otherwise."""
        return self.draw(length) if self.draw_for == "shared" else None

    def evaluation_strides(self, pad: Tensor) -> Tensor | None:
        """(batch,) spacing of each sequence's evaluation positions from its real length (`pad`:
        (batch, n), True at padding), or None for 0..n-1."""
        if self.evaluation == "dense":
            return None
        lengths = (~pad).sum(1)
        return (self.position_range // lengths.clamp(min=1)).clamp(min=1)

    def positions(
        self,
        length: int,
        offset: int,
        strides: Tensor | None,
        training: bool,
        drawn: Tensor | None = None,
    ) -> Tensor | None:
        """The positions of a stack's `length` states whose first is state number `offset`:
        (length,) in training, the start of the pass's draw `drawn` or a draw of their own;
        (batch, length) spread by `strides` in evaluation; None for offset..offset+length-1."""
        if training:
            if drawn is None:
                return self.draw(length)
            if length > len(drawn):
                raise ValueError(f"a stack of {length} positions in a pass drawn for {len(drawn)}")
            return drawn[:length]
        if strides is None:
            return None
        steps = torch.arange(offset, offset + length, device=strides.device)
        return steps[None, :] * strides[:, None]

    def step_draws(self, training: bool) -> Callable[[int], Tensor | None] | None:
        """With draw_for='per_step' in training, what draws each later recurrent step's positions
        (a Universal Transformer's); None: the steps keep their stack's positions."""
        return self.draw if training and self.draw_for == "per_step" else None
