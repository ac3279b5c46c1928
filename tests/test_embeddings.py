"""Sinusoidal encodings against the formula, beyond training lengths, and the rotation property."""

import math

import torch

from transduce.model.embeddings import Embedding, LearnedPositions, SinusoidalPositions, sinusoid


def test_sinusoid_matches_formula_including_far_positions():
    d = 64
    pe = SinusoidalPositions(d, initial=16)
    table = pe(6000)  # far beyond the initial 16 and any training length
    for pos in (0, 1, 7, 511, 5999):
        for i in (0, 1, 5, 31):
            angle = pos / 10000 ** (2 * i / d)
            assert math.isclose(table[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-5)
            assert math.isclose(table[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-5)


def test_halves_layout_puts_sines_first():
    inter = sinusoid(torch.arange(10), 8, "interleaved")
    halves = sinusoid(torch.arange(10), 8, "halves")
    assert torch.equal(halves[:, :4], inter[:, 0::2])
    assert torch.equal(halves[:, 4:], inter[:, 1::2])


def test_pe_pos_plus_k_is_linear_in_pe_pos():
    d, k = 32, 5
    table = sinusoid(torch.arange(300), d)
    # Block-diagonal rotation built from the formula alone, independent of the table.
    rot = torch.zeros(d, d)
    for i in range(d // 2):
        w = 1 / 10000 ** (2 * i / d)
        c, s = math.cos(k * w), math.sin(k * w)
        rot[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, -s], [s, c]])
    for pos in (0, 3, 100, 250, 290):
        assert torch.allclose(table[pos] @ rot, table[pos + k], atol=1e-5)


def test_embedding_scales_tokens_and_adds_positions():
    emb = Embedding(20, 8, pad_id=0, dropout=0.0).eval()
    ids = torch.tensor([[3, 4, 0]])
    out = emb(ids, offset=2)
    expected = emb.tokens.weight[ids[0]] * math.sqrt(8) + sinusoid(torch.arange(2, 5), 8)
    assert torch.allclose(out[0], expected, atol=1e-6)


def test_learned_positions_reject_overlong_input_clearly():
    pos = LearnedPositions(8, 4)
    try:
        pos(5)
    except ValueError as exc:
        assert "max_positions=4" in str(exc)
    else:
        raise AssertionError("expected a ValueError")
