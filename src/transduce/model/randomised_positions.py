"""Position randomisation at training time, for length generalisation on algorithmic tasks.

A model trained on lengths 1..40 has only seen positions 0..39, so at length 400 most positions
are new to it. Two remedies draw the positions of each training pass at random instead:

- `offset` (the Universal Transformer paper, Dehghani et al. 2018: "positions starting with
  randomized offsets"; tensor2tensor's `position_start_index="random"`): positions
  k, k+1, ..., k+n-1 with k uniform in [0, n), n the padded length of the batch.
- `subset` (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length Generalization of
  Transformers"): n distinct positions drawn uniformly from [0, position_range) and sorted, so
  training sees the gaps and magnitudes of positions up to position_range.

Who draws (`model.position_draw`): `shared` (the default) draws once per training pass of an
encoder-decoder, for the longer of its source and target, and each stack takes the first n
positions of that draw, so source position i and target position i keep one encoding, as they
do at evaluation; `per_stack` lets the encoder and the decoder draw their own (with it, a
Transformer trained on copy at lengths 1..40 had not learned even those lengths after 1000
updates: see bench/RESULTS.md); `per_step` draws anew at every recurrent step of each stack of
a Universal Transformer, which is what tensor2tensor does (its `step_preprocess` adds the
position signal inside the step function, and `position_start_index="random"` draws the offset
there; a stack of distinct layers adds positions once, so there `per_step` is `per_stack`).
Models without a target (classifiers, language models) draw per stack at least. With `shared`
and `per_stack` a Universal Transformer's steps share their stack's draw.

Draws come from torch's global CPU generator: the stream `train.seed` seeds and every checkpoint
saves, so runs repeat exactly and resume exactly. Only modules in training mode draw.

Evaluation (`model.position_eval`) uses 0..n-1 (`dense`), or, after `subset` training,
0, s, 2s, ... with s = position_range // n for a source of n tokens (`spread`): the sorted
positions of a random subset lie on average about that far apart, so a model that only ever saw
sparse positions is not evaluated on dense ones it never met (Ruoss et al. draw a random subset at
test time too; the spread keeps evaluation deterministic). Each sentence takes its own s from its
own length, so its result does not depend on the batch it is decoded in, and its target takes the
source's s, so that source and target position i still match.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

MODES = ("none", "offset", "subset")
DRAWS = ("shared", "per_stack", "per_step")
EVALUATIONS = ("dense", "spread")


class PositionRandomisation:
    """How a training pass picks its positions; `none` keeps 0..n-1. One object serves all the
    stacks of a model, so that a shared pass can hand each the same draw."""

    def __init__(
        self,
        mode: str = "none",
        position_range: int = 2048,
        draw_for: str = "shared",
        evaluation: str = "dense",
    ) -> None:
        for value, allowed, what in (
            (mode, MODES, "position randomisation"),
            (draw_for, DRAWS, "position draw"),
            (evaluation, EVALUATIONS, "evaluation positions"),
        ):
            if value not in allowed:
                raise ValueError(f"unknown {what} '{value}'; allowed: {', '.join(allowed)}")
        self.mode, self.position_range, self.draw_for = mode, position_range, draw_for
        self.evaluation = evaluation
        self._pass: Tensor | None = None

    def _new(self, length: int) -> Tensor | None:
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

    @contextmanager
    def shared_pass(self, length: int | None) -> Iterator[None]:
        """Within it, with draw_for='shared', every `draw` takes the first positions of one draw
        for `length` (the longest sequence of the pass; None: not a training pass, no draw)."""
        if self.draw_for == "shared" and length is not None:
            self._pass = self._new(length)
        try:
            yield
        finally:
            self._pass = None

    def draw(self, length: int) -> Tensor | None:
        """(length,) int64 positions for one training pass, or None for the usual 0..length-1."""
        if self._pass is not None:
            if length > len(self._pass):
                raise ValueError(f"a stack of {length} positions in a pass drawn for {len(self._pass)}")
            return self._pass[:length]
        return self._new(length)

    def evaluation_strides(self, pad: Tensor) -> Tensor | None:
        """(batch,) spacing of each sequence's evaluation positions from its real length (`pad`:
        (batch, n), True at padding), or None for 0..n-1."""
        if self.evaluation == "dense":
            return None
        lengths = (~pad).sum(1)
        return (self.position_range // lengths.clamp(min=1)).clamp(min=1)

    def positions(self, length: int, offset: int, strides: Tensor | None, training: bool) -> Tensor | None:
        """The positions of `length` states whose first is state number `offset`: (length,) drawn
        in training, (batch, length) spread by `strides` in evaluation, or None for the usual
        offset..offset+length-1."""
        if training:
            return self.draw(length)
        if strides is None:
            return None
        steps = torch.arange(offset, offset + length, device=strides.device)
        return steps[None, :] * strides[:, None]
