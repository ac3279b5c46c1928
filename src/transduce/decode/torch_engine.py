"""The torch engine: our PyTorch model (any kind, or an Ensemble of checkpoints) decodes a
request: sources sorted by length, batched under a token budget, each batch searched (beam or
greedy), sampled or classified, input order restored; `score` forces given targets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from ..config import DecodeConfig
from ..data.batching import annotation_tensors, encode_sources, make_batches
from ..data.source import SourceAnnotation
from ..model.layers import Stack
from ..model.universal import UniversalStack
from .beam import beam_search
from .classify import classify
from .engine import Request
from .kinds import Decoding, decoding_of
from .options import check_for_model, check_min_len
from .sampling import sample, stream_seed
from .scoring import Score, score_all
from .search import Hypothesis, SearchOptions, check_prefix, greedy, max_output_length
from .shortlist import Shortlist, Shortlisted
from .static import StaticDecoder


@dataclass
class TorchEngine:
    """Our PyTorch model of any kind, or an Ensemble, optionally restricted to a shortlist."""

    model: nn.Module
    shortlist: Shortlist | None = None
    name: ClassVar[str] = "torch"
    seeds_each_input: ClassVar[bool] = True

    def check(self, options: DecodeConfig, prefixed: bool = False) -> None:
        check_for_model(self.model, options, prefixed)

    def decode(self, request: Request) -> list[list[Hypothesis]]:
        """A language model continues each source: the source is forced first, like a prefix, and
        left out of the hypotheses (length limits and scores count it). A classifier gives each
        source its most probable labels (search settings do not apply; sampling and prefixes are
        refused). How each kind decodes: decode/kinds.py. Sampling seeds source i's stream with
        stream_seed(seed, its number), so its samples depend neither on the batching nor on how
        an input is cut into calls; without a seed the base seed comes from torch's global RNG.
        A shortlist restricts each batch's outputs to its sources' listed tokens."""
        model, cfg = self.model, request.options
        numbers = request.source_numbers()
        decoding = decoding_of(model)
        check_for_model(model, cfg, prefixed=request.prefixes is not None)
        check_min_len(request.sources, cfg)
        forced_all = _forced_prefixes(decoding, request.sources, request.prefixes, cfg)
        if cfg.static_cache and self.shortlist is not None:
            raise ValueError(
                "static_cache decodes over the whole vocabulary; it does not combine with a shortlist"
            )
        base_seed = _sampling_seed(cfg)
        projection = self.shortlist.projection(model) if self.shortlist is not None else None
        device = next(model.parameters()).device
        results: list[list[Hypothesis]] = [[] for _ in request.sources]
        todo = [i for i, s in enumerate(request.sources) if s]
        if request.on_batch is not None and len(todo) < len(request.sources):
            request.on_batch(len(request.sources) - len(todo), 0)  # empty sources: done, nothing to decode
        lengths = np.asarray([len(request.sources[i]) + 1 for i in todo])
        was_training = model.training
        model.eval()
        for group in make_batches(lengths, cfg.max_tokens, seed=None, drop_long=False)[0]:
            idx = [todo[g] for g in group]
            src, extra = _batch_sources(request.sources, request.annotations, idx, device)
            forced = [forced_all[i] for i in idx] if forced_all is not None else None
            searched = self._searched(src, forced, [len(request.sources[i]) for i in idx], cfg, projection)
            options = SearchOptions(
                max_len_a=cfg.max_len_a,
                max_len_b=cfg.max_len_b,
                min_len=cfg.min_len,
                source=extra,
                prefixes=forced,
            )
            if decoding.labels:
                hyps = [[h] for h in classify(searched, src)]
            elif cfg.search == "sample":
                seeds = [stream_seed(base_seed, numbers[i]) for i in idx]
                hyps = sample(
                    searched,
                    src,
                    temperature=cfg.temperature,
                    seeds=seeds,
                    top_k=cfg.top_k,
                    top_p=cfg.top_p,
                    num_samples=cfg.num_samples,
                    **options,
                )
            elif cfg.search == "greedy":
                hyps = [[h] for h in greedy(searched, src, **options)]
            else:
                hyps = beam_search(searched, src, cfg.beam, cfg.alpha, cfg.nbest, **options)
            for i, h in zip(idx, hyps, strict=True):
                results[i] = _continuations(h, len(request.sources[i])) if decoding.prompted else h
            if request.on_batch is not None:
                drawn = [x for h in hyps for x in (h if cfg.sample else h[:1])]  # samples, or the best
                request.on_batch(len(idx), sum(len(x.tokens) for x in drawn))
        model.train(was_training)
        return results

    def _searched(
        self,
        src: Tensor,
        forced: list[list[int]] | None,
        lengths: list[int],
        cfg: DecodeConfig,
        projection: tuple[Tensor, Tensor | None] | None,
    ) -> nn.Module:
        """What one batch is searched with: the model, restricted to the batch's shortlisted tokens
        (`projection`: the shortlist's output matrix and bias), and with fixed-shape caches for the
        batch's longest output (cfg.static_cache)."""
        searched = self.model
        if self.shortlist is not None and projection is not None:
            prefix_tokens = [t for p in forced or [] for t in p]
            searched = Shortlisted(searched, self.shortlist.allowed(src, prefix_tokens), *projection)
        if cfg.static_cache:
            longest = max(max_output_length(n, cfg.max_len_a, cfg.max_len_b) for n in lengths)
            searched = StaticDecoder(searched, capacity=longest)
        return searched

    def score(self, request: Request) -> list[Score]:
        if request.targets is None:
            raise ValueError("a scoring request needs targets")
        return score_all(
            self.model,
            request.sources,
            request.targets,
            max_tokens=request.options.max_tokens,
            per_token=request.per_token,
            annotations=request.annotations,
            on_batch=request.on_batch,
        )

    def shortlisted(self, shortlist: Shortlist | None) -> TorchEngine:
        """ValueError if the shortlist does not fit the model (not one encoder-decoder, other
        vocabularies), before any work."""
        if shortlist is not None:
            shortlist.projection(self.model)
        return TorchEngine(self.model, shortlist)

    def between_steps(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Before every run of a layer stack: every decoding step runs the decoder stack once (an
        ensemble's once per member)."""
        stacks = [m for m in self.model.modules() if isinstance(m, Stack | UniversalStack)]
        handles = [stack.register_forward_pre_hook(lambda *_: hook()) for stack in stacks]

        def stop() -> None:
            for handle in handles:
                handle.remove()

        return stop


def decode_all(
    model: nn.Module,
    sources: Sequence[Sequence[int]],
    options: DecodeConfig,
    *,
    shortlist: Shortlist | None = None,
    **request: object,
) -> list[list[Hypothesis]]:
    """`model` (any kind, or an Ensemble) decoding `sources` by the torch engine; `request` takes
    the rest of a `Request` (prefixes, numbers, annotations, on_batch) by name."""
    return TorchEngine(model, shortlist).decode(Request(sources, options, **request))


def _continuations(hypotheses: list[Hypothesis], prompt: int) -> list[Hypothesis]:
    """A language model's hypotheses without their first `prompt` tokens (the prompt it continued)."""
    for hyp in hypotheses:
        hyp.tokens = hyp.tokens[prompt:]
    return hypotheses


def _sampling_seed(cfg: DecodeConfig) -> int | None:
    """The base seed of the sampling streams; None when searching (search must leave the global
    RNG alone, so it is drawn from only when sampling without a seed)."""
    if not cfg.sample:
        return None
    return cfg.seed if cfg.seed is not None else int(torch.randint(0, 2**62, ()).item())


def _batch_sources(
    sources: Sequence[Sequence[int]],
    annotations: Sequence[SourceAnnotation] | None,
    idx: list[int],
    device: torch.device,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The padded source rows `idx` on `device`, with their annotation tensors (if any)."""
    src = encode_sources([list(sources[i]) for i in idx]).to(device)
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
    decoding: Decoding,
    sources: Sequence[Sequence[int]],
    prefixes: Sequence[Sequence[int]] | None,
    cfg: DecodeConfig,
) -> list[list[int]] | None:
    """Per source, the checked target ids every output starts with; a language model's prompt (its
    source) comes first. None when nothing is forced."""
    checked = checked_prefixes(sources, prefixes, cfg) if prefixes is not None else None
    if not decoding.prompted:
        return checked
    given = checked if checked is not None else [[] for _ in sources]
    return [[*s, *p] for s, p in zip(sources, given, strict=True)]
