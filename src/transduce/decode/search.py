"""Greedy and beam search as functions over batched tensors (no I/O).

Length penalty of Wu et al. (2016): score = log P(Y | X) / lp(Y), lp(Y) = ((5 + |Y|) / 6)^alpha,
where |Y| counts the generated tokens including the final EOS. A hypothesis that reaches
the length limit a * |X| + b without EOS is finished as it is. PAD and BOS are never generated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..data.vocab import BOS, EOS, PAD
from ..model.transformer import EncoderDecoder


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # log P / lp
    log_prob: float


def length_penalty(length: int, alpha: float) -> float:
    return ((5.0 + length) / 6.0) ** alpha


def length_limits(src: Tensor, a: float, b: int) -> list[int]:
    """Max output length per sentence: a * |source| + b, at least 1 (|source| excludes EOS/pad)."""
    lengths = src.ne(PAD).sum(1) - 1
    return [max(1, int(a * n + b)) for n in lengths.tolist()]


def _step_log_probs(model: EncoderDecoder, tokens: Tensor, memory, cache, step: int, min_len: int) -> Tensor:
    logits = model.decode(tokens, memory, cache)[:, -1].float()
    logp = logits.log_softmax(-1)
    logp[:, PAD] = -math.inf
    logp[:, BOS] = -math.inf
    if step < min_len:
        logp[:, EOS] = -math.inf
    return logp


@torch.no_grad()
def greedy(
    model: EncoderDecoder,
    src: Tensor,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    min_len: int = 0,
    source: dict[str, Tensor] | None = None,
) -> list[Hypothesis]:
    """Most probable next token at every step, for a batch of sources (batch, m).

    source: extra encoder inputs (factors, syntax), as `annotation_tensors` makes them."""
    limits = length_limits(src, max_len_a, max_len_b)
    memory = model.encode(src, **(source or {}))
    cache = model.new_cache()
    batch = src.shape[0]
    active = torch.arange(batch)
    tokens = torch.full((batch, 1), BOS, dtype=torch.long, device=src.device)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    log_probs = [0.0] * batch
    results: list[Hypothesis | None] = [None] * batch
    for step in range(max(limits)):
        logp = _step_log_probs(model, tokens, memory, cache, step, min_len)
        best, next_tokens = logp.max(-1)
        keep = []
        for row, (sent, tok, lp) in enumerate(
            zip(active.tolist(), next_tokens.tolist(), best.tolist(), strict=True)
        ):
            log_probs[sent] += lp
            if tok != EOS:
                outputs[sent].append(tok)
            if tok == EOS or step + 1 >= limits[sent]:
                results[sent] = Hypothesis(outputs[sent], log_probs[sent], log_probs[sent])
            else:
                keep.append(row)
        if not keep:
            break
        if len(keep) < len(active):
            index = torch.tensor(keep, device=src.device)
            active, memory = active[index], memory.select(index)
            cache.reorder(index, index)
            next_tokens = next_tokens[index]
        tokens = next_tokens[:, None]
    return [r for r in results if r is not None]


@torch.no_grad()
def beam_search(
    model: EncoderDecoder,
    src: Tensor,
    beam: int = 4,
    alpha: float = 0.6,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    min_len: int = 0,
    nbest: int = 1,
    source: dict[str, Tensor] | None = None,
) -> list[list[Hypothesis]]:
    """Batched beam search with the length penalty; returns the n best per sentence.

    A sentence stops once it holds `nbest` finished hypotheses and no live beam can beat the
    worst of them even at the length limit (its log-probability can only fall). Finished
    sentences leave the batch. The encoder output and cross-attention K/V keep one row per
    source, read by its k beams together (`group_queries`), so beam reordering touches
    only the self-attention cache.
    """
    batch, k = src.shape[0], beam
    limits = length_limits(src, max_len_a, max_len_b)
    memory = model.encode(src, **(source or {}))
    cache = model.new_cache()
    scores = torch.full((batch, k), -math.inf, device=src.device)
    scores[:, 0] = 0.0
    history = torch.full((batch * k, 1), BOS, dtype=torch.long, device=src.device)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    active = list(range(batch))
    for step in range(max(limits)):
        logp = _step_log_probs(model, history[:, -1:], memory, cache, step, min_len)
        vocab = logp.shape[-1]
        candidates = (scores.view(-1, 1) + logp).view(len(active), k * vocab)
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=-1)
        top_beam, top_token = top_index // vocab, top_index % vocab
        new_rows, new_tokens, new_scores, still_active = [], [], [], []
        for pos, sent in enumerate(active):
            length = step + 1
            at_limit = length >= limits[sent]
            chosen: list[tuple[int, int, float]] = []
            for rank, (s, b, tok) in enumerate(
                zip(top_scores[pos].tolist(), top_beam[pos].tolist(), top_token[pos].tolist(), strict=True)
            ):
                if s == -math.inf:
                    break
                if tok == EOS or at_limit:
                    if rank < k:
                        prefix = history[pos * k + b, 1:].tolist() + ([] if tok == EOS else [tok])
                        finished[sent].append(Hypothesis(prefix, s / length_penalty(length, alpha), s))
                    if at_limit:
                        continue
                elif len(chosen) < k:
                    chosen.append((b, tok, s))
                if len(chosen) == k and rank + 1 >= k:
                    break
            if _sentence_done(finished[sent], chosen, nbest, limits[sent], alpha) or at_limit or not chosen:
                continue
            while len(chosen) < k:
                chosen.append((chosen[0][0], chosen[0][1], -math.inf))
            still_active.append(sent)
            for b, tok, s in chosen:
                new_rows.append(pos * k + b)
                new_tokens.append(tok)
                new_scores.append(s)
        if not still_active:
            break
        index = torch.tensor(new_rows, device=src.device)
        if len(still_active) != len(active):
            kept = set(still_active)
            sources = torch.tensor(
                [pos for pos, sent in enumerate(active) if sent in kept], device=src.device
            )
            memory = memory.select(sources)
            cache.reorder(index, sources)
        else:
            cache.reorder(index)
        history = torch.cat(
            [history.index_select(0, index), torch.tensor(new_tokens, device=src.device)[:, None]], 1
        )
        scores = torch.tensor(new_scores, device=src.device).view(len(still_active), k)
        active = still_active
    return [sorted(f, key=lambda h: -h.score)[:nbest] for f in finished]


def _sentence_done(
    done: list[Hypothesis], live: list[tuple[int, int, float]], nbest: int, limit: int, alpha: float
) -> bool:
    """True when `nbest` hypotheses are finished and no live beam can still beat them."""
    if len(done) < nbest:
        return False
    worst_kept = sorted(h.score for h in done)[-nbest]
    best_live = max((s for _, _, s in live), default=-math.inf)
    return best_live / length_penalty(limit, alpha) <= worst_kept
