"""Search against brute force, greedy, an uncached reference, and one-by-one decoding."""

import itertools
import math

import pytest
import torch
from tiny_models import tiny_model as shared_tiny_model

from transduce.data.vocab import EOS, UNK
from transduce.decode.beam import beam_search
from transduce.decode.search import greedy, length_penalty


def tiny_model(vocab=6, seed=0, norm="post", transition="ffn"):
    return shared_tiny_model(vocab, seed, overrides=[f"model.norm={norm}", f"model.transition={transition}"])


def sequence_log_prob(model, src, seq):
    from transduce.data.vocab import BOS

    tgt_in = torch.tensor([[BOS, *seq[:-1]]] if seq else [[BOS]], device=src.device)
    logp = model(src, tgt_in).logits[0].float().log_softmax(-1)
    return float(sum(logp[i, t] for i, t in enumerate(seq)))


def brute_force_best(model, src, limit, alpha):
    """Every output the search may produce: w + EOS for |w| < limit, or w of length limit."""
    tokens = [UNK, 4, 5]
    best = (-math.inf, None)
    for n in range(limit + 1):
        for w in itertools.product(tokens, repeat=n):
            seq = [*w, EOS] if n < limit else list(w)
            if not seq:
                continue
            score = sequence_log_prob(model, src, seq) / length_penalty(len(seq), alpha)
            best = max(best, (score, list(w)))
    return best


def test_exhaustive_beam_finds_brute_force_optimum():
    for seed in range(4):
        model = tiny_model(seed=seed)
        src = torch.tensor([[4, 5, 4, EOS]])
        for alpha in (0.0, 0.6, 1.0):
            score, tokens = brute_force_best(model, src, limit=3, alpha=alpha)
            hyp = beam_search(model, src, beam=40, alpha=alpha, max_len_a=0.0, max_len_b=3)[0][0]
            assert hyp.tokens == tokens, (seed, alpha)
            assert math.isclose(hyp.score, score, abs_tol=1e-4)


def test_beam_one_equals_greedy():
    for seed in range(3):
        model = tiny_model(vocab=12, seed=seed)
        src = torch.tensor([[4, 7, 9, 5, EOS], [8, 6, EOS, 0, 0]])
        greedy_out = greedy(model, src, max_len_a=1.0, max_len_b=5)
        beam_out = beam_search(model, src, beam=1, alpha=0.0, max_len_a=1.0, max_len_b=5)
        assert [g.tokens for g in greedy_out] == [b[0].tokens for b in beam_out]
        for g, b in zip(greedy_out, beam_out, strict=True):
            assert math.isclose(g.log_prob, b[0].log_prob, abs_tol=1e-4)


class Uncached:
    """Reference decoder: recomputes the whole prefix every step instead of using the cache."""

    def __init__(self, model):
        self.model = model

    def encode(self, src):
        return self.model.encode(src)

    def new_cache(self):
        return _History()

    def decode(self, tokens, memory, cache):
        cache.tokens = tokens if cache.tokens is None else torch.cat([cache.tokens, tokens], 1)
        return self.model.decode(cache.tokens, memory)[:, -1:]


class _History:
    tokens = None

    def reorder(self, index, sources=None):
        self.tokens = self.tokens.index_select(0, index)


@pytest.mark.parametrize("transition", ["ffn", "conv"])
def test_cached_and_uncached_search_agree(transition):
    for norm in ("post", "pre"):
        model = tiny_model(vocab=15, seed=3, norm=norm, transition=transition)
        src = torch.tensor([[4, 7, 9, 5, 11, EOS], [8, 6, EOS, 0, 0, 0], [12, 13, 14, EOS, 0, 0]])
        for beam in (1, 3):
            cached = beam_search(model, src, beam=beam, nbest=beam, max_len_b=6)
            reference = beam_search(Uncached(model), src, beam=beam, nbest=beam, max_len_b=6)
            assert [[h.tokens for h in n] for n in cached] == [[h.tokens for h in n] for n in reference]
        assert [h.tokens for h in greedy(model, src)] == [h.tokens for h in greedy(Uncached(model), src)]


def test_batch_decoding_equals_one_by_one():
    model = tiny_model(vocab=15, seed=5)
    rows = [[4, 7, 9, 5, 11], [8, 6], [12, 13, 14], [5]]
    width = max(len(r) for r in rows) + 1
    batch = torch.tensor([[*r, EOS] + [0] * (width - len(r) - 1) for r in rows])
    together = beam_search(model, batch, beam=4, nbest=2, max_len_b=7)
    for i, r in enumerate(rows):
        alone = beam_search(model, torch.tensor([[*r, EOS]]), beam=4, nbest=2, max_len_b=7)[0]
        assert [h.tokens for h in together[i]] == [h.tokens for h in alone]
        for a, b in zip(together[i], alone, strict=True):
            assert math.isclose(a.score, b.score, abs_tol=1e-4)
    greedy_together = greedy(model, batch, max_len_b=7)
    for i, r in enumerate(rows):
        assert greedy_together[i].tokens == greedy(model, torch.tensor([[*r, EOS]]), max_len_b=7)[0].tokens


def test_nbest_sorted_and_min_length_respected():
    model = tiny_model(vocab=15, seed=2)
    src = torch.tensor([[4, 7, 9, EOS]])
    nbest = beam_search(model, src, beam=5, nbest=5, max_len_b=6)[0]
    scores = [h.score for h in nbest]
    assert scores == sorted(scores, reverse=True) and len(nbest) == 5
    longer = beam_search(model, src, beam=3, min_len=4, max_len_b=8)[0][0]
    assert len(longer.tokens) >= 4  # EOS blocked for the first 4 steps
