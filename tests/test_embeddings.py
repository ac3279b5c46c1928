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


def test_tensor2tensor_frequencies_span_one_to_one_ten_thousandth():
    """pos / 10000^(i / (d/2 - 1)), sines then cosines: the first frequency 1, the last 1/10000."""
    d = 12
    table = sinusoid(torch.arange(50), d, "halves", "tensor2tensor")
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (i / (d // 2 - 1))
            assert math.isclose(table[pos, i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(table[pos, d // 2 + i].item(), math.cos(angle), abs_tol=1e-6)


def test_odd_width_leaves_the_last_column_zero():
    assert sinusoid(torch.arange(5), 9, "halves", "tensor2tensor")[:, 8].eq(0).all()


def test_position_offset_shifts_every_position_incremental_and_drawn_alike():
    emb = Embedding(20, 8, pad_id=0, dropout=0.0, layout="halves", position_offset=2).eval()
    ids = torch.tensor([[3, 4, 5]])
    words = emb.tokens.weight[ids[0]] * math.sqrt(8)
    assert torch.allclose(emb(ids)[0], words + sinusoid(torch.arange(2, 5), 8, "halves"), atol=1e-6)
    step = emb(ids[:, 1:2], offset=1)  # the second token alone, as a decoder with a cache gives it
    assert torch.allclose(step[0, 0], words[1] + sinusoid(torch.tensor([3]), 8, "halves")[0], atol=1e-6)
    drawn = emb(ids, positions=torch.tensor([0, 10, 1500]))  # beyond the initial table: it grows
    assert torch.allclose(drawn[0], words + sinusoid(torch.tensor([2, 12, 1502]), 8, "halves"), atol=1e-6)


def test_fairseq_positions_equal_hugging_face_m2m100():
    """M2M100's positions (transformers' own code, read as an independent implementation): ids
    numbered from padding_idx + 1, sinusoids of tensor2tensor's frequencies in halves; during
    generation each new token is numbered after the cache."""
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    d, pad = 16, 1
    theirs = M2M100SinusoidalPositionalEmbedding(64, d, padding_idx=pad)
    ours = SinusoidalPositions(d, "halves", offset=pad + 1, frequencies="tensor2tensor")
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11]])
    assert torch.allclose(ours(7), theirs(ids)[0], atol=1e-5)
    for cached in (0, 3, 100):  # beyond HF's initial table too
        assert torch.allclose(ours(1, cached), theirs(ids[:, :1], cache_length=cached)[0], atol=1e-5)


def test_a_token_can_read_another_tokens_row():
    """fairseq's decoder starts from </s>: with token_row=(2, 3) the start token 2 reads row 3."""
    emb = Embedding(20, 8, pad_id=0, dropout=0.0, token_row=(2, 3)).eval()
    plain = Embedding(20, 8, pad_id=0, dropout=0.0).eval()
    plain.tokens = emb.tokens
    assert torch.equal(emb(torch.tensor([[2, 5, 3]])), plain(torch.tensor([[3, 5, 3]])))
    assert not torch.equal(emb(torch.tensor([[2]])), plain(torch.tensor([[2]])))
