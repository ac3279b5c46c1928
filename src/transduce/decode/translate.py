"""Decode many sources: sort by length, batch under a token budget, restore input order."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..config import DecodeConfig
from ..data.batching import annotation_tensors, encode_sources, make_batches
from ..data.source import SourceAnnotation
from ..model.transformer import EncoderDecoder
from .search import Hypothesis, beam_search, greedy


def decode_all(
    model: EncoderDecoder,
    sources: list[list[int]],
    cfg: DecodeConfig,
    use_greedy: bool = False,
    device: torch.device | None = None,
    on_batch: Callable[[int], None] | None = None,
    annotations: list[SourceAnnotation] | None = None,
) -> list[list[Hypothesis]]:
    """n-best hypotheses per source, in input order. Empty sources give no hypotheses.

    annotations: per source, its tags and tree distances for factored or syntax-aware models."""
    device = device or next(model.parameters()).device
    results: list[list[Hypothesis]] = [[] for _ in sources]
    todo = [i for i, s in enumerate(sources) if s]
    lengths = [len(sources[i]) + 1 for i in todo]
    was_training = model.training
    model.eval()
    for group in make_batches(np.asarray(lengths), cfg.max_tokens, seed=None, drop_long=False)[0]:
        idx = [todo[g] for g in group]
        src = encode_sources([sources[i] for i in idx]).to(device)
        extra = {}
        if annotations is not None:
            extra = annotation_tensors([annotations[i] for i in idx], src.shape[1])
            extra = {k: v.to(device) for k, v in extra.items()}
        if use_greedy:
            hyps = [[h] for h in greedy(model, src, cfg.max_len_a, cfg.max_len_b, cfg.min_len, extra)]
        else:
            hyps = beam_search(
                model, src, cfg.beam, cfg.alpha, cfg.max_len_a, cfg.max_len_b, cfg.min_len, cfg.nbest, extra
            )
        for i, h in zip(idx, hyps, strict=True):
            results[i] = h
        if on_batch is not None:
            on_batch(len(idx))
    model.train(was_training)
    return results
