"""Prefix-constrained greedy, beam search and sampling against brute force and free decoding."""

import itertools
import math

import pytest
import torch
from tiny_models import batch, sequence_log_probs, tiny_model

from transduce.data.vocab import EOS, UNK
from transduce.decode.beam import beam_search
from transduce.decode.sampling import sample
from transduce.decode.search import greedy, length_penalty

pytestmark = pytest.mark.usefixtures("single_thread")

ROWS = [[4, 7, 9, 5], [8, 6], [11, 10, 4]]


def test_outputs_start_with_their_prefix_and_score_it():
    model = tiny_model(vocab=12, seed=1)
    src = batch(ROWS)
    prefixes = [[9, 9], [], [UNK, 4, 6]]
    limits = {"max_len_a": 0.0, "max_len_b": 10}
    outputs = {
        "greedy": [[h] for h in greedy(model, src, prefixes=prefixes, **limits)],
        "beam": beam_search(model, src, beam=4, nbest=3, prefixes=prefixes, **limits),
        "sample": sample(model, src, num_samples=3, prefixes=prefixes, seeds=[1, 2, 3], **limits),
    }
    for name, per_source in outputs.items():
        for row, prefix, hyps in zip(ROWS, prefixes, per_source, strict=True):
            assert len(hyps) >= 1
            for h in hyps:
                assert h.tokens[: len(prefix)] == prefix, name
                ended = len(h.tokens) < 10
                expected = sequence_log_probs(model, [*row, EOS], h.tokens + [EOS] * ended)
                assert math.isclose(h.log_prob, sum(expected), abs_tol=1e-4), name  # prefix included


def test_a_prefix_of_the_free_output_changes_nothing():
    for seed in range(3):
        model = tiny_model(vocab=12, seed=seed)
        src = batch(ROWS)
        free = greedy(model, src, max_len_b=8)
        for k in range(max(len(h.tokens) for h in free) + 1):
            forced = greedy(model, src, max_len_b=8, prefixes=[h.tokens[:k] for h in free])
            assert [h.tokens for h in forced] == [h.tokens for h in free]
            for a, b in zip(forced, free, strict=True):
                assert math.isclose(a.log_prob, b.log_prob, abs_tol=1e-4)
        free_beam = beam_search(model, src, beam=4, max_len_b=8)
        for k in range(4):
            prefixes = [n[0].tokens[:k] for n in free_beam]
            forced_beam = beam_search(model, src, beam=4, max_len_b=8, prefixes=prefixes)
            assert [n[0].tokens for n in forced_beam] == [n[0].tokens for n in free_beam], (seed, k)
            for a, b in zip(forced_beam, free_beam, strict=True):
                assert math.isclose(a[0].score, b[0].score, abs_tol=1e-4)


def brute_force_best(model, row, prefix, limit, alpha):
    """Every output that starts with `prefix`: w + EOS for |w| < limit, or w of length limit."""
    best = (-math.inf, None)
    for n in range(len(prefix), limit + 1):
        for rest in itertools.product([UNK, 4, 5], repeat=n - len(prefix)):
            w = [*prefix, *rest]
            seq = [*w, EOS] if n < limit else w
            if not seq:
                continue
            score = sum(sequence_log_probs(model, row, seq)) / length_penalty(len(seq), alpha)
            best = max(best, (score, w))
    return best


def test_exhaustive_beam_with_a_prefix_finds_the_best_continuation():
    """Beam 40 keeps every candidate of vocabulary {UNK, 4, 5, EOS} up to length 3, so it must
    return the best output among those that start with the prefix."""
    for seed in range(3):
        model = tiny_model(seed=seed)
        row = [4, 5, 4, EOS]
        for prefix, alpha in (([4], 0.0), ([5], 0.6), ([UNK, 5], 1.0), ([5, 5, 4], 0.6)):
            score, tokens = brute_force_best(model, row, prefix, limit=3, alpha=alpha)
            hyp = beam_search(
                model,
                torch.tensor([row]),
                beam=40,
                alpha=alpha,
                max_len_a=0.0,
                max_len_b=3,
                prefixes=[prefix],
            )[0][0]
            assert hyp.tokens == tokens, (seed, prefix, alpha)
            assert math.isclose(hyp.score, score, abs_tol=1e-4)


def test_bad_prefixes_are_refused_in_one_line():
    model = tiny_model(vocab=12, seed=0)
    src = batch(ROWS[:1])
    cases = [
        ([[4, 4, 4]], "source 1: the forced prefix has 3 tokens, more than the maximum output length 2"),
        ([[4, EOS]], "source 1: forced prefix token id 3 is PAD, BOS, EOS or negative"),
        ([[4, 12]], "forced prefix token id 12 is outside the target vocabulary \\(12 entries\\)"),
        ([[4], [5]], "2 forced prefixes for 1 sources"),
    ]
    for prefixes, message in cases:
        for search in (greedy, beam_search, sample):
            with pytest.raises(ValueError, match=message):
                search(model, src, max_len_a=0.0, max_len_b=2, prefixes=prefixes)
