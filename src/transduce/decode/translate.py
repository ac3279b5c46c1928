"""Decode many sources: sort by length, batch under a token budget, restore input order."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..config import DecodeConfig
from ..data.batching import encode_sources, make_batches
from ..model.transformer import EncoderDecoder
from .search import Hypothesis, beam_search, greedy


def decode_all(
    model: EncoderDecoder,
    sources: list[list[int]],
    cfg: DecodeConfig,
    use_greedy: bool = False,
    device: torch.device | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> list[list[Hypothesis]]:
    """n-best hypotheses per source, in input order. Empty sources give no hypotheses."""
    device = device or next(model.parameters()).device
    results: list[list[Hypothesis]] = [[] for _ in sources]
    todo = [i for i, s in enumerate(sources) if s]
    lengths = [len(sources[i]) + 1 for i in todo]
    was_training = model.training
    model.eval()
    for group in make_batches(np.asarray(lengths), cfg.max_tokens, seed=None, drop_long=False)[0]:
        idx = [todo[g] for g in group]
        src = encode_sources([sources[i] for i in idx]).to(device)
        if use_greedy:
            hyps = [[h] for h in greedy(model, src, cfg.max_len_a, cfg.max_len_b, cfg.min_len)]
        else:
            hyps = beam_search(
                model, src, cfg.beam, cfg.alpha, cfg.max_len_a, cfg.max_len_b, cfg.min_len, cfg.nbest
            )
        for i, h in zip(idx, hyps, strict=True):
            results[i] = h
        if on_batch is not None:
            on_batch(len(idx))
    model.train(was_training)
    return results
