"""Whole-model properties: causality, padding invariance, cached = full decoding, tying, sizes."""

import pytest
import torch

from transduce.config import load_config
from transduce.model import build_model
from transduce.model.transformer import EncoderClassifier, LanguageModel

V = 50


def tiny(norm: str = "post", **extra):
    overrides = [
        f"model.norm={norm}",
        "model.d_model=32",
        "model.heads=4",
        "model.d_ff=64",
        "model.encoder_layers=2",
        "model.decoder_layers=2",
    ]
    overrides += [f"model.{k}={v}" for k, v in extra.items()]
    return load_config("small", overrides).model


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_future_target_tokens_never_change_earlier_outputs(norm):
    model = build_model(tiny(norm), V, V).eval()
    src = torch.randint(4, V, (2, 6))
    tgt = torch.randint(4, V, (2, 7))
    changed = tgt.clone()
    changed[:, 4:] = torch.randint(4, V, (2, 3))
    a, b = model(src, tgt).logits, model(src, changed).logits
    assert torch.allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert not torch.allclose(a[:, 4:], b[:, 4:])


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_padding_never_changes_real_positions(norm):
    model = build_model(tiny(norm), V, V).eval()
    src = torch.randint(4, V, (1, 5))
    tgt = torch.randint(4, V, (1, 4))
    padded_src = torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], 1)
    padded_tgt = torch.cat([tgt, torch.zeros(1, 2, dtype=torch.long)], 1)
    assert torch.allclose(model(src, tgt).logits, model(padded_src, padded_tgt).logits[:, :4], atol=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_incremental_decoding_equals_full_forward(norm, positions):
    model = build_model(tiny(norm, positions=positions), V, V).eval()
    src = torch.randint(4, V, (3, 6))
    src[1, 4:] = 0
    tgt = torch.randint(4, V, (3, 9))
    memory = model.encode(src)
    full = model.decode(tgt, memory)
    cache = model.new_cache()
    for t in range(tgt.shape[1]):
        step = model.decode(tgt[:, t : t + 1], memory, cache)
        assert (step[:, 0] - full[:, t]).abs().max() < 1e-5, t
    assert cache.position == tgt.shape[1]


def test_cache_reorder_follows_rows():
    model = build_model(tiny(), V, V).eval()
    src = torch.randint(4, V, (2, 5))
    tgt = torch.randint(4, V, (2, 4))
    memory = model.encode(src)
    cache = model.new_cache()
    model.decode(tgt[:, :3], memory, cache)
    swap = torch.tensor([1, 0])
    cache.reorder(swap, swap)
    step = model.decode(tgt[swap, 3:4], memory.select(swap), cache)
    assert torch.allclose(step[:, 0], model.decode(tgt[swap], memory.select(swap))[:, 3], atol=1e-5)


def test_decoder_only_cache_matches_full():
    cfg = tiny(kind="decoder")
    model = build_model(cfg, V, V).eval()
    assert isinstance(model, LanguageModel)
    ids = torch.randint(4, V, (2, 6))
    full = model(ids).logits
    cache = model.new_cache()
    for t in range(6):
        assert (model(ids[:, t : t + 1], cache).logits[:, 0] - full[:, t]).abs().max() < 1e-5


def test_encoder_classifier_heads():
    seq = build_model(tiny(kind="encoder", num_classes=3), V, V).eval()
    tok = build_model(tiny(kind="encoder", num_classes=5, classifier="token"), V, V).eval()
    assert isinstance(seq, EncoderClassifier)
    ids = torch.randint(4, V, (2, 7))
    assert seq(ids).logits.shape == (2, 3)
    assert tok(ids).logits.shape == (2, 7, 5)


def test_weight_tying_modes():
    all_tied = build_model(tiny(tie_embeddings="all"), V, V)
    assert all_tied.src_embed.tokens.weight is all_tied.tgt_embed.tokens.weight
    assert all_tied.output.weight is all_tied.tgt_embed.tokens.weight
    dec = build_model(tiny(tie_embeddings="decoder"), 40, V)
    assert dec.output.weight is dec.tgt_embed.tokens.weight
    assert dec.src_embed.tokens.weight is not dec.tgt_embed.tokens.weight
    none = build_model(tiny(tie_embeddings="none"), V, V)
    assert none.output.weight is not none.tgt_embed.tokens.weight
    with pytest.raises(ValueError, match="shared vocabulary"):
        build_model(tiny(tie_embeddings="all"), 40, V)


def test_base_parameter_count_matches_paper():
    model = build_model(load_config("base").model, 37000, 37000)
    count = sum(p.numel() for p in model.parameters())
    assert abs(count - 63.08e6) / 63.08e6 < 0.005


def test_big_preset_is_the_papers_big_model():
    model = build_model(load_config("big").model, 37000, 37000)
    count = sum(p.numel() for p in model.parameters())
    assert 200e6 < count < 220e6  # ~213M in the paper
