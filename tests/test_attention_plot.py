"""Attention heat maps: one label per row and column, each the token the model reads there."""

import pytest
from tiny_models import DIGITS, saved_checkpoint

from transduce.attention_plot import axis_labels, collect_attention, make_example, plot_attention


@pytest.mark.parametrize("target", [None, "7 8 9 1"])
def test_heat_map_labels_are_the_models_own_tokens(tmp_path, target):
    """Rows and columns are labelled with the input token at that position: the source and EOS
    for the encoder, <s> and the target for the decoder, as many labels as the weights have."""
    loaded = saved_checkpoint(tmp_path / "ck", DIGITS, seed=2)
    example = make_example(loaded, "3 1 4 1 5", target)
    weights = collect_attention(loaded.model, example)
    maps = plot_attention(weights, axis_labels(example, loaded), tmp_path / "plots")
    output = target.split() if target else [loaded.tgt_vocab.token(i) for i in example.tgt_ids]
    assert output  # the greedy output is not empty, so the decoder's labels say something
    source = ["3", "1", "4", "1", "5", "</s>"]
    decoder = ["<s>", *output]
    expected = {"encoder": (source, source), "decoder": (decoder, decoder), "cross": (decoder, source)}
    assert sorted((m.kind, m.layer) for m in maps) == [("cross", 0), ("decoder", 0), ("encoder", 0)]
    for m in maps:
        w = weights[m.kind][m.layer]  # (heads, queries, keys)
        assert (len(m.rows), len(m.cols)) == tuple(w.shape[1:])
        assert (m.rows, m.cols) == expected[m.kind]
        assert m.path.stat().st_size > 1000


def test_labels_that_do_not_fit_the_weights_are_refused(tmp_path):
    loaded = saved_checkpoint(tmp_path / "ck", DIGITS, seed=2)
    example = make_example(loaded, "3 1 4", "7 8")
    labels = axis_labels(example, loaded)
    labels["cross"] = (["<s>", *labels["cross"][0]], labels["cross"][1])  # one row label too many
    with pytest.raises(ValueError, match="cross layer 0: weights of shape"):
        plot_attention(collect_attention(loaded.model, example), labels, tmp_path / "plots")
