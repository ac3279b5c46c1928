"""Universal Transformer and ACT: recurrence, invariants, ponder loss, cache, padding, learning."""

import math

import pytest
import torch
from tiny import TINY_ACT

from transduce.config import load_config
from transduce.model import build_model
from transduce.model.attention import padding_mask
from transduce.model.embeddings import sinusoid
from transduce.model.layers import LayerInputs

V = 20


def ut(act=False, norm="post", enc=4, dec=3, **extra):
    overrides = [
        "model.arch=universal",
        f"model.act={str(act).lower()}",
        "model.d_model=32",
        "model.heads=4",
        "model.d_ff=64",
        f"model.encoder_steps={enc}",
        f"model.decoder_steps={dec}",
        "model.dropout=0",
        f"model.norm={norm}",
        *[f"model.{k}={v}" for k, v in extra.items()],
    ]
    torch.manual_seed(0)
    model = build_model(load_config("small", overrides).model, V, V).eval()
    if act:  # varied halting so positions stop at different steps
        with torch.no_grad():
            model.encoder.halt.weight.normal_(std=0.5)
            model.encoder.halt.bias.fill_(-0.5)
    return model


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_fixed_steps_equal_explicit_recurrence(norm):
    model = ut(norm=norm)
    src = torch.randint(4, V, (2, 7))
    src[1, 5:] = 0
    got = model.encode(src).states
    layer, d = model.encoder.layer, 32
    h = model.src_embed.tokens(src) * math.sqrt(d)
    mask = padding_mask(src.eq(0))
    for t in range(
        1, 5
    ):  # A^t = LN((H + P^t) + Att(H + P^t)), H^t = LN(A^t + FFN(A^t)); P^t = PE(pos) + PE(t)
        coords = sinusoid(torch.arange(7), d) + sinusoid(torch.tensor([t]), d)
        h = layer(h + coords, LayerInputs(mask))
    if norm == "pre":
        h = model.encoder.final_norm(h)
    real = ~src.eq(0)
    assert (got - h)[real].abs().max() < 1e-5


def explicit_act(model, src):
    """ACT bookkeeping per position with Python floats, on step states computed batch-wise."""
    stack, layer, d = model.encoder, model.encoder.layer, 32
    pad = src.eq(0)
    mask = padding_mask(pad)
    state = model.src_embed.tokens(src) * math.sqrt(d)
    batch, n = src.shape
    acc = [[0.0] * n for _ in range(batch)]
    done = [[bool(pad[b, i]) for i in range(n)] for b in range(batch)]
    steps = [[0] * n for _ in range(batch)]
    remainder = [[0.0] * n for _ in range(batch)]
    out = torch.zeros_like(state)
    for t in range(stack.steps):
        coords = sinusoid(torch.arange(n), d) + sinusoid(torch.tensor([t + 1]), d)
        new = layer(state + coords, LayerInputs(mask))
        p = torch.sigmoid(stack.halt(new)).squeeze(-1)
        nxt = state.clone()
        for b in range(batch):
            for i in range(n):
                if done[b][i]:
                    continue
                steps[b][i] += 1
                pi = float(p[b, i])
                if acc[b][i] + pi >= 1 - stack.act_epsilon or t == stack.steps - 1:
                    remainder[b][i] = 1 - acc[b][i]
                    out[b, i] += remainder[b][i] * new[b, i]
                    done[b][i] = True
                else:
                    acc[b][i] += pi
                    out[b, i] += pi * new[b, i]
                nxt[b, i] = new[b, i]
        state = nxt
    return out, steps, remainder


def test_act_matches_explicit_loop_and_invariants():
    model = ut(act=True, enc=6)
    src = torch.randint(4, V, (3, 8))
    src[1, 6:] = 0
    src[2, 3:] = 0
    with torch.no_grad():
        encoded = model.encode(src)
        expected, steps, remainder = explicit_act(model, src)
    got, ponder = encoded.states, encoded.ponder
    real = ~src.eq(0)
    assert (got - expected)[real].abs().max() < 1e-5
    assert ponder.steps.tolist() == [[float(s) for s in row] for row in steps]
    assert torch.allclose(ponder.remainder, torch.tensor(remainder), atol=1e-6)
    sums = ponder.weights.sum(0)
    assert torch.allclose(sums[real], torch.ones_like(sums[real]), atol=1e-6)  # halting weights sum to 1
    assert (ponder.steps[real] >= 1).all() and (ponder.steps[real] <= 6).all()
    assert (ponder.steps[~real] == 0).all()
    assert len(set(ponder.steps[real].tolist())) > 1  # positions really halt at different steps
    expected_loss = (
        sum(steps[b][i] + remainder[b][i] for b in range(3) for i in range(8) if real[b, i]) / real.sum()
    )
    assert float(ponder.mean_cost()) == pytest.approx(float(expected_loss), rel=1e-5)


