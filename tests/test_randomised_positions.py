"""Position randomisation in training (offset, subset): which positions the model really adds,
recovered from its activations with the sinusoid formula; evaluation unchanged, or spread per
sentence (position_eval='spread'); seeded runs equal."""

import math

import pytest
import torch
from safetensors.torch import load_file
from tiny import tiny_config

from transduce.config import ConfigError, ModelConfig, check_positions, load_config
from transduce.model import build_model
from transduce.model.randomised_positions import PositionRandomisation
from transduce.store.checkpoint import step_checkpoints
from transduce.train.trainer import Trainer

V, D = 16, 32
SIZES = ["model.d_model=32", "model.heads=4", "model.d_ff=64", "model.dropout=0"]


def model_with(arch: str, mode: str, *extra: str, seed: int = 0) -> torch.nn.Module:
    overrides = [
        *SIZES,
        f"model.arch={arch}",
        f"model.position_randomisation={mode}",
        "model.position_range=300",
        "model.encoder_layers=2",
        "model.decoder_layers=2",
        "model.encoder_steps=3",
        "model.decoder_steps=2",
        *extra,
    ]
    torch.manual_seed(seed)
    return build_model(load_config("small", overrides).model, V, V)


def formula_table(limit: int, d: int = D) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), written out with math."""
    rows = []
    for pos in range(limit):
        row = []
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows)


TABLE = formula_table(450)


def recovered(signal: torch.Tensor) -> list[int]:
    """The positions whose encodings `signal` (n, d) holds, each matched exactly in the table."""
    distance = torch.cdist(signal.double(), TABLE.double())
    best = distance.min(dim=1)
    assert best.values.max() < 1e-4, "the signal is not a sinusoid position encoding"
    return best.indices.tolist()


def src_tgt(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, V, (2, 9), generator=g), torch.randint(4, V, (2, 6), generator=g)


def transformer_positions(model, src, tgt) -> dict[str, list[int]]:
    """Positions the Transformer's source and target embeddings added, for the first example."""
    seen, handles = {}, []
    for side, embed, ids in (("encoder", model.src_embed, src), ("decoder", model.tgt_embed, tgt)):

        def hook(module, args, out, side=side, ids=ids):
            seen[side] = recovered(out[0] - module.tokens.weight[ids[0]] * math.sqrt(D))

        handles.append(embed.register_forward_hook(hook))
    model(src, tgt)
    for handle in handles:
        handle.remove()
    return seen


def ut_positions(model, src, tgt) -> dict[str, list[list[int]]]:
    """Per stack and step, the positions in P^t = PE(pos) + PE(t) that the shared layer received:
    step t's input minus the state it started from minus PE(t) (no ACT: the state is the previous
    step's output, at step 1 the token embedding)."""
    seen: dict[str, list[list[int]]] = {"encoder": [], "decoder": []}
    handles = []
    for side, stack, embed, ids in (
        ("encoder", model.encoder, model.src_embed, src),
        ("decoder", model.decoder, model.tgt_embed, tgt),
    ):
        previous = [embed.tokens.weight[ids[0]] * math.sqrt(D)]

        def pre(module, args, side=side, previous=previous):
            step = len(seen[side]) + 1
            coordinates = args[0][0] - previous[-1]
            seen[side].append(recovered(coordinates - TABLE[step].float()))

        def post(module, args, out, previous=previous):
            previous.append(out[0])

        handles.append(stack.layer.register_forward_pre_hook(pre))
        handles.append(stack.layer.register_forward_hook(post))
    model(src, tgt)
    for handle in handles:
        handle.remove()
    return seen


