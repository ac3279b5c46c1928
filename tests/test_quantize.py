"""int8 dynamic quantisation: the split projection is exact, the int8 GEMM computes the
quantised arithmetic (checked against a float emulation), quantised logits stay close."""

import warnings

import torch
from tiny import train_tiny
from typer.testing import CliRunner

from transduce.cli import app
from transduce.config import load_config
from transduce.decode.beam import beam_search
from transduce.model import build_model
from transduce.model.attention import FusedQKV
from transduce.model.linears import SplitQKV
from transduce.model.quantize import Int8Linear, quantize_int8


def small_model():
    torch.manual_seed(0)
    cfg = load_config("small", ["model.d_model=64", "model.heads=4", "model.d_ff=128", "model.dropout=0"])
    return build_model(cfg.model, 200, 200).eval()


def test_split_projection_equals_fused_rows():
    fused = FusedQKV(16, 48)
    split = SplitQKV(fused)
    x = torch.randn(3, 5, 16)
    assert torch.allclose(split(x), fused(x), atol=1e-6)
    assert torch.allclose(split.query(x), fused.query(x)) and torch.allclose(
        split.key_value(x), fused.key_value(x)
    )


def emulated_int8(linear, x):
    """The quantised arithmetic in float: weights rounded per row to 127 levels of max |row| / 127,
    activations to 0..127 over their range [min(x, 0), max(x, 0)] with a zero point."""
    w = linear.weight.detach()
    w_step = w.abs().amax(1, keepdim=True) / 127
    w_q = torch.round(w / w_step) * w_step
    low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    step = (high - low) / 127
    zero = round(-low / step)
    x_q = (torch.clamp(torch.round(x / step + zero), 0, 127) - zero) * step
    return x_q @ w_q.T + linear.bias.detach()


def test_int8_linear_computes_the_quantised_arithmetic():
    torch.manual_seed(0)
    linear = torch.nn.Linear(48, 40)
    x = torch.randn(2, 7, 48) * 3 + 0.5
    quantised = Int8Linear(linear)
    got = quantised(x)
    assert got.shape == (2, 7, 40)
    assert torch.allclose(got, emulated_int8(linear, x), atol=1e-4)
    exact = linear(x).detach()
    assert (got - exact).abs().max() < 0.05 * exact.abs().max()  # and close to float
    assert quantised(x[:, :0]).shape == (2, 0, 40)  # no rows: no range to quantise over
    positive = x.abs()  # a range that does not reach 0 still quantises 0 exactly
    assert torch.allclose(quantised(positive), emulated_int8(linear, positive), atol=1e-4)


def test_int8_model_is_quantised_close_and_leaves_the_original_alone():
    model = small_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        q = quantize_int8(model, min_weights=0)
    assert not [w for w in caught if "deprecated" in str(w.message)]  # off torch.ao.quantization
    kinds = {type(m) for m in q.modules()}
    assert Int8Linear in kinds
    assert torch.nn.Linear not in kinds and FusedQKV not in kinds
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    src = torch.randint(4, 200, (4, 12))
    tgt = torch.randint(4, 200, (4, 9))
    with torch.no_grad():
        exact, approx = model(src, tgt).logits.log_softmax(-1), q(src, tgt).logits.log_softmax(-1)
    assert (exact - approx).abs().max() < 0.1 * exact.abs().max()
    assert (exact.argmax(-1) == approx.argmax(-1)).float().mean() > 0.9
    assert len(beam_search(q, src, beam=3, max_len_b=5)) == 4


def test_only_linear_maps_of_min_weights_or_more_are_int8():
    model = small_model()  # d_model 64, d_ff 128, 200 tokens: 8,192 to 12,800 weights a map
    sizes = {"Int8Linear": set(), "PackedLinear": set()}
    for m in quantize_int8(model, min_weights=10_000).modules():
        if type(m).__name__ in sizes:
            inputs = m.in_features if hasattr(m, "in_features") else m.rows.shape[1]
            sizes[type(m).__name__].add(m.out_features * inputs)
    assert sizes["Int8Linear"] == {12_800}  # the output projection (200 x 64)
    assert sizes["PackedLinear"] == {64 * 64, 64 * 128, 128 * 64, 64 * 128}
    assert {type(m) for m in quantize_int8(model).modules()} & {Int8Linear} == set()  # all < 2**18
    src, tgt = torch.randint(4, 200, (4, 12)), torch.randint(4, 200, (4, 9))
    with torch.no_grad():
        assert torch.allclose(quantize_int8(model)(src, tgt).logits, model(src, tgt).logits, atol=1e-4)


def test_translate_and_evaluate_take_quantize(tmp_path):
    train_tiny(tmp_path / "run", 10)
    runner = CliRunner()
    out = runner.invoke(app, ["translate", str(tmp_path / "run"), "--quantize", "int8"], input="1 2 3\n\n")
    assert out.exit_code == 0, out.output
    assert len(out.stdout.split("\n")) == 3
    scored = runner.invoke(app, ["evaluate", str(tmp_path / "run"), "--split", "dev", "--quantize", "int8"])
    assert scored.exit_code == 0 and "sequence accuracy" in scored.stdout
    bad = runner.invoke(app, ["translate", str(tmp_path / "run"), "--quantize", "int4"], input="1\n")
    assert bad.exit_code == 2 and "allowed: none, int8" in bad.output
