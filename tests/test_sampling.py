"""Sampling: seeded reproducibility, top-k 1 = greedy, frequencies against the model's softmax
(a chi-square test), and the nucleus against brute force."""

import itertools
import math

import pytest
import torch
from tiny_models import batch, next_log_probs, sequence_log_probs, tiny_model

from transduce.data.vocab import BOS, EOS, PAD
from transduce.decode.sampling import draw, sample, sampling_probs
from transduce.decode.search import greedy

pytestmark = pytest.mark.usefixtures("single_thread")

ROWS = [[4, 7, 9, 5], [8, 6], [11, 10, 4]]

# Upper 0.1% points of the chi-square distribution with 1..7 degrees of freedom (any table).
CHI2_999 = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515, 6: 22.458, 7: 24.322}


def test_top_k_one_is_greedy():
    for seed in range(3):
        model = tiny_model(vocab=12, seed=seed)
        src = batch(ROWS)
        best = greedy(model, src, max_len_b=8)
        for temperature in (0.5, 1.0, 3.0):
            samples = sample(model, src, temperature, top_k=1, num_samples=2, max_len_b=8, seeds=[1, 2, 3])
            for g, drawn in zip(best, samples, strict=True):
                for h in drawn:
                    assert h.tokens == g.tokens
                    assert math.isclose(h.log_prob, g.log_prob, abs_tol=1e-5)


def tokens_of(samples):
    return [[h.tokens for h in per_source] for per_source in samples]


def test_same_seed_same_samples_other_seed_other_samples():
    model = tiny_model(vocab=12, seed=4, sharpen=1.0)
    src = batch(ROWS)
    first = sample(model, src, 1.2, num_samples=4, seeds=[7, 8, 9])
    assert tokens_of(sample(model, src, 1.2, num_samples=4, seeds=[7, 8, 9])) == tokens_of(first)
    other = sample(model, src, 1.2, num_samples=4, seeds=[10, 11, 12])
    assert all(a != b for a, b in zip(tokens_of(first), tokens_of(other), strict=True))
    assert len({tuple(t) for t in tokens_of(first)[0]}) > 1  # the samples of one source differ
    torch.manual_seed(5)
    unseeded = sample(model, src, num_samples=2)  # seeds from torch's global RNG
    torch.manual_seed(5)
    assert tokens_of(sample(model, src, num_samples=2)) == tokens_of(unseeded)


def test_samples_do_not_depend_on_the_rest_of_the_batch():
    model = tiny_model(vocab=12, seed=2, sharpen=1.0)
    seeds = [3, 1, 4]
    together = sample(model, batch(ROWS), 0.8, top_p=0.9, num_samples=3, seeds=seeds)
    for row, seed, drawn in zip(ROWS, seeds, together, strict=True):
        alone = sample(model, batch([row]), 0.8, top_p=0.9, num_samples=3, seeds=[seed])[0]
        assert [h.tokens for h in alone] == [h.tokens for h in drawn]


def test_a_sample_scores_its_log_probability_under_the_model():
    """Temperature and cuts shape the draw, not the score: log P(Y | X) of the model itself."""
    model = tiny_model(vocab=12, seed=3)
    drawn = sample(model, batch(ROWS), 2.0, top_k=5, top_p=0.9, num_samples=2, max_len_a=0, max_len_b=10)
    for row, per_source in zip(ROWS, drawn, strict=True):
        for h in per_source:
            seq = h.tokens + [EOS] * (len(h.tokens) < 10)
            assert math.isclose(h.log_prob, sum(sequence_log_probs(model, [*row, EOS], seq)), abs_tol=1e-4)
            assert h.score == h.log_prob


