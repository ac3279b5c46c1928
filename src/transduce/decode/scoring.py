"""Scoring (forced decoding): how probable the model finds given outputs.

Rescoring n-best lists, filtering parallel data, comparing systems on a reference, and checking
that search found what the model prefers all need log P(target | source) for a given pair.
The target is fed teacher-forced in one decoder pass ([BOS] + target in, target + [EOS] out);
the log-probability of each token is the plain log-softmax, the same number search adds up
(search's exclusions of PAD, BOS, and of EOS before min_len, do not renormalise), so a beam
hypothesis that ended in EOS scores here exactly its search log-probability.

A language model reads the source as its prompt and scores the whole sequence, prompt, target
and EOS, as search does; a classifier scores the target's labels (one per sequence or one per
source token, no EOS).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from ..data.batching import annotation_tensors, encode_sources, encode_targets, make_batches
from ..data.source import SourceAnnotation
from ..data.vocab import BOS, EOS, FIRST_SYMBOL, PAD
from .classify import label_log_probs
from .ensemble import target_vocab_size
from .kinds import decoding_of
from .search import Seq2Seq


@dataclass
class Score:
    """log P(target + EOS | source); a language model's covers its prompt too, a classifier's is
    that of the labels alone."""

    log_prob: float
    mean: float  # log_prob per scored token
    tokens: list[float] | None = None  # each token's log-probability, EOS last (when asked for)
    count: int = 0  # tokens scored
    ids: list[int] | None = None  # the tokens scored, as `tokens` lists them (when asked for)


def check_target(target: Sequence[int], where: str) -> list[int]:
    ids = [int(t) for t in target]
    for t in ids:
        if t in (PAD, BOS, EOS) or t < 0:
            raise ValueError(f"{where}: target token id {t} is PAD, BOS, EOS or negative")
    return ids


@torch.no_grad()
def score(
    model: Seq2Seq,
    src: Tensor,
    targets: Sequence[Sequence[int]],
    source: dict[str, Tensor] | None = None,
    per_token: bool = False,
    numbers: Sequence[int] | None = None,
) -> list[Score]:
    """Score each target (token ids without BOS/EOS) given its row of the source batch (batch, m).

    source: extra encoder inputs (factors, syntax), as `annotation_tensors` makes them.
    numbers: what messages call each row's target (default 1, 2, ...)."""
    if len(targets) != src.shape[0]:
        raise ValueError(f"{len(targets)} targets for {src.shape[0]} sources")
    if not targets:
        return []
    names = [f"target {n}" for n in (numbers or range(1, len(targets) + 1))]
    checked = [check_target(t, name) for t, name in zip(targets, names, strict=True)]
    decoding = decoding_of(model)
    if decoding.labels:
        return _score_labels(model, src, checked, per_token, names)
    if decoding.prompted:  # the prompt and the target, one sequence
        prompts = [row[:n] for row, n in zip(src.tolist(), (src.ne(PAD).sum(1) - 1).tolist(), strict=True)]
        checked = [[*p, *t] for p, t in zip(prompts, checked, strict=True)]
    gold = [[*t, EOS] for t in checked]
    top, vocab = max(max(g) for g in gold), target_vocab_size(model)
    if vocab is not None and top >= vocab:
        raise ValueError(f"target token id {top} is outside the target vocabulary ({vocab} entries)")
    tgt_in, tgt_out = (t.to(src.device) for t in encode_targets(checked))
    logits = model.decode(tgt_in, model.encode(src, **(source or {})))  # causal: padding after is unseen
    logp = logits.float().log_softmax(-1).gather(2, tgt_out[:, :, None])[:, :, 0]  # (batch, width)
    logp = logp.masked_fill(tgt_out.eq(PAD), 0.0).double().cpu()
    out = []
    for row, g in enumerate(gold):
        values = logp[row, : len(g)]
        total = float(values.sum())
        listed = (values.tolist(), g) if per_token else (None, None)
        out.append(Score(total, total / len(g), listed[0], len(g), listed[1]))
    return out


def _score_labels(
    model: nn.Module, src: Tensor, targets: list[list[int]], per_token: bool, names: list[str]
) -> list[Score]:
    """A classifier's log-probabilities of the given labels (label vocabulary ids)."""
    out = []
    for name, log_probs, labels in zip(names, label_log_probs(model, src), targets, strict=True):
        positions, classes = log_probs.shape
        if len(labels) != positions:
            raise ValueError(f"{name}: {len(labels)} labels where the classifier gives {positions}")
        if any(not FIRST_SYMBOL <= t < FIRST_SYMBOL + classes for t in labels):
            raise ValueError(f"{name}: not one of the classifier's {classes} labels")
        index = torch.tensor(labels, device=log_probs.device)[:, None] - FIRST_SYMBOL
        values = log_probs.gather(1, index)[:, 0].double().cpu()
        total = float(values.sum())
        listed = (values.tolist(), labels) if per_token else (None, None)
        out.append(Score(total, total / max(len(labels), 1), listed[0], len(labels), listed[1]))
    return out


def score_all(
    model: nn.Module,
    sources: list[list[int]],
    targets: list[list[int]],
    max_tokens: int = 4096,
    per_token: bool = False,
    device: torch.device | None = None,
    annotations: list[SourceAnnotation] | None = None,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[Score]:
    """Scores of many (source, target) pairs in input order, batched by length under a budget of
    `max_tokens` source plus target tokens (padding included; a longer pair is scored alone).
    An empty source is read as EOS alone. `model`: a model of any kind, or an Ensemble.
    on_batch(pairs, target tokens) is called after each batch, for progress displays."""
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources for {len(targets)} targets")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, not {max_tokens}")
    targets = [check_target(t, f"pair {n}") for n, t in enumerate(targets, 1)]
    device = device or next(model.parameters()).device
    lengths = np.asarray([len(s) + len(t) + 2 for s, t in zip(sources, targets, strict=True)])
    results: list[Score] = [Score(0.0, 0.0)] * len(sources)
    was_training = model.training
    model.eval()
    try:
        for group in make_batches(lengths, max_tokens, seed=None, drop_long=False)[0]:
            src = encode_sources([sources[i] for i in group]).to(device)
            extra: dict[str, Tensor] = {}
            if annotations is not None:
                extra = annotation_tensors([annotations[i] for i in group], src.shape[1])
                extra = {k: v.to(device) for k, v in extra.items()}
            scores = score(model, src, [targets[i] for i in group], extra, per_token, [i + 1 for i in group])
            for i, s in zip(group, scores, strict=True):
                results[i] = s
            if on_batch is not None:
                on_batch(len(group), sum(len(targets[i]) for i in group))
    finally:
        model.train(was_training)
    return results
