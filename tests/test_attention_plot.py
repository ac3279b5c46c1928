"""Attention heat maps: one label per row and column; a decoder row is the token written at that
step (as the server's /attention labels it), a column the token read there."""

import httpx
import pytest
import torch
from serving import Server
from tiny_models import DIGITS, saved_checkpoint
from typer.testing import CliRunner

from transduce import attention_plot
from transduce.attention_plot import axis_labels, collect_attention, make_example, plot_attention
from transduce.cli import app as cli
from transduce.serve import create_app


@pytest.mark.parametrize("target", [None, "7 8 9 1"])
def test_heat_map_labels_are_the_models_own_tokens(tmp_path, target):
    """Columns are the tokens read: the source and EOS for the encoder, <s> and the target for
    the decoder; decoder rows are the tokens written: the target and EOS; as many labels as the
    weights have."""
    loaded = saved_checkpoint(tmp_path / "ck", DIGITS, seed=2)
    example = make_example(loaded, "3 1 4 1 5", target)
    weights = collect_attention(loaded.model, example)
    maps = plot_attention(weights, axis_labels(example, loaded), tmp_path / "plots")
    output = target.split() if target else [loaded.tgt_vocab.token(i) for i in example.tgt_ids]
    assert output  # the greedy output is not empty, so the decoder's labels say something
    source = ["3", "1", "4", "1", "5", "</s>"]
    read, written = ["<s>", *output], [*output, "</s>"]
    expected = {"encoder": (source, source), "decoder": (written, read), "cross": (written, source)}
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


@pytest.mark.parametrize("layer", [0, -1])
def test_each_decoder_row_is_the_token_written_at_that_step(tmp_path, layer):
    """The row labelled with target token k has not read it yet and the next row has: changing
    token k leaves the cross-attention of rows 0..k as it was and changes row k + 1."""
    loaded = saved_checkpoint(tmp_path / "ck", DIGITS, seed=2, overrides=["model.decoder_layers=2"])
    target = ["7", "8", "9", "1"]

    def cross_map(tokens):
        example = make_example(loaded, "3 1 4 1 5", " ".join(tokens))
        rows, _ = axis_labels(example, loaded)["cross"]
        return rows, collect_attention(loaded.model, example)["cross"][layer]  # (heads, rows, cols)

    _, before = cross_map(target)
    for k in range(len(target)):
        changed = [*target[:k], "2", *target[k + 1 :]]
        rows, after = cross_map(changed)
        assert rows == [*changed, "</s>"]
        assert torch.allclose(after[:, : k + 1], before[:, : k + 1], atol=1e-7)
        assert not torch.allclose(after[:, k + 1], before[:, k + 1], atol=1e-4)


def test_cli_and_server_label_and_fill_the_same_rows(tmp_path, monkeypatch):
    """`transduce attention` given the translation /attention made of the same source draws the
    server's map: the same row and column labels and the same last-layer cross weights."""
    loaded = saved_checkpoint(tmp_path / "ck", DIGITS, seed=2)
    with Server(create_app(loaded)) as server:
        served = httpx.post(f"{server.url}/attention", json={"segment": "3 1 4 1 5"}, timeout=60).json()
    assert served["text"]  # a map of an empty translation would leave only EOS to compare
    drawn = []

    def recording(weights, labels, out_dir, *args):
        drawn.append((weights, labels))
        return plot_attention(weights, labels, out_dir, *args)

    monkeypatch.setattr(attention_plot, "plot_attention", recording)
    result = CliRunner().invoke(
        cli, ["attention", str(tmp_path / "ck"), "3 1 4 1 5", served["text"], "-o", str(tmp_path / "p")]
    )
    assert result.exit_code == 0, result.output
    ((weights, labels),) = drawn
    assert labels["cross"] == (served["target"], served["source"])
    assert served["target"] == [*served["text"].split(), "</s>"]
    cross = weights["cross"][-1].mean(0)
    assert torch.allclose(cross, torch.tensor(served["weights"]), atol=1e-6)
