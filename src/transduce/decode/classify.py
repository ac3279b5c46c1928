"""Classifiers: the most probable label of each input, or of each of its tokens.

Class c is the label vocabulary's id FIRST_SYMBOL + c, so labels come back as target ids that
render, score and count in accuracies like any model's output tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..data.vocab import FIRST_SYMBOL, PAD
from .search import Hypothesis


@torch.no_grad()
def label_log_probs(model: nn.Module, src: Tensor) -> list[Tensor]:
    """Per source row (batch, m: ids + EOS, right-padded), its (labels, classes) log-probabilities:
    one label for a sequence classifier, one per source token (EOS and padding left out) for a
    token classifier. `model`: an EncoderClassifier or an Ensemble of them."""
    log_probs = model.classify(src).float().log_softmax(-1)
    if log_probs.dim() == 2:
        return [row[None] for row in log_probs]
    lengths = (src.ne(PAD).sum(1) - 1).tolist()
    return [log_probs[row, :n] for row, n in enumerate(lengths)]


def classify(model: nn.Module, src: Tensor) -> list[Hypothesis]:
    """The most probable labels of each source row, scored by their summed log-probability."""
    out = []
    for rows in label_log_probs(model, src):
        best, classes = rows.max(-1)
        total = float(best.sum())
        out.append(Hypothesis((classes + FIRST_SYMBOL).tolist(), total, total))
    return out
