"""Attention against independent computations: a per-head loop, torch's MHA, seed 004 eq. 47."""

import math

import pytest
import torch
from torch import nn

from transduce.model.attention import (
    MultiHeadAttention,
    causal_mask,
    local_mask,
    padding_mask,
    record_attention,
    scaled_dot_product,
)


def naive_mha(mha: MultiHeadAttention, x, memory, key_pad, causal):
    """Loop over batch rows, heads and query positions with explicit softmax."""
    d, h = mha.d, mha.heads
    dk = d // h
    w, b = mha.in_proj.weight, mha.in_proj.bias
    src = x if memory is None else memory
    out = torch.zeros_like(x)
    for bi in range(x.shape[0]):
        heads = []
        for hi in range(h):
            rows = slice(hi * dk, (hi + 1) * dk)
            q = x[bi] @ w[:d][rows].T + b[:d][rows]
            k = src[bi] @ w[d : 2 * d][rows].T + b[d : 2 * d][rows]
            v = src[bi] @ w[2 * d :][rows].T + b[2 * d :][rows]
            ctx = torch.zeros(x.shape[1], dk)
            for i in range(x.shape[1]):
                allowed = [j for j in range(src.shape[1]) if not key_pad[bi, j] and (not causal or j <= i)]
                scores = torch.stack([q[i] @ k[j] / math.sqrt(dk) for j in allowed])
                p = torch.exp(scores - scores.max())
                p = p / p.sum()
                ctx[i] = sum(p[n] * v[j] for n, j in enumerate(allowed))
            heads.append(ctx)
        out[bi] = torch.cat(heads, -1) @ mha.out_proj.weight.T + mha.out_proj.bias
    return out


def attend(mha: MultiHeadAttention, *args, record: bool = False, **kwargs):
    """mha's output, and with `record` its weights (the plain path instead of the fused kernel)."""
    if not record:
        return mha(*args, **kwargs), None
    with record_attention(mha) as records:
        out = mha(*args, **kwargs)
    return out, records[""][-1]


