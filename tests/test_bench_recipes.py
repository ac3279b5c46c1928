"""The MT recipes' Universal Transformer changes: a shared layer at the Transformer's depth costs
its FLOPs with fewer parameters (issue 48's translation comparison at equal compute)."""

from __future__ import annotations

from bench.mt.recipes import model_size, recipe
from transduce.config import load_config


def _size(name: str) -> dict:
    chosen = recipe(name)
    return model_size(load_config(chosen.preset, list(chosen.overrides)).model, 4000, 4000)


def test_a_shared_layer_at_the_same_depth_costs_the_same_flops_with_fewer_parameters():
    transformer, ut, ut4, act4 = (
        _size(n) for n in ("small-fast", "small-fast+ut", "small-fast+ut4", "small-fast+act4")
    )
    assert ut["forward_flops_per_token"] == transformer["forward_flops_per_token"]
    assert ut["params"] < transformer["params"]
    assert ut4["params"] == ut["params"]
    output = transformer["forward_flops_per_token"] - 2 * 128 * 4000  # the layers' part, not the output's
    assert ut4["forward_flops_per_token"] - 2 * 128 * 4000 == 2 * output
    assert act4["forward_flops_per_token"] == ut4["forward_flops_per_token"]  # counted at the cap
    assert act4["params"] > ut4["params"]  # the halting units


def test_actmin2_makes_act_take_two_steps_before_it_may_halt():
    chosen = recipe("small-fast+act4+actmin2")
    model = load_config(chosen.preset, list(chosen.overrides)).model
    assert (model.act, model.act_min_steps, model.encoder_steps) == (True, 2, 4)
    plain = recipe("small-fast+act4")
    assert load_config(plain.preset, list(plain.overrides)).model.act_min_steps == 1


def test_ff1408_gives_the_shared_layer_the_transformers_parameters_at_more_flops():
    transformer, ut, wide = (_size(n) for n in ("small-fast", "small-fast+ut", "small-fast+ut+ff1408"))
    assert abs(wide["params"] - transformer["params"]) < 0.01 * transformer["params"]
    assert ut["params"] < 0.7 * transformer["params"]
    assert wide["forward_flops_per_token"] > 1.5 * transformer["forward_flops_per_token"]
