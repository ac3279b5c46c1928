"""Batched beam search with the length penalty, every sentence's bookkeeping done as tensors.

Each step chooses, for all live sentences at once, the next beams, the hypotheses that finish and
whether the sentence is done; a sentence's results are kept on the device the step it is done. A
loop over sentences with three read-backs each was 90% of beam 4 on 1,024 sentences on an H100
(bench/records/gpu/h100-2026-11-27): on a GPU every read-back waits for the device, and the host
queues nothing meanwhile. So which sentences are done is read back only every few steps on a GPU
(`read_back_every`), where done sentences leave the batch; until then they are decoded on and
their results are not touched.

Scores follow search.py: score = log P / lp(|Y|), |Y| counting the final EOS; a hypothesis that
reaches its length limit finishes as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Unpack

import torch
import torch.nn.functional as F
from torch import Tensor

from ..data.vocab import BOS, EOS, PAD
from .search import (
    Hypothesis,
    SearchOptions,
    Seq2Seq,
    _check_prefix_vocab,
    _forced,
    _step_log_probs,
    length_penalty,
    read_back_every,
    read_due,
    start,
)


@dataclass
class Finished:
    """Each sentence's best `n` finished hypotheses, best first; among equal scores the one that
    finished first (as a stable sort of all of them would order them). Scores -inf where empty."""

    scores: Tensor  # (sentences, n) float64: log P / lp
    log_probs: Tensor  # (sentences, n)
    lengths: Tensor  # (sentences, n) output tokens, EOS excluded
    tokens: Tensor  # (sentences, n, longest output) PAD after `lengths`

    @classmethod
    def empty(cls, sentences: int, n: int, longest: int, device: torch.device) -> Finished:
        return cls(
            torch.full((sentences, n), -math.inf, dtype=torch.float64, device=device),
            torch.zeros(sentences, n, device=device),
            torch.zeros(sentences, n, dtype=torch.long, device=device),
            torch.full((sentences, n, longest), PAD, dtype=torch.long, device=device),
        )

    def add(self, scores: Tensor, log_probs: Tensor, lengths: Tensor, tokens: Tensor) -> Finished:
        """These (sentences, k) candidates (-inf scores: not finished) merged in, the best n kept."""
        n = self.scores.shape[1]
        tokens = F.pad(tokens, (0, self.tokens.shape[2] - tokens.shape[2]), value=PAD)
        merged = torch.cat([self.scores, scores], 1)
        keep = merged.sort(dim=1, descending=True, stable=True).indices[:, :n]
        return Finished(
            merged.gather(1, keep),
            torch.cat([self.log_probs, log_probs], 1).gather(1, keep),
            torch.cat([self.lengths, lengths], 1).gather(1, keep),
            torch.cat([self.tokens, tokens], 1).gather(1, keep[..., None].expand(-1, -1, tokens.shape[2])),
        )

    def where(self, rows: Tensor, other: Finished) -> Finished:
        """`other`'s sentences where `rows` (sentences,) is true, these elsewhere."""
        return Finished(
            *(
                torch.where(rows.view(-1, *[1] * (mine.dim() - 1)), theirs, mine)
                for mine, theirs in zip(self._parts(), other._parts(), strict=True)
            )
        )

    def _parts(self) -> tuple[Tensor, ...]:
        return self.scores, self.log_probs, self.lengths, self.tokens

    def select(self, index: Tensor) -> Finished:
        return Finished(*(t.index_select(0, index) for t in self._parts()))

    def store(self, into: Finished, sentences: Tensor, rows: Tensor) -> None:
        """Copy these `rows` into `into` at `sentences` (the search's results, by sentence)."""
        for mine, theirs in zip(self._parts(), into._parts(), strict=True):
            theirs.index_copy_(0, sentences, mine.index_select(0, rows))

    def hypotheses(self) -> list[list[Hypothesis]]:
        scores, log_probs, lengths = self.scores.tolist(), self.log_probs.tolist(), self.lengths.tolist()
        tokens = self.tokens.tolist()
        return [
            [
                Hypothesis(t[:n], s, lp)
                for s, lp, n, t in zip(scores[i], log_probs[i], lengths[i], tokens[i], strict=True)
                if s > -math.inf
            ]
            for i in range(len(scores))
        ]


@dataclass
class Step:
    """One step's choice for every live sentence (sentences, k): the beams that go on (their
    rows' beam numbers, new tokens and scores; -inf pads a sentence with fewer than k) and
    whether the sentence is done."""

    beams: Tensor
    tokens: Tensor
    scores: Tensor
    done: Tensor  # (sentences,) bool