def _torch_mha(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(mha.d, mha.heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(mha.in_proj.weight)
        ref.in_proj_bias.copy_(mha.in_proj.bias)
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        ref.out_proj.bias.copy_(mha.out_proj.bias)
    return ref.eval()


def test_self_attention_with_padding_and_causal_matches_loop_and_torch():
    mha = MultiHeadAttention(16, 4).eval()
    with torch.no_grad():
        mha.in_proj.bias.normal_()
        mha.out_proj.bias.normal_()
    x = torch.randn(3, 6, 16)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[1, 4:] = True
    pad[2, 2:] = True
    for causal in (False, True):
        mask = padding_mask(pad)
        if causal:
            mask = mask + causal_mask(6, 6)
        for record in (False, True):  # fused kernel and plain path
            ours, _ = attend(mha, x, mask=mask, record=record)
            loop = naive_mha(mha, x, None, pad, causal)
            real = ~pad
            assert (ours - loop)[real].abs().max() < 1e-5
            ref, _ = _torch_mha(mha)(
                x, x, x, key_padding_mask=pad, attn_mask=causal_mask(6, 6) if causal else None
            )
            assert (ours - ref)[real].abs().max() < 1e-5


def test_cross_attention_matches_loop_and_torch():
    mha = MultiHeadAttention(12, 3).eval()
    with torch.no_grad():
        mha.in_proj.bias.normal_()
    x, mem = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[0, 5:] = True
    ours = mha(x, mem, mask=padding_mask(pad))
    assert (ours - naive_mha(mha, x, mem, pad, False)).abs().max() < 1e-5
    ref, _ = _torch_mha(mha)(x, mem, mem, key_padding_mask=pad)
    assert (ours - ref).abs().max() < 1e-5


def test_beams_read_one_copy_of_the_memory_as_if_it_were_repeated():
    mha = MultiHeadAttention(12, 3).eval()
    with torch.no_grad():
        mha.in_proj.bias.normal_()
    beams, x, mem = 4, torch.randn(8, 2, 12), torch.randn(2, 7, 12)  # 2 sources x 4 beams
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[0, 5:] = True
    repeated_pad = pad.repeat_interleave(beams, 0)
    loop = naive_mha(mha, x, mem.repeat_interleave(beams, 0), repeated_pad, False)
    for record in (False, True):
        ours, weights = attend(mha, x, mem, mask=padding_mask(pad), record=record)
        assert (ours - loop).abs().max() < 1e-5
    _, repeated_weights = attend(
        mha, x, mem.repeat_interleave(beams, 0), mask=padding_mask(repeated_pad), record=True
    )
    assert weights.shape == (8, 3, 2, 7) and (weights - repeated_weights).abs().max() < 1e-6
    with pytest.raises(ValueError, match="cannot be grouped"):
        mha(torch.randn(3, 2, 12), mem)


def test_survey_eq47_masked_softmax_worked_example():
    scores = torch.tensor([[2, 0.1, 1, 1], [0, 0.9, 0.9, 0.9], [0.2, 0.8, 0.7, 2], [0.3, 1, 0.3, 3]])
    printed = [
        ["1", "0", "0", "0"],
        ["0.3", "0.7", "0", "0"],
        ["0.2", "0.4", "0.4", "0"],
        ["0.05", "0.1", "0.05", "0.8"],
    ]
    # With d_head = 4, Q = 2 S and K = I give Q K^T / sqrt(d_head) = S exactly.
    q = (2 * scores).reshape(1, 1, 4, 4)
    k = torch.eye(4).reshape(1, 1, 4, 4)
    _, weights = scaled_dot_product(q, k, k, causal_mask(4, 4), need_weights=True)
    for i in range(4):
        for j in range(4):
            decimals = len(printed[i][j].split(".")[1]) if "." in printed[i][j] else 0
            assert round(float(weights[0, 0, i, j]), decimals) == float(printed[i][j]), (i, j)


def test_local_window_blocks_distant_keys():
    mask = local_mask(7, 7, radius=2)
    i, j = torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij")
    assert torch.equal(torch.isinf(mask), (i - j).abs() > 2)
    q = torch.randn(1, 2, 7, 8)
    _, w = scaled_dot_product(q, q, q, mask, need_weights=True)
    assert torch.all(w[..., (i - j).abs() > 2] == 0)


@pytest.mark.parametrize(("n", "radius"), [(7, 2), (100, 5), (257, 64), (40, 0)])
def test_blocked_local_attention_equals_full_attention_with_a_local_mask(n, radius):
    from transduce.model.attention import local_attention, padding_mask

    torch.manual_seed(n)
    q, k, v = (torch.randn(2, 3, n, 8) for _ in range(3))
    pad = torch.zeros(2, n, dtype=torch.bool)
    pad[1, n - n // 3 :] = True
    key_mask = padding_mask(pad)
    got = local_attention(q, k, v, radius, key_mask)
    want, _ = scaled_dot_product(q, k, v, key_mask + local_mask(n, n, radius))
    real = ~pad
    assert (got - want).permute(0, 2, 1, 3)[real].abs().max() < 1e-5
    assert torch.isfinite(got).all()  # padding rows too


def test_local_encoder_is_the_same_whether_blocked_or_masked():
    from transduce.config import load_config
    from transduce.model import build_model

    cfg = load_config(
        "small", ["model.d_model=32", "model.heads=4", "model.local_window=3", "model.dropout=0"]
    )
    model = build_model(cfg.model, 30, 30).eval()
    src = torch.randint(4, 30, (2, 50))
    src[1, 40:] = 0
    with torch.no_grad():
        blocked = model.encode(src).states  # the blocked kernel
    with torch.no_grad(), record_attention(model) as records:
        masked = model.encode(src).states  # weights wanted: the full masked path
    assert (blocked - masked)[src.ne(0)].abs().max() < 1e-5
    i, j = torch.meshgrid(torch.arange(50), torch.arange(50), indexing="ij")
    assert (records["encoder.layers.0.self_attn"][0][..., (i - j).abs() > 3] == 0).all()


def test_multiplicative_score_mask_scales_scores():
    q, k, v = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4)
    m = torch.rand(3, 3)
    _, w = scaled_dot_product(q, k, v, score_mask=m, need_weights=True)
    expected = ((q @ k.transpose(-1, -2)) / 2.0 * m).softmax(-1)
    assert torch.allclose(w, expected, atol=1e-6)
