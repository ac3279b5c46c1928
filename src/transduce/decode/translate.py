"""Decode many sources: sort by length, batch under a token budget, restore input order."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..config import DecodeConfig
from ..data.batching import encode_sources
from ..model.transformer import EncoderDecoder
from .search import Hypothesis, beam_search, greedy


def length_batches(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Indices grouped by similar length, each group's padded size within max_tokens."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and max(lengths[i], lengths[current[-1]]) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


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
    for group in length_batches(lengths, cfg.max_tokens):
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