def choose(
    candidates: Tensor,
    vocab: int,
    k: int,
    *,
    history: Tensor,
    step: int,
    limits: Tensor,
    alpha: float,
    finished: Finished,
) -> tuple[Step, Finished]:
    """From each sentence's k x vocab candidate scores: its best 2k; the first k of those that end
    (EOS, or any at the length limit) finish; the first k of the others go on. The sentence is
    done at its limit, with nothing left to extend, or once it holds n finished hypotheses and no
    live beam can beat the n-th even at the limit (a log-probability only falls)."""
    sentences = candidates.shape[0]
    top_scores, top_index = candidates.topk(min(2 * k, candidates.shape[1]), dim=-1)
    top_beams, top_tokens = top_index // vocab, top_index % vocab
    width = top_scores.shape[1]
    rank = torch.arange(width, device=candidates.device)
    at_limit = limits.le(step + 1)
    valid = top_scores.gt(-math.inf)
    ends = top_tokens.eq(EOS) | at_limit[:, None]

    first = top_tokens[:, :k]
    ending = (ends & valid)[:, :k]
    rows = torch.arange(sentences, device=candidates.device)[:, None] * k + top_beams[:, :k]
    before = history.index_select(0, rows.flatten()).view(sentences, -1, history.shape[1])[:, :, 1:]
    tokens = torch.cat([before, first.masked_fill(first.eq(EOS), PAD)[..., None]], 2)
    lengths = first.ne(EOS).long() + step
    normalised = top_scores[:, :k].double() / length_penalty(step + 1, alpha)
    finished = finished.add(
        normalised.masked_fill(~ending, -math.inf), top_scores[:, :k], lengths.masked_fill(~ending, 0), tokens
    )

    live = valid & ~ends
    picked = torch.where(live, rank, rank + width).topk(k, dim=1, largest=False).indices
    picked_live = live.gather(1, picked)
    beams, new_tokens = top_beams.gather(1, picked), top_tokens.gather(1, picked)
    scores = top_scores.gather(1, picked).masked_fill(~picked_live, -math.inf)
    beams = torch.where(picked_live, beams, beams[:, :1])
    new_tokens = torch.where(picked_live, new_tokens, new_tokens[:, :1])
    worst_kept = finished.scores[:, -1]
    beaten = scores[:, 0].double() / length_penalty(limits.double(), alpha) <= worst_kept
    done = at_limit | ~picked_live[:, 0] | (worst_kept.gt(-math.inf) & beaten)
    return Step(beams, new_tokens, scores, done), finished


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    src: Tensor,
    beam: int = 4,
    alpha: float = 0.6,
    nbest: int = 1,
    read_every: int | None = None,
    **options: Unpack[SearchOptions],
) -> list[list[Hypothesis]]:
    """Batched beam search with the length penalty; returns the n best per sentence.

    Finished sentences leave the batch when the host reads which are done, every `read_every`
    steps (default `read_back_every(device)`); the same results, up to the rounding of a batch
    that holds other rows. The encoder output and cross-attention K/V keep one row per source,
    read by its k beams together (`group_queries`), so beam reordering touches only the
    self-attention cache. A forced prefix leaves one live beam per source until it ends (every
    other candidate has probability 0), then search branches out from it.
    """
    batch, k, device = src.shape[0], beam, src.device
    begun = start(model, src, options)
    memory, prefixes = begun.memory, begun.prefixes
    longest_prefix = max(len(p) for p in prefixes)
    longest = max(begun.limits)
    cache = model.new_cache()
    limits = torch.tensor(begun.limits, device=device)
    active = list(range(batch))  # each live row's sentence
    scores = torch.full((batch, k), -math.inf, device=device)
    scores[:, 0] = 0.0
    history = torch.full((batch * k, 1), BOS, dtype=torch.long, device=device)
    finished = Finished.empty(batch, nbest, longest, device)
    kept_results = Finished.empty(batch, nbest, longest, device)  # each live row's, once it is done
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    results = Finished.empty(batch, nbest, longest, device)  # by sentence
    every = read_every or read_back_every(device)
    for step in range(longest):
        forced = None
        if step < longest_prefix:
            forced = _forced(prefixes, [s for s in active for _ in range(k)], step, device)
        logp = _step_log_probs(
            model, history[:, -1:], memory, cache, step=step, min_len=begun.min_len, forced=forced
        )
        vocab = logp.shape[-1]
        if step == 0:
            _check_prefix_vocab(prefixes, vocab)
        candidates = (scores.view(-1, 1) + logp).view(len(active), k * vocab)
        chosen, finished = choose(
            candidates, vocab, k, history=history, step=step, limits=limits, alpha=alpha, finished=finished
        )
        kept_results = kept_results.where(chosen.done & ~done, finished)
        done = done | chosen.done
        beams, tokens, scores, kept = chosen.beams, chosen.tokens, chosen.scores, None
        positions = torch.arange(len(active), device=device)
        if read_due(step, every, longest):
            ended_rows = done.tolist()
            ended = [i for i, d in enumerate(ended_rows) if d]
            if ended:
                sentences = torch.tensor([active[i] for i in ended], device=device)
                kept_results.store(results, sentences, torch.tensor(ended, device=device))
            if len(ended) == len(ended_rows):
                break
            if ended:
                keep = [i for i, d in enumerate(ended_rows) if not d]
                positions = kept = torch.tensor(keep, device=device)
                active = [active[i] for i in keep]
                memory = memory.select(kept)
                finished, kept_results = finished.select(kept), kept_results.select(kept)
                limits, beams, tokens, scores, done = (
                    t.index_select(0, kept) for t in (limits, beams, tokens, scores, done)
                )
        index = (positions[:, None] * k + beams).flatten()
        cache.reorder(index, kept)
        history = torch.cat([history.index_select(0, index), tokens.reshape(-1, 1)], 1)
    return results.hypotheses()