@pytest.mark.parametrize("arch", ["transformer", "universal"])
@pytest.mark.parametrize("mode", ["offset", "offset_range", "subset"])
def test_evaluation_is_unchanged_by_randomisation(arch, mode):
    src, tgt = src_tgt()
    plain = model_with(arch, "none").eval()
    randomised = model_with(arch, mode).eval()  # same seed: the same weights
    with torch.no_grad():
        expected = plain(src, tgt).logits
        assert torch.equal(randomised(src, tgt).logits, expected)
        torch.manual_seed(123)  # another RNG state changes nothing in eval mode
        assert torch.equal(randomised(src, tgt).logits, expected)


def test_evaluation_positions_are_zero_to_n_minus_one():
    src, tgt = src_tgt()
    model = model_with("transformer", "offset").eval()
    assert transformer_positions(model, src, tgt) == {"encoder": list(range(9)), "decoder": list(range(6))}
    ut = model_with("universal", "subset").eval()
    seen = ut_positions(ut, src, tgt)
    assert seen == {"encoder": [list(range(9))] * 3, "decoder": [list(range(6))] * 2}


@pytest.mark.parametrize("draw", ["shared", "per_stack"])
def test_transformer_offset_positions_in_training(draw):
    src, tgt = src_tgt()
    model = model_with("transformer", "offset", f"model.position_draw={draw}").train()
    starts = {"encoder": set(), "decoder": set()}
    for seed in range(60):
        torch.manual_seed(seed)
        seen = transformer_positions(model, src, tgt)
        torch.manual_seed(seed)
        # the first draw from the seeded stream: the pass's (shared) or the encoder's (per stack)
        first = int(torch.randint(9, ()))
        assert seen["encoder"] == list(range(first, first + 9))
        for side, n in (("encoder", 9), ("decoder", 6)):
            start = seen[side][0]
            drawn_for = 9 if draw == "shared" else n  # shared: drawn for the longer side
            assert seen[side] == list(range(start, start + n)) and 0 <= start < drawn_for
            starts[side].add(start)
        if draw == "shared":  # one offset for the pass, drawn for the longer side
            assert seen["decoder"] == seen["encoder"][:6]
    expected = set(range(9)) if draw == "shared" else set(range(6))  # uniform over [0, n)
    assert starts == {"encoder": set(range(9)), "decoder": expected}


@pytest.mark.parametrize("draw", ["shared", "per_stack"])
def test_transformer_subset_positions_in_training(draw):
    src, tgt = src_tgt()
    model = model_with("transformer", "subset", f"model.position_draw={draw}").train()
    decoders = set()
    for seed in range(10):
        torch.manual_seed(seed)
        seen = transformer_positions(model, src, tgt)
        torch.manual_seed(seed)
        expected = sorted(torch.randperm(300)[:9].tolist())
        assert seen["encoder"] == expected
        for side, n in (("encoder", 9), ("decoder", 6)):
            positions = seen[side]
            assert len(positions) == n and positions == sorted(set(positions))  # sorted, distinct
            assert positions[0] >= 0 and positions[-1] < 300
        assert (seen["decoder"] == expected[:6]) == (draw == "shared")
        decoders.add(tuple(seen["decoder"]))
    assert len(decoders) == 10  # a new draw every pass
    assert max(seen["encoder"]) > 9  # reaches beyond the sequence's own length


@pytest.mark.parametrize("draw", ["shared", "per_stack"])
@pytest.mark.parametrize("mode", ["offset", "offset_range", "subset"])
def test_universal_randomises_the_position_part_of_every_step(mode, draw):
    src, tgt = src_tgt()
    model = model_with("universal", mode, f"model.position_draw={draw}").train()
    for seed in range(5):
        torch.manual_seed(seed)
        seen = ut_positions(model, src, tgt)
        for side, n, steps in (("encoder", 9, 3), ("decoder", 6, 2)):
            per_step = seen[side]
            assert len(per_step) == steps and all(p == per_step[0] for p in per_step)  # drawn once per pass
            positions = per_step[0]
            if mode == "offset":
                start = positions[0]  # shared: drawn for the longer side, the source's 9
                assert positions == list(range(start, start + n)) and start < (9 if draw == "shared" else n)
            elif mode == "offset_range":
                start = positions[0]
                assert positions == list(range(start, start + n)) and start + n <= 300
            else:
                assert positions == sorted(set(positions)) and len(positions) == n and positions[-1] < 300
        torch.manual_seed(seed)
        if mode == "offset":
            first = int(torch.randint(9, ()))
            assert seen["encoder"][0] == list(range(first, first + 9))
        elif mode == "offset_range":
            first = int(torch.randint(300 - 9 + 1, ()))
            assert seen["encoder"][0] == list(range(first, first + 9))
        else:
            assert seen["encoder"][0] == sorted(torch.randperm(300)[:9].tolist())
        assert (seen["decoder"][0] == seen["encoder"][0][:6]) == (draw == "shared")


