"""Decode many sources: sort by length, batch under a token budget, restore input order."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from ..config import DecodeConfig
from ..data.batching import annotation_tensors, encode_sources, make_batches
from ..data.source import SourceAnnotation
from .beam import beam_search
from .classify import classify
from .kinds import Decoding, decoding_of
from .options import check_for_model
from .sampling import sample, stream_seed
from .search import (
    Hypothesis,
    SearchOptions,
    check_prefix,
    greedy,
    max_output_length,
)
from .shortlist import Shortlist, Shortlisted
from .static import StaticDecoder


def decode_all(
    model: nn.Module,
    sources: list[list[int]],
    cfg: DecodeConfig,
    use_greedy: bool = False,
    device: torch.device | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    annotations: list[SourceAnnotation] | None = None,
    prefixes: Sequence[Sequence[int]] | None = None,
    numbers: Sequence[int] | None = None,
    shortlist: Shortlist | None = None,
) -> list[list[Hypothesis]]:
    """n-best hypotheses per source (or `cfg.num_samples` samples with `cfg.sample`), in input
    order. Empty sources give no hypotheses. `model`: a model of any kind, or an Ensemble.

    A language model continues each source: the source is forced first, like a prefix, and left
    out of the hypotheses (length limits and scores count it). A classifier gives each source its
    most probable labels, one hypothesis (search and `cfg.beam`/`cfg.nbest` do not apply; nor do
    sampling and prefixes, which are refused). How each kind decodes: decode/kinds.py.

    annotations: per source, its tags and tree distances for factored or syntax-aware models.
    prefixes: per source, target token ids every output starts with (ignored for empty sources).
    on_batch(sources, output tokens) is called after each batch, for progress displays.
    Sampling seeds source i's stream with stream_seed(cfg.seed, numbers[i]), so its samples depend
    neither on the batching nor on how an input is cut into calls (`numbers`: each source's number
    in its own input, by default 0, 1, ...); without cfg.seed the base seed comes from torch's
    global RNG. A `shortlist` restricts each batch's outputs to its sources' listed tokens (one
    encoder-decoder model only)."""
    numbers = list(range(len(sources))) if numbers is None else list(numbers)
    if len(numbers) != len(sources):
        raise ValueError(f"{len(numbers)} source numbers for {len(sources)} sources")
    decoding = decoding_of(model)
    check_for_model(model, cfg, use_greedy, prefixed=prefixes is not None)
    forced_all = _forced_prefixes(decoding, sources, prefixes, cfg)
    if cfg.static_cache and shortlist is not None:
        raise ValueError(
            "static_cache decodes over the whole vocabulary; it does not combine with a shortlist"
        )
    base_seed = _sampling_seed(cfg)
    projection = shortlist.projection(model) if shortlist is not None else None
    device = device or next(model.parameters()).device
    results: list[list[Hypothesis]] = [[] for _ in sources]
    todo = [i for i, s in enumerate(sources) if s]
    if on_batch is not None and len(todo) < len(sources):
        on_batch(len(sources) - len(todo), 0)  # empty sources: done, nothing to decode
    lengths = [len(sources[i]) + 1 for i in todo]
    was_training = model.training
    model.eval()
    for group in make_batches(np.asarray(lengths), cfg.max_tokens, seed=None, drop_long=False)[0]:
        idx = [todo[g] for g in group]
        src, extra = _batch_sources(sources, annotations, idx, device)
        forced = [forced_all[i] for i in idx] if forced_all is not None else None
        searched = model
        if shortlist is not None and projection is not None:
            prefix_tokens = [t for p in forced or [] for t in p]
            searched = Shortlisted(model, shortlist.allowed(src, prefix_tokens), *projection)
        options = SearchOptions(
            max_len_a=cfg.max_len_a,
            max_len_b=cfg.max_len_b,
            min_len=cfg.min_len,
            source=extra,
            prefixes=forced,
        )
        seeds = [stream_seed(base_seed, numbers[i]) for i in idx] if base_seed is not None else []
        if cfg.static_cache:
            longest = max(max_output_length(len(sources[i]), cfg.max_len_a, cfg.max_len_b) for i in idx)
            searched = StaticDecoder(searched, capacity=longest)
        hyps = _hypotheses(decoding, searched, src, cfg, use_greedy, seeds, options)
        for i, h in zip(idx, hyps, strict=True):
            if decoding.prompted:  # the continuation only
                for hyp in h:
                    hyp.tokens = hyp.tokens[len(sources[i]) :]
            results[i] = h
        if on_batch is not None:
            drawn = [x for h in hyps for x in (h if cfg.sample else h[:1])]  # samples, or the best
            on_batch(len(idx), sum(len(x.tokens) for x in drawn))
    model.train(was_training)
    return results


def _sampling_seed(cfg: DecodeConfig) -> int | None:
    """The base seed of the sampling streams; None when searching (search must leave the global
    RNG alone, so it is drawn from only when sampling without a seed)."""
    if not cfg.sample:
        return None
    return cfg.seed if cfg.seed is not None else int(torch.randint(0, 2**62, ()).item())


def _batch_sources(
    sources: list[list[int]],
    annotations: list[SourceAnnotation] | None,
    idx: list[int],
    device: torch.device,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The padded source rows `idx` on `device`, with their annotation tensors (if any)."""
    src = encode_sources([sources[i] for i in idx]).to(device)
    if annotations is None:
        return src, {}
    extra = annotation_tensors([annotations[i] for i in idx], src.shape[1])
    return src, {k: v.to(device) for k, v in extra.items()}


def checked_prefixes(
    sources: Sequence[Sequence[int]], prefixes: Sequence[Sequence[int]], cfg: DecodeConfig
) -> list[list[int]]:
    """One prefix per source, each within its source's output length limit (ValueError naming
    the input, numbered from 1, otherwise); none for empty sources, which are not decoded."""
    if len(prefixes) != len(sources):
        raise ValueError(f"{len(prefixes)} forced prefixes for {len(sources)} inputs")
    limits = [max_output_length(len(s), cfg.max_len_a, cfg.max_len_b) for s in sources]
    return [
        check_prefix(p, limit, f"input {n}") if s else []
        for n, (p, limit, s) in enumerate(zip(prefixes, limits, sources, strict=True), 1)
    ]


def _forced_prefixes(
    decoding: Decoding, sources: list[list[int]], prefixes: Sequence[Sequence[int]] | None, cfg: DecodeConfig
) -> list[list[int]] | None:
    """Per source, the checked target ids every output starts with; a language model's prompt (its
    source) comes first. None when nothing is forced."""
    checked = checked_prefixes(sources, prefixes, cfg) if prefixes is not None else None
    if not decoding.prompted:
        return checked
    given = checked if checked is not None else [[] for _ in sources]
    return [[*s, *p] for s, p in zip(sources, given, strict=True)]


def _hypotheses(
    decoding: Decoding,
    model: nn.Module,
    src: Tensor,
    cfg: DecodeConfig,
    use_greedy: bool,
    seeds: list[int],
    options: SearchOptions,
) -> list[list[Hypothesis]]:
    """One batch's hypotheses per source: a classifier's labels, samples, or search's n best."""
    if decoding.labels:
        return [[h] for h in classify(model, src)]
    if cfg.sample:
        return sample(model, src, cfg.temperature, seeds, cfg.top_k, cfg.top_p, cfg.num_samples, **options)
    if use_greedy:
        return [[h] for h in greedy(model, src, **options)]
    return beam_search(model, src, cfg.beam, cfg.alpha, cfg.nbest, **options)
