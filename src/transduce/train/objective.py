"""What a training step compares, per model kind: the batches, what the model reads of them, and
the targets its logits predict.

Every kind gives logits (batch, n, classes) and targets (batch, n), IGNORE where nothing is
predicted, so one loss and one token count serve all: an encoder-decoder predicts target + EOS
from the source and BOS + target; a language model reads source and target as one sequence and
predicts it + EOS from BOS + it; a classifier predicts a class per sequence (its pooled states) or
per source token (class c is the label vocabulary's id FIRST_SYMBOL + c).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from ..config import ModelConfig
from ..data.batching import Batch, batch_shapes, collate, padded_lengths
from ..data.dataset import Split
from ..data.vocab import FIRST_SYMBOL, PAD
from ..model.transformer import ModelOutput

IGNORE = -1  # a target position that is not scored: padding, a token classifier's EOS


@dataclass(frozen=True)
class Objective:
    """How one model kind is trained."""

    joined: bool  # batches read source and target as one sequence (language models)
    forward: Callable[[nn.Module, Batch], ModelOutput]  # the model (or its DDP wrapper) on a batch
    targets: Callable[[Batch], Tensor]  # aligned with the logits' positions
    per_sequence: bool = False  # one target per example, predicted from the whole source

    def lengths(self, split: Split) -> np.ndarray:
        """Per example, its padded length in this kind's batches: the unit of the token budget."""
        return padded_lengths(split, self.joined)

    def collate(self, split: Split, indices: list[int], multiple: int = 1) -> Batch:
        """A batch of this kind, each side padded to a multiple of `multiple` positions."""
        return collate(split, indices, self.joined, multiple)

    def shapes(self, split: Split, batches: list[list[int]], multiple: int = 1) -> list[tuple[int, int, int]]:
        """(rows, source width, target width) of `collate`'s batch for each batch, without building them."""
        return batch_shapes(split, batches, self.joined, multiple)


def _translate(net: nn.Module, batch: Batch) -> ModelOutput:
    return net(batch.src, batch.tgt_in, **batch.source)


def _continue(net: nn.Module, batch: Batch) -> ModelOutput:
    return net(batch.tgt_in)


def _label_tokens(net: nn.Module, batch: Batch) -> ModelOutput:
    return net(batch.src)


def _label_sequences(net: nn.Module, batch: Batch) -> ModelOutput:
    out = net(batch.src)
    return ModelOutput(out.logits[:, None], out.ponder)  # one position per sequence


def _next_tokens(batch: Batch) -> Tensor:
    return batch.tgt_out.masked_fill(batch.tgt_out.eq(PAD), IGNORE)


def _token_classes(batch: Batch) -> Tensor:
    """The classes of the target labels, one per source position (EOS and padding: IGNORE)."""
    labels = batch.tgt_out
    return torch.where(labels >= FIRST_SYMBOL, labels - FIRST_SYMBOL, IGNORE)


def _sequence_classes(batch: Batch) -> Tensor:
    return _token_classes(batch)[:, :1]


TRANSLATE = Objective(joined=False, forward=_translate, targets=_next_tokens)
CONTINUE = Objective(joined=True, forward=_continue, targets=_next_tokens)
CLASSIFY = {  # per classifier head: one label per sequence, or one per source token
    "sequence": Objective(
        joined=False, forward=_label_sequences, targets=_sequence_classes, per_sequence=True
    ),
    "token": Objective(joined=False, forward=_label_tokens, targets=_token_classes),
}

# model.kind -> its objective: the one place training dispatches on the kind of model.
OBJECTIVES: dict[str, Callable[[ModelConfig], Objective]] = {
    "encoder_decoder": lambda cfg: TRANSLATE,
    "decoder": lambda cfg: CONTINUE,
    "encoder": lambda cfg: CLASSIFY[cfg.classifier],
}


def objective_for(cfg: ModelConfig) -> Objective:
    """The objective of the model `cfg` describes."""
    return OBJECTIVES[cfg.kind](cfg)