def test_universal_per_step_draws_a_new_offset_at_every_step():
    """tensor2tensor's `step_preprocess`: each recurrent step of each stack its own offset in
    [0, n), drawn from the seeded stream in step order, encoder first."""
    src, tgt = src_tgt()
    model = model_with("universal", "offset", "model.position_draw=per_step").train()
    starts: dict[tuple[str, int], set[int]] = {}
    for seed in range(40):
        torch.manual_seed(seed)
        seen = ut_positions(model, src, tgt)
        torch.manual_seed(seed)
        encoder = [int(torch.randint(9, ())) for _ in range(3)]
        expected = encoder + [int(torch.randint(6, ())) for _ in range(2)]
        got = [steps[0] for side in ("encoder", "decoder") for steps in seen[side]]
        assert got == expected
        for side, n in (("encoder", 9), ("decoder", 6)):
            for t, positions in enumerate(seen[side]):
                assert positions == list(range(positions[0], positions[0] + n))
                starts.setdefault((side, t), set()).add(positions[0])
    assert all(len(s) > 1 for s in starts.values())  # every step draws, not only the first
    dense = {"encoder": [list(range(9))] * 3, "decoder": [list(range(6))] * 2}
    assert ut_positions(model.eval(), src, tgt) == dense  # evaluation: 0..n-1 at every step


@pytest.mark.parametrize("arch", ["transformer", "universal"])
def test_seeded_training_passes_agree(arch):
    src, tgt = src_tgt()
    model = model_with(arch, "offset", "model.dropout=0.1").train()
    outputs = []
    for seed in (5, 5, 6):
        torch.manual_seed(seed)
        outputs.append(model(src, tgt).logits)
    assert torch.equal(outputs[0], outputs[1])
    assert not torch.equal(outputs[0], outputs[2])


def test_learned_positions_take_the_drawn_rows():
    src, tgt = src_tgt()
    model = model_with("transformer", "offset", "model.positions=learned", "model.max_positions=20").train()
    torch.manual_seed(3)
    start = int(torch.randint(9, ()))
    torch.manual_seed(3)
    embedded = []
    handle = model.src_embed.register_forward_hook(lambda module, args, out: embedded.append(out))
    model(src, tgt)  # the pass draws its positions (for the longer side, the source) and passes them down
    handle.remove()
    out = embedded[0]
    expected = (
        model.src_embed.tokens.weight[src[0]] * math.sqrt(D)
        + model.src_embed.positions.weight[start : start + 9]
    )
    assert torch.allclose(out[0], expected, atol=1e-6)


