"""Ensembles: one member is the model, identical members are either, two different members
give the log of their mean probability, computed here by hand."""

import copy
import math
from itertools import chain

import pytest
import torch
from tiny_models import batch, next_log_probs, tiny_model

from transduce.config import DecodeConfig
from transduce.data.vocab import BOS, EOS
from transduce.decode.beam import beam_search
from transduce.decode.ensemble import Ensemble, target_vocab_size
from transduce.decode.sampling import sample
from transduce.decode.scoring import score
from transduce.decode.search import greedy
from transduce.decode.torch_engine import decode_all
from transduce.model.packed import pack_for_cpu
from transduce.model.quantize import quantize_int8

pytestmark = pytest.mark.usefixtures("single_thread")

ROWS = [[4, 7, 9, 5], [8, 6], [11, 10, 4], [5]]


def assert_same_search(a, b, src):
    for beam in (1, 4):
        left = beam_search(a, src, beam=beam, nbest=beam, max_len_b=8)
        right = beam_search(b, src, beam=beam, nbest=beam, max_len_b=8)
        assert [[h.tokens for h in n] for n in left] == [[h.tokens for h in n] for n in right]
        for x, y in zip(chain.from_iterable(left), chain.from_iterable(right), strict=True):
            assert math.isclose(x.score, y.score, abs_tol=1e-4)
            assert math.isclose(x.log_prob, y.log_prob, abs_tol=1e-4)
    left, right = greedy(a, src, max_len_b=8), greedy(b, src, max_len_b=8)
    assert [h.tokens for h in left] == [h.tokens for h in right]
    for x, y in zip(left, right, strict=True):
        assert math.isclose(x.log_prob, y.log_prob, abs_tol=1e-4)


def test_an_ensemble_of_one_is_the_model():
    for seed in range(2):
        model = tiny_model(vocab=12, seed=seed)
        assert_same_search(Ensemble([model]), model, batch(ROWS))


def test_an_ensemble_of_two_identical_models_is_either():
    model = tiny_model(vocab=12, seed=3)
    assert_same_search(Ensemble([model, copy.deepcopy(model)]), model, batch(ROWS))


def test_two_models_give_the_log_of_their_mean_probability():
    a, b = tiny_model(vocab=12, seed=5), tiny_model(vocab=12, seed=6)
    ensemble = Ensemble([a, b])
    src = batch(ROWS)
    tgt = torch.tensor([[BOS, 4, 9, 9, 5], [BOS, 6, 6, 7, 8], [BOS, 10, 1, 4, 4], [BOS, 5, 11, 7, 6]])
    with torch.no_grad():
        got = ensemble.decode(tgt, ensemble.encode(src)).double()
        pa = a.decode(tgt, a.encode(src)).double().softmax(-1)
        pb = b.decode(tgt, b.encode(src)).double().softmax(-1)
    expected = ((pa + pb) / 2).log()
    assert torch.allclose(got, expected, atol=1e-5)
    assert torch.allclose(got.logsumexp(-1), torch.zeros(got.shape[:2], dtype=got.dtype), atol=1e-5)
    assert (expected - pa.log()).abs().max() > 0.1  # the members differ, so the check is not vacuous

    # Cached step-by-step decoding gives the same numbers, one member cache each.
    memory, cache = ensemble.encode(src), ensemble.new_cache()
    with torch.no_grad():
        steps = torch.cat([ensemble.decode(tgt[:, i : i + 1], memory, cache) for i in range(tgt.shape[1])], 1)
    assert torch.allclose(steps.double(), expected, atol=1e-5)


def test_search_on_an_ensemble_scores_with_the_mean_probability():
    """Each output's log-probability is the sum of log((p_a + p_b) / 2) over its tokens, with each
    member's probabilities from its own uncached passes."""
    a, b = tiny_model(vocab=12, seed=7), tiny_model(vocab=12, seed=8)
    ensemble = Ensemble([a, b])
    src = batch(ROWS)
    outputs = [n[0] for n in beam_search(ensemble, src, beam=3, alpha=0.0, max_len_a=0.0, max_len_b=6)]
    outputs += greedy(ensemble, src, max_len_a=0.0, max_len_b=6)
    outputs += [s[0] for s in sample(ensemble, src, max_len_a=0.0, max_len_b=6, seeds=[1, 2, 3, 4])]
    forced = score(ensemble, torch.cat([src] * 3), [h.tokens for h in outputs])
    for h, row, s in zip(outputs, ROWS * 3, forced, strict=True):
        seq = h.tokens + [EOS] * (len(h.tokens) < 6)
        total = 0.0
        for i, t in enumerate(seq):
            pa = math.exp(float(next_log_probs(a, [*row, EOS], seq[:i])[t]))
            pb = math.exp(float(next_log_probs(b, [*row, EOS], seq[:i])[t]))
            total += math.log((pa + pb) / 2)
        assert math.isclose(h.log_prob, total, abs_tol=1e-4)
        if len(h.tokens) < 6:
            assert math.isclose(s.log_prob, total, abs_tol=1e-4)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.ao, in quantize_int8
def test_members_must_share_the_target_vocabulary():
    with pytest.raises(ValueError, match="model 1 has 12 target entries, model 2 has 10"):
        Ensemble([tiny_model(vocab=12), tiny_model(vocab=10)])
    with pytest.raises(ValueError, match="at least one model"):
        Ensemble([])
    model = tiny_model(vocab=12)
    for decoding_copy in (pack_for_cpu(model), quantize_int8(model)):  # sizes of rewritten outputs
        assert target_vocab_size(decoding_copy) == 12
    assert target_vocab_size(Ensemble([model, pack_for_cpu(model)])) == 12


def test_decoding_an_ensemble_leaves_its_members_in_eval_mode():
    a, b = tiny_model(vocab=12, seed=1), tiny_model(vocab=12, seed=2)
    ensemble = Ensemble([a, b])
    assert not ensemble.training
    decode_all(ensemble, [[4, 5], [], [6]], DecodeConfig(beam=2, max_len_b=4))
    assert not a.training and not b.training
