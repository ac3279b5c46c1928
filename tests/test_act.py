"""ACT's options (issue 91): the halting unit's initial bias and rate, a minimum of steps, the
ponder cost per stack and its warm-up; and the stacks' ACT against a per-position loop written
from Graves' equations, values and gradients, encoder and decoder, with padding."""

import pytest
import torch
from tiny import TINY_ACT

from transduce.config import ConfigError, load_config
from transduce.data.dataset import Split
from transduce.model import build_model
from transduce.model.attention import causal_mask, padding_mask
from transduce.model.embeddings import sinusoid
from transduce.model.layers import LayerInputs
from transduce.model.ponder import PonderWeights, ponder_loss
from transduce.train.objective import IGNORE, objective_for
from transduce.train.validation import dev_loss

V = 20


def ut_act(steps=6, norm="pre", **extra):
    overrides = [
        "model.arch=universal",
        "model.act=true",
        "model.d_model=32",
        "model.heads=4",
        "model.d_ff=64",
        f"model.encoder_steps={steps}",
        f"model.decoder_steps={steps}",
        "model.dropout=0",
        f"model.norm={norm}",
        *[f"model.{k}={v}" for k, v in extra.items()],
    ]
    return load_config("small", overrides)


def model_of(cfg, halting=(0.1, 0.0)):
    """The model of `cfg` (seed 0), its halting units' weights drawn with std halting[0] and their
    bias halting[1], so that positions halt at different steps; halting=None leaves them as built."""
    torch.manual_seed(0)
    model = build_model(cfg.model, V, V).eval()
    if halting is not None:
        with torch.no_grad():
            for stack in (model.encoder, model.decoder):
                stack.halt.weight.normal_(std=halting[0])
                stack.halt.bias.fill_(halting[1])
    return model


def value(x):
    """A Python float of a number or a tensor (without its graph)."""
    return float(x.detach()) if isinstance(x, torch.Tensor) else float(x)


def graves_act(layer, halt, x, inputs, pad, *, steps, epsilon, min_steps, d, detach=False):
    """One ACT stack, position by position, from Graves (2016), eqs. 6-13 with the UT's step
    signal: h^n = sigmoid(W s^n + b); N = min{M, min{n : h^1 + ... + h^n >= 1 - epsilon}};
    R = 1 - (h^1 + ... + h^(N-1)); the output is sum_n p^n s^n with p^n = h^n for n < N and R
    for N; the ponder cost N + R. A halted position's state stays as it was for the others'
    attention. The halting unit is first read at step `min_steps` (earlier steps weigh 0), and
    with `detach` it reads s^n without its gradient.
    Returns the outputs (batch, n, d) (padding as it came) and each real position's cost."""
    batch, n, _ = x.shape
    state = [[x[b, i] for i in range(n)] for b in range(batch)]
    out = [[x[b, i] for i in range(n)] for b in range(batch)]
    total = [[0.0] * n for _ in range(batch)]  # h^1 + ... so far: a tensor once one is added
    halted = [[bool(pad[b, i]) for i in range(n)] for b in range(batch)]
    cost = {}
    for t in range(1, steps + 1):
        signal = sinusoid(torch.arange(n), d) + sinusoid(torch.tensor([t]), d)
        new = layer(torch.stack([torch.stack(row) for row in state]) + signal, inputs)
        for b in range(batch):
            for i in range(n):
                if halted[b][i]:
                    continue
                if t == min_steps:  # the output sums the steps from here
                    out[b][i] = torch.zeros_like(new[b, i])
                if t >= min_steps:
                    h = torch.sigmoid(halt(new[b, i].detach() if detach else new[b, i]))[0]
                    if t == steps or value(total[b][i]) + value(h) >= 1 - epsilon:
                        remainder = 1 - total[b][i]
                        out[b][i] = out[b][i] + remainder * new[b, i]
                        cost[b, i] = t + remainder
                        halted[b][i] = True
                    else:
                        total[b][i] = total[b][i] + h
                        out[b][i] = out[b][i] + h * new[b, i]
                state[b][i] = new[b, i]
    return torch.stack([torch.stack(row) for row in out]), cost


def naive_forward(model, src, tgt):
    """Logits and the mean ponder cost per stack of an ACT UT, each stack through graves_act."""
    enc, dec, d = model.encoder, model.decoder, model.src_embed.tokens.embedding_dim
    src_pad, tgt_pad = src.eq(0), tgt.eq(0)
    common = {"d": d, "epsilon": enc.act_epsilon, "min_steps": enc.min_steps, "detach": enc.halt_detach}
    memory, enc_cost = graves_act(
        enc.layer,
        enc.halt,
        model.src_embed(src),
        LayerInputs(padding_mask(src_pad), pad=src_pad),
        src_pad,
        steps=enc.steps,
        **common,
    )
    if enc.final_norm is not None:
        memory = enc.final_norm(memory)
    n = tgt.shape[1]
    inputs = LayerInputs(causal_mask(n, n, 0, tgt.device), memory, padding_mask(src_pad), pad=tgt_pad)
    states, dec_cost = graves_act(
        dec.layer, dec.halt, model.tgt_embed(tgt), inputs, tgt_pad, steps=dec.steps, **common
    )
    if dec.final_norm is not None:
        states = dec.final_norm(states)
    costs = {side: sum(c.values()) / len(c) for side, c in (("encoder", enc_cost), ("decoder", dec_cost))}
    return model.output(states), costs