def test_draws_have_the_documented_shape():
    offsets = PositionRandomisation("offset")
    starts = set()
    for _ in range(200):
        positions = offsets.draw(5)
        assert positions.tolist() == list(range(int(positions[0]), int(positions[0]) + 5))
        starts.add(int(positions[0]))
    assert starts == set(range(5))
    subset = PositionRandomisation("subset", 50)
    covered = set()
    for _ in range(50):
        positions = subset.draw(40).tolist()
        assert positions == sorted(set(positions)) and len(positions) == 40
        assert positions[0] >= 0 and positions[-1] < 50
        covered.update(positions)
    assert covered == set(range(50))
    ranged = PositionRandomisation("offset_range", 12)
    starts = set()
    for _ in range(300):
        positions = ranged.draw(5)
        assert positions.tolist() == list(range(int(positions[0]), int(positions[0]) + 5))
        starts.add(int(positions[0]))
    assert starts == set(range(8))  # k in [0, 12 - 5]: every position below 12, none beyond
    assert PositionRandomisation().draw(5) is None
    for mode in ("subset", "offset_range"):
        with pytest.raises(ValueError, match=r"position_range=50; allowed: model\.position_range >= 51"):
            PositionRandomisation(mode, 50).draw(51)


SPREAD = ("model.position_eval=spread",)


def padded_src_tgt() -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Two sources of 9 and 6 real tokens (the second padded with id 0) and their strides."""
    src, tgt = src_tgt()
    src[1, 6:] = 0
    return src, tgt, [300 // 9, 300 // 6]


def test_spread_evaluation_positions_per_sentence():
    src, tgt, strides = padded_src_tgt()
    model = model_with("transformer", "subset", *SPREAD).eval()
    for row, stride in enumerate(strides):
        seen = transformer_positions(model, src[row:].roll(row, 0), tgt[row:].roll(row, 0))
        assert seen == {
            "encoder": [i * stride for i in range(9)],  # padding rows follow the stride too
            "decoder": [i * stride for i in range(6)],  # the source's stride
        }
    ut = model_with("universal", "subset", *SPREAD).eval()
    seen = ut_positions(ut, src[1:], tgt[1:])
    assert seen == {"encoder": [[i * 50 for i in range(9)]] * 3, "decoder": [[i * 50 for i in range(6)]] * 2}


@pytest.mark.parametrize("arch", ["transformer", "universal"])
def test_spread_decoding_matches_teacher_forcing_and_ignores_the_batch(arch):
    """Step-by-step decoding with the cache takes positions t * stride as the full pass does, and
    a sentence gets the same outputs alone as beside a longer one."""
    src, tgt, _ = padded_src_tgt()
    model = model_with(arch, "subset", *SPREAD).eval()
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory)
        cache = model.new_cache()
        steps = torch.cat([model.decode(tgt[:, t : t + 1], memory, cache) for t in range(6)], dim=1)
        assert torch.allclose(steps, full, atol=1e-5)
        alone = model.decode(tgt[1:], model.encode(src[1:, :6]))
        assert torch.allclose(alone, full[1:], atol=1e-5)
        dense = model_with(arch, "subset").eval()
        assert not torch.allclose(dense.decode(tgt, dense.encode(src)), full, atol=1e-3)
        assert torch.equal(model(src, tgt).logits, full)  # teacher-forced evaluation spreads too


@pytest.mark.parametrize("arch", ["transformer", "universal"])
def test_spread_beam_search_over_a_batch_equals_each_sentence_alone(arch):
    """Beam search keeps one encoder row per source for its k beams (`group_queries`): every beam
    takes its own source's stride, so each sentence gets what it gets decoded alone."""
    from transduce.decode.beam import beam_search

    src, _, _ = padded_src_tgt()  # sources of 9 and 6 real tokens: strides 33 and 50
    model = model_with(arch, "subset", *SPREAD).eval()
    options = {"beam": 3, "nbest": 3, "max_len_a": 0.0, "max_len_b": 7}
    together = beam_search(model, src, **options)
    for row, length in ((0, 9), (1, 6)):
        (alone,) = beam_search(model, src[row : row + 1, :length], **options)
        assert [h.tokens for h in together[row]] == [h.tokens for h in alone]
        assert [h.log_prob for h in together[row]] == pytest.approx([h.log_prob for h in alone], abs=1e-4)