def expected_first_token(logp, temperature, top_k, top_p):
    """The sampling distribution written out directly: PAD and BOS removed, then softmax(logp / T),
    the k most probable kept, then the most probable kept until their mass reaches p."""
    allowed = [t for t in range(len(logp)) if t not in (PAD, BOS)]
    weights = {t: math.exp(float(logp[t]) / temperature) for t in allowed}
    ranked = sorted(allowed, key=lambda t: -weights[t])
    if top_k:
        ranked = ranked[:top_k]
    total = sum(weights[t] for t in ranked)
    kept, mass = [], 0.0
    for t in ranked:
        if mass >= top_p:
            break
        kept.append(t)
        mass += weights[t] / total
    norm = sum(weights[t] for t in kept)
    return {t: weights[t] / norm if t in kept else 0.0 for t in allowed}


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"), [(1.0, 0, 1.0), (2.0, 0, 1.0), (0.7, 3, 1.0), (1.0, 0, 0.8)]
)
def test_first_token_frequencies_match_the_model(temperature, top_k, top_p):
    """4000 one-token samples against the distribution computed from the model's logits: the
    chi-square statistic stays below the 0.1% critical value, and tokens of probability 0 never
    appear. The same counts compared with a sharper (T/2) distribution fail, so the test has power."""
    model = tiny_model(vocab=8, seed=0, sharpen=2.0)
    row, n = [4, 5, 6, EOS], 4000
    drawn = sample(model, torch.tensor([row]), temperature, [123], top_k, top_p, n, max_len_a=0, max_len_b=1)
    counts: dict[int, int] = {}
    for h in drawn[0]:
        first = h.tokens[0] if h.tokens else EOS
        counts[first] = counts.get(first, 0) + 1
    logp = next_log_probs(model, row, [])
    for probs, should_pass in (
        (expected_first_token(logp, temperature, top_k, top_p), True),
        (expected_first_token(logp, temperature / 2, top_k, top_p), False),
    ):
        support = [t for t, p in probs.items() if p > 0]
        chi2 = sum((counts.get(t, 0) - n * probs[t]) ** 2 / (n * probs[t]) for t in support)
        if should_pass:
            assert all(n * probs[t] >= 5 for t in support)  # the chi-square approximation holds
            assert set(counts) <= set(support)
            assert chi2 < CHI2_999[len(support) - 1], (chi2, counts, probs)
        else:
            assert chi2 > CHI2_999[len(support) - 1] or not set(counts) <= set(support)


def test_nucleus_is_the_smallest_set_reaching_p():
    """On random distributions (after an optional top-k cut), the kept tokens are exactly the
    smallest set whose mass reaches p, found by trying every subset; their probabilities are
    renormalised and unchanged relative to each other."""
    gen = torch.Generator().manual_seed(0)
    vocab, checked = 7, 0
    while checked < 200:
        logp = (torch.randn(vocab, generator=gen) * 2).log_softmax(-1)
        p = float(torch.rand((), generator=gen)) * 0.99 + 0.01
        top_k = int(torch.randint(0, vocab + 1, (), generator=gen))
        base = logp.double().softmax(-1)
        pool = base.topk(top_k).indices.tolist() if top_k else list(range(vocab))
        pool_mass = float(base[pool].sum())
        mass = {
            s: float(base[list(s)].sum()) / pool_mass
            for n in range(1, len(pool) + 1)
            for s in itertools.combinations(pool, n)
        }
        if any(abs(m - p) < 1e-5 for m in mass.values()):
            continue  # too close to call in float32
        smallest = min(len(s) for s, m in mass.items() if m >= p)
        best = max((s for s, m in mass.items() if m >= p and len(s) == smallest), key=mass.get)
        probs = sampling_probs(logp[None], top_k=top_k, top_p=p)[0]
        kept = sorted(torch.nonzero(probs).flatten().tolist())
        assert kept == sorted(best), (p, top_k)
        expected = base[kept] / base[kept].sum()
        assert torch.allclose(probs[kept].double(), expected, atol=1e-6)
        checked += 1


def test_draw_takes_tokens_by_cumulative_mass_and_never_a_zero():
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.5, 0.0]] * 5)
    uniforms = torch.tensor([0.0, 0.4999, 0.5, 0.99999, 1.0])  # 1.0: the rounding guard
    assert draw(probs, uniforms).tolist() == [1, 1, 3, 3, 3]


def test_sampling_settings_are_checked():
    model = tiny_model(vocab=12, seed=0)
    src = batch(ROWS[:1])
    for settings, message in (
        ({"temperature": 0.0}, r"temperature must be > 0, not 0.0"),
        ({"temperature": float("nan")}, r"temperature must be > 0"),
        ({"top_k": -1}, r"top_k must be >= 0 \(0: off\), not -1"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\] \(1: off\), not 0.0"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"num_samples": 0}, r"num_samples must be >= 1, not 0"),
        ({"seeds": [1, 2]}, r"2 seeds for 1 sources"),
    ):
        with pytest.raises(ValueError, match=message):
            sample(model, src, **settings)
