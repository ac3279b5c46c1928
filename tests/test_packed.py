"""Pre-packed float32 linear maps: the same products as F.linear, the same decoded tokens."""

import pytest
import torch
from test_quantize import small_model
from tiny import train_tiny
from typer.testing import CliRunner

from transduce.cli import app
from transduce.decode.beam import beam_search
from transduce.decode.search import greedy
from transduce.model.attention import FusedQKV
from transduce.model.packed import PackedLinear, pack_for_cpu, packing_available
from transduce.store.load import load_for_decoding

pytestmark = pytest.mark.skipif(not packing_available(), reason="this torch build has no oneDNN")


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(7, 24), (3, 5, 24), (2, 1, 1, 24), (0, 24), (130, 24)])
def test_packed_linear_equals_linear(shape, bias):
    torch.manual_seed(1)
    linear = torch.nn.Linear(24, 40, bias=bias)
    x = torch.randn(*shape)
    got = PackedLinear(linear)(x)
    assert got.shape == (*shape[:-1], 40)
    assert torch.allclose(got, torch.nn.functional.linear(x, linear.weight, linear.bias), atol=1e-5)


def test_packed_linear_rejects_the_wrong_width():
    with pytest.raises(ValueError, match="expected 24 input features, got 23"):
        PackedLinear(torch.nn.Linear(24, 8))(torch.randn(2, 23))


def test_packed_model_decodes_the_same_tokens_and_leaves_the_original_alone():
    model = small_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    packed = pack_for_cpu(model)
    kinds = {type(m) for m in packed.modules()}
    assert PackedLinear in kinds and torch.nn.Linear not in kinds and FusedQKV not in kinds
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    torch.manual_seed(2)
    src = torch.randint(4, 200, (6, 11))
    src[3, 7:] = 0  # a padded row
    tgt = torch.randint(4, 200, (6, 9))
    with torch.no_grad():
        assert torch.allclose(packed(src, tgt).logits, model(src, tgt).logits, atol=1e-4)
    for ours, ref in zip(
        greedy(packed, src, max_len_a=0.0, max_len_b=12),
        greedy(model, src, max_len_a=0.0, max_len_b=12),
        strict=True,
    ):
        assert ours.tokens == ref.tokens and ours.score == pytest.approx(ref.score, abs=1e-4)
    beams = beam_search(packed, src, beam=4, max_len_b=12, nbest=4)
    for ours, ref in zip(beams, beam_search(model, src, beam=4, max_len_b=12, nbest=4), strict=True):
        assert [h.tokens for h in ours] == [h.tokens for h in ref]
        assert [h.score for h in ours] == pytest.approx([h.score for h in ref], abs=1e-4)


def test_only_float32_models_are_packed():
    model = small_model().to(torch.bfloat16)
    assert pack_for_cpu(model) is model


def test_decoding_commands_load_packed_models(tmp_path):
    train_tiny(tmp_path / "run", 10)
    loaded = load_for_decoding(tmp_path / "run", "none")
    assert any(isinstance(m, PackedLinear) for m in loaded.model.modules())
    out = CliRunner().invoke(app, ["translate", str(tmp_path / "run"), "--greedy"], input="1 2 3\n4 5\n")
    assert out.exit_code == 0, out.output
    assert len(out.stdout.split("\n")) == 3
