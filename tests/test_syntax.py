"""Tree distances against breadth-first search; syntax masks; factored input embeddings."""

import random
from collections import deque
from pathlib import Path

import numpy as np
import pytest
import torch
from pcfg import Grammar, generate_treebank

from transduce.config import load_config
from transduce.data.syntax import (
    UNRELATED,
    constituency_omega,
    dependency_omega,
    expand_to_pieces,
    read_conllu,
    with_eos,
)
from transduce.data.trees import Tree, TreeError
from transduce.model import build_model
from transduce.model.attention import record_attention
from transduce.model.syntax import SyntaxMasks, hard_mask, inverse_mask, standard_mask


def bfs_distances(edges: dict[int, set[int]], nodes: list[int]) -> np.ndarray:
    out = np.zeros((len(nodes), len(nodes)), dtype=np.int64)
    for a, start in enumerate(nodes):
        seen = {start: 0}
        queue = deque([start])
        while queue:
            here = queue.popleft()
            for nxt in edges[here]:
                if nxt not in seen:
                    seen[nxt] = seen[here] + 1
                    queue.append(nxt)
        out[a] = [seen[n] for n in nodes]
    return out


def random_heads(rng: random.Random, n: int) -> list[int]:
    """A random dependency tree: word i's head is an earlier-placed word (or 0 for the root)."""
    order = list(range(1, n + 1))
    rng.shuffle(order)
    heads = [0] * n
    for k, word in enumerate(order[1:], 1):
        heads[word - 1] = rng.choice(order[:k])
    return heads


def test_dependency_omega_equals_bfs_on_random_trees():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 25)
        heads = random_heads(rng, n)
        edges = {i: set() for i in range(n)}
        for i, h in enumerate(heads):
            if h:
                edges[i].add(h - 1)
                edges[h - 1].add(i)
        assert np.array_equal(dependency_omega(heads), bfs_distances(edges, list(range(n))))


def tree_graph(tree: Tree) -> tuple[dict[int, set[int]], list[int]]:
    """Undirected edges over all nodes (constituents and words) and the word nodes in order."""
    edges: dict[int, set[int]] = {}
    leaves: list[int] = []

    def walk(node: Tree | str, parent: int | None) -> None:
        me = len(edges)
        edges[me] = set()
        if parent is not None:
            edges[me].add(parent)
            edges[parent].add(me)
        if isinstance(node, str):
            leaves.append(me)
            return
        for child in node.children:
            walk(child, me)

    walk(tree, None)
    return edges, leaves


def test_constituency_omega_equals_bfs_between_leaves():
    grammar = Grammar.parse((Path(__file__).parent / "data" / "toy.pcfg").read_text())
    for tree in generate_treebank(grammar, 100, seed=5):
        edges, leaves = tree_graph(tree)
        assert np.array_equal(constituency_omega(tree), bfs_distances(edges, leaves))


def test_subwords_share_distances_and_eos_is_unrelated():
    omega = dependency_omega([2, 0, 2])  # a <- b -> c
    pieces = expand_to_pieces(omega, [0, 0, 1, 2, 2])
    assert pieces[0, 1] == 0 and pieces[0, 2] == 1 and pieces[1, 4] == 2
    full = with_eos(pieces)
    assert full[-1, -1] == 0 and (full[-1, :-1] == UNRELATED).all() and (full[:-1, -1] == UNRELATED).all()


def test_conllu_reading_and_errors(tmp_path):
    path = tmp_path / "x.conllu"
    rows = [
        "# text = It works",
        "1\tIt\tit\tPRON\t_\t_\t2\tnsubj\t_\t_",
        "1-2\tItworks\t_\t_\t_\t_\t_\t_\t_\t_",
        "2\tworks\twork\tVERB\t_\t_\t0\troot\t_\t_",
        "",
        "1\tGo\tgo\tVERB\t_\t_\t0\troot\t_\t_",
    ]
    path.write_text("\n".join(rows) + "\n")
    assert read_conllu(path) == [(["It", "works"], [2, 0]), (["Go"], [0])]
    path.write_text("1\tIt\tit\n")
    with pytest.raises(TreeError, match=r"x\.conllu:1: expected 10"):
        read_conllu(path)
    with pytest.raises(TreeError, match="points to itself"):
        dependency_omega([1])
    with pytest.raises(TreeError, match="cycle"):
        dependency_omega([2, 1])


def test_soft_masks_lie_in_unit_interval_and_decrease_with_distance():
    rng = random.Random(1)
    omega = torch.tensor(dependency_omega(random_heads(rng, 12)))
    for mask in (standard_mask(omega), inverse_mask(omega)):
        assert mask.min() >= 0 and mask.max() <= 1
        for i in range(12):
            order = torch.argsort(omega[i])
            values = mask[i][order]
            assert (values[1:] <= values[:-1] + 1e-7).all()  # non-increasing as omega grows
            closer, farther = omega[i].argmin(), omega[i].argmax()
            assert mask[i, closer] > mask[i, farther]
    assert torch.allclose(inverse_mask(omega).sum(-1), torch.ones(12))