def test_halted_positions_do_not_change_with_more_steps():
    short, long = ut(act=True, enc=4), ut(act=True, enc=9)
    long.load_state_dict(short.state_dict())
    src = torch.randint(4, V, (2, 8))
    with torch.no_grad():
        first = short.encode(src)
        a, b = first.states, long.encode(src).states
    halted_early = first.ponder.steps < 4
    assert halted_early.any()
    assert (a - b)[halted_early].abs().max() < 1e-6


def test_act_padding_does_not_affect_real_positions():
    model = ut(act=True)
    src = torch.randint(4, V, (1, 5))
    padded = torch.cat([src, torch.zeros(1, 4, dtype=torch.long)], 1)
    with torch.no_grad():
        a, b = model.encode(src), model.encode(padded)
    assert (a.states - b.states[:, :5]).abs().max() < 1e-5
    assert torch.equal(a.ponder.steps, b.ponder.steps[:, :5])


@pytest.mark.parametrize(("act", "transition"), [(False, "ffn"), (True, "ffn"), (True, "conv")])
def test_cached_decoding_equals_full_for_ut(act, transition):
    model = ut(act=act, transition=transition)
    if act:
        with torch.no_grad():
            model.decoder.halt.weight.normal_(std=0.5)
    src = torch.randint(4, V, (2, 6))
    src[1, 4:] = 0
    tgt = torch.randint(4, V, (2, 7))
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory)
        cache = model.new_cache()
        for t in range(7):
            step = model.decode(tgt[:, t : t + 1], memory, cache)
            assert (step[:, 0] - full[:, t]).abs().max() < 1e-5, t


def test_ut_beam_search_runs_through_translate_path():
    from transduce.decode.beam import beam_search
    from transduce.decode.search import greedy

    model = ut(act=True)
    src = torch.randint(4, V, (3, 5))
    hyps = beam_search(model, src, beam=3, max_len_b=6)
    assert len(hyps) == 3 and all(h for h in hyps)
    assert [h[0].tokens for h in beam_search(model, src, beam=1, alpha=0.0, max_len_b=6)] == [
        h.tokens for h in greedy(model, src, max_len_b=6)
    ]


def test_small_ut_learns_reverse(tmp_path):
    from transduce.train.trainer import Trainer

    cfg = load_config(
        "small",
        [
            "model.arch=universal",
            "model.d_model=64",
            "model.heads=4",
            "model.d_ff=256",
            "model.encoder_steps=3",
            "model.decoder_steps=3",
            "model.dropout=0",
            "data.task=reverse",
            "data.task_train_max_len=6",
            "data.task_test_max_len=8",
            "data.task_train_size=4000",
            "data.task_eval_size=200",
            "data.max_tokens=1024",
            "train.steps=800",
            "train.warmup=100",
            "train.lr_scale=0.25",
            "train.validate_every=800",
            "train.save_every=800",
            "train.threads=1",
        ],
    )
    metrics = Trainer(cfg, tmp_path / "run", show_progress=False).fit()
    assert metrics["dev_seq_acc"] >= 0.95, metrics


def test_validation_reports_ponder_steps_and_plot_command(tmp_path):
    from typer.testing import CliRunner

    from transduce.cli import app
    from transduce.train.trainer import Trainer

    cfg = load_config("small", [*TINY_ACT, "train.steps=4", "train.save_every=4", "train.validate_every=4"])
    metrics = Trainer(cfg, tmp_path / "run", show_progress=False).fit()
    assert 1 <= metrics["encoder_ponder_mean"] <= metrics["encoder_ponder_max"] <= 4
    assert 1 <= metrics["decoder_ponder_mean"] <= 4
    result = CliRunner().invoke(app, ["ponder", str(tmp_path / "run"), "1 2 3", "-o", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "p" / "encoder-ponder.png").stat().st_size > 1000
    assert (tmp_path / "p" / "decoder-ponder.png").exists()


@pytest.mark.parametrize("causal", [False, True])
def test_separable_conv_equals_naive_loop(causal):
    from transduce.model.layers import SeparableConv

    torch.manual_seed(0)
    conv = SeparableConv(6, 12, kernel=3, causal=causal)
    x = torch.randn(2, 5, 6)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    got = conv(x, pad)
    w, b = conv.depthwise.weight[:, 0], conv.depthwise.bias  # (channels, k), (channels,)
    first = -2 if causal else -1  # window i-2..i, or i-1..i+1
    for row in range(2):
        for i in range(5):
            if pad[row, i]:
                continue
            mixed = b.clone()
            for j in range(3):
                src = i + first + j
                if 0 <= src < 5 and not pad[row, src]:
                    mixed += w[:, j] * x[row, src]
            assert (conv.pointwise(mixed) - got[row, i]).abs().max() < 1e-5


def test_conv_ut_padding_does_not_affect_real_positions():
    model = ut(transition="conv", conv_kernel=5)
    src = torch.randint(4, V, (1, 5))
    padded = torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], 1)
    with torch.no_grad():
        assert (model.encode(src).states - model.encode(padded).states[:, :5]).abs().max() < 1e-5