def test_spread_strides_come_from_the_range_and_the_length():
    spread = PositionRandomisation("subset", 300, evaluation="spread")
    lengths = [9, 6, 300, 1000, 0]
    pad = torch.arange(1000)[None, :] >= torch.tensor(lengths)[:, None]  # True at padding
    assert spread.evaluation_strides(pad).tolist() == [33, 50, 1, 1, 300]
    assert PositionRandomisation("subset", 300).evaluation_strides(pad) is None
    with pytest.raises(ValueError, match="unknown evaluation positions 'sparse'; allowed: dense, spread"):
        PositionRandomisation("subset", evaluation="sparse")


@pytest.mark.parametrize(
    "overrides",
    [
        ["model.position_randomisation=offset"],
        ["model.position_randomisation=none"],
        ["model.position_randomisation=subset", "model.positions=learned", "model.position_range=1024"],
        ["model.position_randomisation=subset", "model.kind=decoder"],
    ],
)
def test_config_refuses_spread_without_its_training(overrides):
    with pytest.raises(
        ConfigError, match=r"model\.position_eval='spread' .* allowed here: model\.position_eval=dense"
    ):
        load_config("small", [*overrides, *SPREAD])


def test_config_validates_randomisation_against_the_positions():
    with pytest.raises(ConfigError, match=r"model\.position_randomisation: Input should be 'none', 'offset'"):
        load_config("small", ["model.position_randomisation=shift"])
    learned = ["model.positions=learned", "model.position_randomisation=subset", "model.max_positions=1024"]
    with pytest.raises(
        ConfigError, match=r"model\.position_range \(2048\) must not exceed model\.max_positions"
    ):
        load_config("small", learned)
    load_config("small", [*learned, "model.position_range=1024"])
    load_config("small", [*learned, "model.arch=universal"])  # a UT has no learned table
    offset = ModelConfig(positions="learned", max_positions=99, position_randomisation="offset")
    check_positions(offset, 50, "data")  # positions 0..98 at most
    with pytest.raises(ConfigError, match=r"shifted by model\.position_randomisation='offset', needing 101"):
        check_positions(offset, 51, "data")
    subset = ModelConfig(position_randomisation="subset", position_range=60)
    check_positions(subset, 60, "data")
    ranged = ModelConfig(position_randomisation="offset_range", position_range=60)
    check_positions(ranged, 60, "data")
    with pytest.raises(ConfigError, match=r"'offset_range' draws them from model\.position_range=60"):
        check_positions(ranged, 61, "data")
    check_positions(ranged, 401, "data", trained=60)  # evaluation takes 0..n-1: only training is drawn
    check_positions(offset, 99, "data", trained=50)  # trained shifted to 98, evaluated up to 98
    with pytest.raises(ConfigError, match=r"needing 101"):
        check_positions(offset, 101, "data", trained=10)  # a long test split needs the table too
    with pytest.raises(ConfigError, match=r"sequences of 61 .* model\.position_range=60"):
        check_positions(subset, 61, "data")


def test_seeded_training_runs_agree_and_resume_exactly(tmp_path):
    def weights(run):
        return load_file(str(step_checkpoints(run / "checkpoints")[-1] / "model.safetensors"))

    def fit(run, mode, steps, resume=False):
        cfg = tiny_config(f"model.position_randomisation={mode}", "train.steps=6", "train.save_every=3")
        cfg.train.steps = steps
        Trainer(cfg, tmp_path / run, show_progress=False).fit(resume=resume)
        return weights(tmp_path / run)

    first, second = fit("a", "subset", 6), fit("b", "subset", 6)
    assert all(torch.equal(first[k], second[k]) for k in first)
    fit("c", "subset", 3)
    resumed = fit("c", "subset", 6, resume=True)
    assert all(torch.equal(first[k], resumed[k]) for k in first)
    plain = fit("d", "none", 6)
    assert not all(torch.equal(first[k], plain[k]) for k in first)