# Halting chosen so that in each stack the positions halt at different steps: at steps 1, 2 and
# 5 (pre-norm), 2-4 (post-norm), 3-5 (three steps at least)
@pytest.mark.parametrize(
    ("norm", "min_steps", "halting", "detach"),
    [
        ("pre", 1, (0.3, 5.0), False),
        ("post", 1, (0.3, 2.0), False),
        ("pre", 3, (0.1, 5.0), False),
        ("pre", 1, (0.3, 5.0), True),
    ],
)
def test_stacks_act_matches_graves_loop_values_and_gradients(norm, min_steps, halting, detach):
    cfg = ut_act(steps=5, norm=norm, act_min_steps=min_steps, act_halt_detach=str(detach).lower())
    model = model_of(cfg, halting)
    src = torch.randint(4, V, (3, 7))
    src[1, 5:] = 0
    src[2, 2:] = 0
    tgt = torch.randint(4, V, (3, 6))
    tgt[0, 4:] = 0
    tgt[2, 1:] = 0
    gold = torch.randint(4, V, (3, 6)).masked_fill(tgt.eq(0), IGNORE)
    taus = {"encoder": 0.3, "decoder": 0.7}

    def loss_and_grads(logits, costs):
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=IGNORE)
        loss = loss + sum(taus[side] * costs[side] for side in taus)
        model.zero_grad()
        loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    out = model(src, tgt)
    got = loss_and_grads(out.logits, {side: p.mean_cost() for side, p in out.ponder.items()})
    logits, costs = naive_forward(model, src, tgt)
    expected = loss_and_grads(logits, costs)

    real = tgt.ne(0)
    torch.testing.assert_close(out.logits[real], logits[real], rtol=1e-5, atol=1e-5)
    for side in taus:
        assert value(out.ponder[side].mean_cost()) == pytest.approx(value(costs[side]), rel=1e-6)
    for side, p in out.ponder.items():  # positions halt at different steps, none before min_steps
        steps = set(p.real(p.steps).tolist())
        assert len(steps) > 1 and min(steps) >= min_steps, side
        if halting == (0.3, 5.0):  # halting at step 1: R = 1, so no gradient reaches p there
            assert {1.0, 5.0} <= steps, side
    assert got.keys() == expected.keys()
    for name in ("encoder.halt.weight", "encoder.halt.bias", "decoder.halt.weight", "decoder.halt.bias"):
        assert got[name].abs().sum() > 0, name  # the halting units learn from this loss
    for name in got:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-6, msg=name)


