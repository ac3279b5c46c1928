"""Forced decoding against an independent per-token loop and against beam search's own scores."""

import math

import pytest
import torch
from tiny_models import batch, tiny_model, token_log_probs

from transduce.data.vocab import EOS
from transduce.decode.beam import beam_search
from transduce.decode.scoring import score, score_all
from transduce.decode.search import greedy

pytestmark = pytest.mark.usefixtures("single_thread")

ROWS = [[4, 7, 9, 5], [8, 6], [11], [5, 5, 10, 4, 6]]


def test_score_equals_an_independent_token_loop():
    model = tiny_model(vocab=12, seed=1)
    targets = [[5, 6, 7], [], [9, 9, 4, 10, 11], [1, 4]]  # 1 = UNK: scored like any token
    scores = score(model, batch(ROWS), targets, per_token=True)
    for row, target, s in zip(ROWS, targets, scores, strict=True):
        expected = token_log_probs(model, [*row, EOS], [*target, EOS])
        assert s.tokens == pytest.approx(expected, abs=1e-5)
        assert math.isclose(s.log_prob, sum(expected), abs_tol=1e-5)
        assert math.isclose(s.mean, sum(expected) / (len(target) + 1), abs_tol=1e-5)
    assert all(s.tokens is None for s in score(model, batch(ROWS), targets))


def test_best_beam_score_equals_the_score_of_its_output():
    """With alpha = 0 a hypothesis' score is its log-probability. One that stopped at the length
    limit has no EOS, so its score is the forced score without the final EOS term."""
    limit, ended = 12, 0
    for seed in range(3):
        model = tiny_model(vocab=12, seed=seed, sharpen=1.0)  # flatter: EOS comes sooner
        src = batch(ROWS)
        nbest = beam_search(model, src, beam=4, alpha=0.0, nbest=3, max_len_a=0.0, max_len_b=limit)
        outputs = [n[rank] for rank in range(3) for n in nbest] + greedy(
            model, src, max_len_a=0.0, max_len_b=limit
        )
        rows = torch.cat([src] * 4)
        for h, s in zip(
            outputs, score(model, rows, [h.tokens for h in outputs], per_token=True), strict=True
        ):
            assert math.isclose(h.score, h.log_prob)
            with_eos = len(h.tokens) < limit
            ended += with_eos
            expected = s.log_prob if with_eos else sum(s.tokens[:-1])
            assert math.isclose(h.log_prob, expected, abs_tol=1e-4), seed
    assert ended >= 10  # most outputs end with EOS: the full score() is what is compared


def test_score_all_batches_and_keeps_input_order():
    model = tiny_model(vocab=12, seed=2)
    sources = [[4, 7, 9, 5], [], [8, 6], [11] * 9, [5]]
    targets = [[5, 6], [4], [], [7, 7, 7], [9, 10, 11, 4]]
    together = score_all(model, sources, targets, max_tokens=12, per_token=True)  # several batches
    for src, tgt, s in zip(sources, targets, together, strict=True):
        alone = score(model, torch.tensor([[*src, EOS]]), [tgt], per_token=True)[0]  # empty: EOS alone
        assert s.tokens == pytest.approx(alone.tokens, abs=1e-5)
        assert math.isclose(s.log_prob, alone.log_prob, abs_tol=1e-5)
    assert not model.training


def test_score_refuses_bad_targets():
    model = tiny_model(vocab=12, seed=0)
    src = batch(ROWS[:1])
    with pytest.raises(ValueError, match="target 1: target token id 3 is PAD, BOS, EOS"):
        score(model, src, [[4, EOS]])
    with pytest.raises(ValueError, match="token id 12 is outside the target vocabulary \\(12 entries\\)"):
        score(model, src, [[4, 12]])
    with pytest.raises(ValueError, match="2 targets for 1 sources"):
        score(model, src, [[4], [5]])
    with pytest.raises(ValueError, match="2 sources for 1 targets"):
        score_all(model, [[4], [5]], [[4]])
