"""Ensembles: several models decoded as one, by averaging their next-token probabilities.

Independently trained models make partly independent errors; averaging their predictive
distributions at every step is the usual cheap gain of a point or so of BLEU. The ensemble
presents a model's decoding interface (`encode`, `decode`, `new_cache`), with one encoder
output and one cache per member, so greedy search, beam search, sampling and scoring run on it
unchanged. `decode` returns log((1/n) sum_i p_i), the log of the mean of the members'
probabilities (logsumexp of their log-softmaxes minus log n), already normalised: the
log-softmax that search applies leaves it unchanged.

Members read the same source ids and must share the target vocabulary; the ensemble checks
the target vocabulary sizes it can see, and the pipeline checks that the vocabularies
themselves are equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn


@dataclass
class EnsembleMemory:
    """One encoder output per member; selecting rows selects them in each."""

    members: list[Any]

    def select(self, index: Tensor) -> EnsembleMemory:
        return EnsembleMemory([m.select(index) for m in self.members])


@dataclass
class EnsembleCache:
    """One decoder cache per member; reordering reorders each."""

    members: list[Any]

    def reorder(self, index: Tensor, sources: Tensor | None = None) -> None:
        for cache in self.members:
            cache.reorder(index, sources)


def target_vocab_size(model: Any) -> int | None:
    """The size of the target vocabulary: the rows of the output projection (plain, packed or
    quantised) or an ensemble's; None for a model without either."""
    if isinstance(model, Ensemble):
        return model.vocab_size
    output = getattr(model, "output", None)
    if output is None:
        return None
    size = getattr(output, "out_features", None)
    if size is None and isinstance(getattr(output, "weight", None), Tensor):
        size = output.weight.shape[0]
    return int(size) if size is not None else None


class Ensemble(nn.Module):
    """Models of one kind combined by averaging their probabilities: at every step for
    encoder-decoders and language models, per label for classifiers."""

    def __init__(self, models: Sequence[nn.Module]) -> None:
        super().__init__()
        if not models:
            raise ValueError("an ensemble needs at least one model")
        kinds = sorted({m.kind for m in models})
        if len(kinds) > 1:
            raise ValueError(f"ensemble members must be of one model kind, not {' and '.join(kinds)}")
        self.kind = kinds[0]
        sizes = [target_vocab_size(m) for m in models]
        known = [(i, s) for i, s in enumerate(sizes) if s is not None]
        for i, size in known[1:]:
            if size != known[0][1]:
                raise ValueError(
                    f"ensemble members need one target vocabulary: model {known[0][0] + 1} has "
                    f"{known[0][1]} target entries, model {i + 1} has {size}"
                )
        self.members = nn.ModuleList(models)
        self.vocab_size = known[0][1] if known else None
        # Without calling train(): building an ensemble must not switch its members' modes.
        self.training = all(m.training for m in models)

    def encode(self, src: Tensor, **source: Tensor) -> EnsembleMemory:
        return EnsembleMemory([m.encode(src, **source) for m in self.members])

    def _mean(self, outputs: list[Tensor]) -> Tensor:
        """log((1/n) sum_i p_i) of the members' logits or log-probabilities."""
        log_probs = torch.stack([o.float().log_softmax(-1) for o in outputs])
        return torch.logsumexp(log_probs, 0) - math.log(len(self.members))

    def decode(self, tgt: Tensor, memory: EnsembleMemory, cache: EnsembleCache | None = None) -> Tensor:
        """tgt: (batch, n) ids (only the new ones with a cache) -> (batch, n, vocab) log-probabilities
        log((1/n) sum_i p_i)."""
        caches = cache.members if cache is not None else [None] * len(self.members)
        members = zip(self.members, memory.members, caches, strict=True)
        return self._mean([m.decode(tgt, mem, c) for m, mem, c in members])

    def classify(self, src: Tensor) -> Tensor:
        """Classifiers: the log of the members' mean label probabilities, (batch, [m,] classes)."""
        return self._mean([m.classify(src) for m in self.members])

    def new_cache(self) -> EnsembleCache:
        return EnsembleCache([m.new_cache() for m in self.members])