def test_a_detached_halting_unit_is_all_the_ponder_cost_trains():
    model = model_of(ut_act(act_halt_detach="true"))
    ponder = model(torch.randint(4, V, (2, 5)), torch.randint(4, V, (2, 6))).ponder
    sum(p.mean_cost() for p in ponder.values()).backward()
    trained = {name for name, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert trained == {f"{side}.halt.{p}" for side in ("encoder", "decoder") for p in ("weight", "bias")}


def test_a_bias_of_minus_three_takes_every_step_at_initialisation():
    model = model_of(ut_act(steps=8, act_halt_bias=-3.0), halting=None)
    src = torch.randint(4, V, (4, 9))
    src[1, 4:] = 0
    tgt = torch.randint(4, V, (4, 11))
    tgt[3, 2:] = 0
    with torch.no_grad():
        ponder = model(src, tgt).ponder
    for side, p in ponder.items():
        assert (p.real(p.steps) == 8).all(), side
        assert (p.steps[p.pad] == 0).all(), side
    default = model_of(ut_act(steps=8), halting=None)  # tensor2tensor's +1: every position halts at step 2
    with torch.no_grad():
        assert all((p.real(p.steps) == 2).all() for p in default(src, tgt).ponder.values())


def test_min_steps_holds_every_position_and_weighs_the_first_steps_zero():
    model = model_of(ut_act(steps=6, act_min_steps=4, act_halt_bias=10.0), halting=None)  # p ~ 1
    with torch.no_grad():
        ponder = model(torch.randint(4, V, (2, 5)), torch.randint(4, V, (2, 6))).ponder
    for p in ponder.values():
        assert (p.steps == 4).all()
        assert (p.weights[:3] == 0).all() and torch.allclose(p.weights[3], torch.ones(2, p.steps.shape[1]))


def test_min_steps_beyond_a_stack_is_refused():
    with pytest.raises(ConfigError, match="act_min_steps"):
        ut_act(steps=4, act_min_steps=5)


def test_ponder_weights_follow_their_schedule():
    weights = PonderWeights(encoder=0.02, decoder=0.01, start=100, ramp=50)
    factors = {u: float(weights.factor(torch.tensor(u))) for u in (1, 100, 101, 125, 150, 151, 10_000)}
    assert factors == pytest.approx({1: 0.0, 100: 0.0, 101: 0.02, 125: 0.5, 150: 1.0, 151: 1.0, 10_000: 1.0})
    assert [float(PonderWeights(0.01, 0.01, start=3).factor(torch.tensor(u))) for u in (3, 4)] == [0.0, 1.0]
    assert PonderWeights(0.01, 0.01).factor(torch.tensor(1)) is None  # no schedule: nothing computed

    model = model_of(ut_act())
    ponders = model(torch.randint(4, V, (2, 5)), torch.randint(4, V, (2, 6))).ponder
    enc, dec = (value(ponders[side].mean_cost()) for side in ("encoder", "decoder"))
    assert value(weights.loss(ponders, torch.tensor(125))) == pytest.approx(0.5 * (0.02 * enc + 0.01 * dec))
    assert value(weights.loss(ponders, torch.tensor(100))) == 0.0
    same = PonderWeights(0.01, 0.01)  # one tau for both stacks: ponder_loss's value, to the bit
    assert torch.equal(same.loss(ponders, torch.tensor(7)), ponder_loss(ponders, 0.01))


def tiny_task(*overrides):
    return load_config("small", [*TINY_ACT, "train.threads=1", "train.validate_every=1000", *overrides])


def trained(tmp_path, name, *overrides):
    from transduce.train.trainer import Trainer

    cfg = tiny_task(*overrides)
    trainer = Trainer(cfg, tmp_path / name, show_progress=False)
    trainer.fit()
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def test_training_steps_without_the_ponder_cost_until_its_start(tmp_path):
    """act_tau_start=2: the first two updates are those of act_tau=0, the third is not."""
    off = trained(tmp_path, "off", "train.steps=3", "model.act_tau=0")
    late = trained(tmp_path, "late2", "train.steps=2", "model.act_tau=1", "model.act_tau_start=2")
    late3 = trained(tmp_path, "late3", "train.steps=3", "model.act_tau=1", "model.act_tau_start=2")
    off2 = trained(tmp_path, "off2", "train.steps=2", "model.act_tau=0")
    assert all(torch.equal(late[k], off2[k]) for k in off2)
    assert not torch.equal(late3["encoder.halt.bias"], off["encoder.halt.bias"])


def test_the_halting_units_learn_at_their_own_rate(tmp_path):
    """Adam's first update moves each parameter by about the rate: act_halt_lr=0.1 moves the
    halting units a tenth as far, and every other parameter as far as before."""
    base = trained(tmp_path, "base", "train.steps=1")
    slow = trained(tmp_path, "slow", "train.steps=1", "model.act_halt_lr=0.1")
    for name in ("encoder.halt.weight", "decoder.halt.weight"):  # from 0
        moved = base[name] != 0
        assert moved.sum() > 0
        ratio = slow[name][moved] / base[name][moved]
        torch.testing.assert_close(ratio, torch.full_like(ratio, 0.1), rtol=1e-4, atol=0)
    changed = {k for k in base if not torch.equal(base[k], slow[k])}
    assert changed == {f"{side}.halt.{p}" for side in ("encoder", "decoder") for p in ("weight", "bias")}


def test_validation_ponder_statistics_match_a_direct_count():
    cfg = ut_act(steps=6)
    model = model_of(cfg)
    objective = objective_for(cfg.model)
    gen = torch.Generator().manual_seed(1)
    lengths = [3, 9, 1, 6, 12, 4, 7]
    sources = [torch.randint(4, V, (n,), generator=gen).tolist() for n in lengths]
    targets = [torch.randint(4, V, (max(1, n - 1),), generator=gen).tolist() for n in lengths]
    split = Split.from_lists(sources, targets)
    dev = dev_loss(model, objective, split, max_tokens=40, smoothing=0.1, device=torch.device("cpu"))
    counted: dict[str, list[float]] = {"encoder": [], "decoder": []}
    with torch.no_grad():
        for i in range(len(split)):  # one example at a time: no padding to leave out
            out = objective.forward(model, objective.collate(split, [i]))
            for side, p in out.ponder.items():
                assert p.steps.numel() == (len(sources[i]) + 1 if side == "encoder" else len(targets[i]) + 1)
                counted[side] += p.steps.flatten().tolist()
    for side, steps in counted.items():
        assert dev.ponder[f"{side}_ponder_mean"] == pytest.approx(sum(steps) / len(steps), rel=1e-6)
        assert dev.ponder[f"{side}_ponder_max"] == max(steps)
        assert len(set(steps)) > 1  # the counts vary, so a mean over the wrong positions would show