def syntax_model(kind, apply="multiplicative", layers=None, heads=None):
    overrides = [
        "model.d_model=32",
        "model.heads=4",
        "model.d_ff=64",
        "model.encoder_layers=2",
        "model.decoder_layers=1",
        "model.dropout=0",
        f"model.syntax_mask={kind}",
        f"model.syntax_apply={apply}",
        "model.omega_max=1",
    ]
    if layers is not None:
        overrides.append(f"model.syntax_layers={layers}")
    if heads is not None:
        overrides.append(f"model.syntax_heads={heads}")
    torch.manual_seed(0)
    return build_model(load_config("small", overrides).model, 30, 30).eval()


def test_hard_mask_gives_exactly_zero_weight_beyond_omega_max():
    rng = random.Random(2)
    heads = random_heads(rng, 9)
    omega = torch.tensor(with_eos(dependency_omega(heads)))[None]
    model = syntax_model("hard", layers=[1], heads=[0, 2])
    src = torch.randint(4, 30, (1, 10))
    with torch.no_grad(), record_attention(model) as records:
        model.encode(src, syntax=omega)
    blocked = omega[0] > 1
    weights = records["encoder.layers.1.self_attn"][0][0]  # (heads, m, m)
    assert blocked.any()
    for h in (0, 2):
        assert (weights[h][blocked] == 0).all() and (weights[h][~blocked] > 0).all()
    assert (weights[1][blocked] > 0).all()  # an unmasked head
    assert (records["encoder.layers.0.self_attn"][0][0][:, blocked] > 0).all()  # an unmasked layer
    assert torch.equal(hard_mask(omega, 1)[0] == 0, ~blocked)


@pytest.mark.parametrize("apply", ["additive", "multiplicative"])
def test_soft_masks_change_scores_as_eq_53_and_54(apply):
    model = syntax_model("inverse", apply=apply)
    omega = torch.tensor(with_eos(dependency_omega([0, 1, 1, 3])))[None]
    src = torch.randint(4, 30, (1, 5))
    x = model.src_embed(src)
    attn = model.encoder.layers[0].self_attn
    q, k, _ = (attn._split(t) for t in attn.in_proj(x).chunk(3, dim=-1))
    scores = q @ k.transpose(-2, -1) / (attn.d_head**0.5)
    m = inverse_mask(omega)[:, None]
    expected = (scores + m if apply == "additive" else scores * m).softmax(-1)
    with torch.no_grad(), record_attention(model) as records:
        model.encode(src, syntax=omega)
    assert (records["encoder.layers.0.self_attn"][0] - expected).abs().max() < 1e-5


def test_syntax_model_needs_trees_and_config_checks_ranges():
    model = syntax_model("hard")
    with pytest.raises(ValueError, match="source trees"):
        model.encode(torch.randint(4, 30, (1, 5)))
    with pytest.raises(ValueError, match=r"syntax_heads.*allowed: 0\.\.3"):
        load_config("small", ["model.heads=4", "model.syntax_heads=[4]"])
    masks = SyntaxMasks(
        kind="given", apply="multiplicative", omega_max=1, layers=None, heads=None, num_heads=4
    )
    given = torch.rand(1, 3, 3)
    add, mul = masks.per_layer(given, 2)
    assert add == [None, None] and torch.equal(mul[1][0, 0], given[0])


@pytest.mark.parametrize("combine", ["sum", "ffn1", "ffn2"])
def test_factored_embeddings(combine):
    cfg = load_config("small", ["model.d_model=16", "model.heads=2", f"model.factor_combine={combine}"]).model
    torch.manual_seed(0)
    model = build_model(cfg, 20, 20, factor_vocabs=[7, 5]).eval()
    emb = model.src_embed
    ids = torch.randint(4, 20, (2, 6))
    tags = torch.stack([torch.randint(4, 7, (2, 6)), torch.randint(4, 5, (2, 6))], 1)
    got = emb(ids, factors=tags)
    scale = 16**0.5
    word = emb.tokens(ids) * scale
    parts = [emb.factors[k](tags[:, k]) * scale for k in range(2)]
    combined = word + parts[0] + parts[1] if combine == "sum" else emb.combine(torch.cat([word, *parts], -1))
    assert (got - (combined + emb.positions(6))).abs().max() < 1e-5
    other = tags.clone()
    other[:, 0] = 4 + (other[:, 0] - 3) % 3
    assert (emb(ids, factors=other) - got).abs().max() > 1e-3  # tags matter
    with pytest.raises(ValueError, match="2 tag factor"):
        emb(ids)
