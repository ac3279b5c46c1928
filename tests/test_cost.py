"""`inspect` numbers equal the survey's Table 1 formulas and the model's real tensors."""

import pytest
from typer.testing import CliRunner

from transduce.cli import app
from transduce.config import load_config
from transduce.cost import cost_table, flops_per_token
from transduce.data.dataset import Dataset, Split, write_dataset
from transduce.data.vocab import SymbolVocab
from transduce.model import build_model


def test_table1_formulas_and_measured_counts():
    cfg = load_config("base").model
    model = build_model(cfg, 37000, 37000)
    d, f, m, n = 512, 2048, 20, 30
    rows = {(r.side, r.module): r for r in cost_table(cfg, m, n, model)}
    assert rows["encoder", "self-attention"].params_formula == 4 * d * d
    assert rows["encoder", "self-attention"].params_measured == 4 * d * d + 4 * d  # + biases
    assert rows["encoder", "feed-forward"].params_formula == 2 * d * f + d + f
    assert rows["encoder", "feed-forward"].params_measured == 2 * d * f + d + f
    assert rows["encoder", "layer norm"].params_formula == 2 * d
    assert rows["encoder", "layer norm"].times == 12 and rows["decoder", "layer norm"].times == 18
    assert rows["decoder", "cross-attention"].mults == 2 * n * d * d + 2 * m * d * d + 2 * m * n * d
    assert rows["encoder", "self-attention"].mults == 4 * m * d * d + 2 * m * m * d
    layer_total = sum(r.times * r.params_measured for r in rows.values())
    embeddings = 37000 * d
    assert layer_total + embeddings == sum(p.numel() for p in model.parameters())


def test_conv_transition_counts_its_depthwise_filters():
    cfg = load_config("small", ["model.transition=conv", "model.conv_kernel=5"]).model
    d, f = cfg.d_model, cfg.d_ff
    rows = {(r.side, r.module): r for r in cost_table(cfg, 7, 9, build_model(cfg, 100, 100))}
    row = rows["decoder", "conv transition"]
    assert row.params_formula == row.params_measured == 2 * d * f + d + f + 5 * d + d
    assert row.mults == 2 * 9 * d * f + 5 * 9 * d


def test_flops_per_token_sums_rows_and_output():
    cfg = load_config("small").model
    rows = cost_table(cfg, 10, 10)
    mults = sum(r.times * r.mults for r in rows) + 10 * cfg.d_model * 1000
    assert flops_per_token(cfg, 1000, 10, 10) == 2 * mults / 10


def test_inspect_cli_prints_table_and_total():
    result = CliRunner().invoke(app, ["inspect", "base"])
    assert result.exit_code == 0, result.output
    assert "63,082,496" in result.output and "cross-attention" in result.output
    bad = CliRunner().invoke(app, ["inspect", "base", "model.heads=7"])
    assert bad.exit_code == 2 and "divisible" in bad.output


def test_training_log_reports_throughput_from_the_cost_model(tmp_path):
    import torch
    from tiny import tiny_config, train_tiny

    from transduce.cost import flops_per_token
    from transduce.data.dataset import Dataset
    from transduce.train.log import Throughput, peak_flops

    row = Throughput(flops_per_token=3e9, peak=1e12).row(tokens=500, seconds=2.0)
    assert row == {"tokens_per_s": 250.0, "tflops": 0.75, "mfu": 0.75}
    assert peak_flops(torch.device("cpu"), "bf16") is None
    run = train_tiny(tmp_path / "r", 4, "train.log_every=2")
    data = Dataset(run / "data")
    measured = Throughput.for_training(
        tiny_config().model, data.splits["train"], 14, torch.device("cpu"), "fp32"
    )
    split = data.splits["train"]
    src, tgt = round(float(split.src_lengths.mean())) + 1, round(float(split.tgt_lengths.mean())) + 1
    assert measured.flops_per_token == flops_per_token(tiny_config().model, 14, src, tgt, training=True)
    assert "train/tflops=" in (run / "train.log").read_text()


@pytest.mark.parametrize("tgt_symbols", [None, 3])
def test_inspect_counts_the_parameters_of_the_model_built_for_its_dataset(tmp_path, tgt_symbols):
    """With data.dataset, inspect reads the dataset's vocabulary sizes (not 37,000): its total is
    the model training builds for that dataset, with one shared vocabulary or two of their own."""
    src = SymbolVocab([f"s{i}" for i in range(50)])
    tgt = SymbolVocab([f"t{i}" for i in range(tgt_symbols)]) if tgt_symbols else None
    split = Split.from_lists([[4, 5, 6]], [[4]])
    meta = {"hash": "-", "data_kind": "task", "task": "copy"}
    write_dataset(tmp_path / "d", {"train": split, "dev": split}, src, tgt, meta)
    overrides = [f"data.dataset={tmp_path / 'd'}", "model.tie_embeddings=none"]
    result = CliRunner().invoke(app, ["inspect", "small-fast", *overrides])
    assert result.exit_code == 0, result.output
    data = Dataset(tmp_path / "d")
    sizes = len(data.src_vocab), len(data.tgt_vocab)
    assert sizes == (len(src), len(tgt or src))
    model = build_model(load_config("small-fast", overrides).model, *sizes)
    total = sum(p.numel() for p in model.parameters())
    assert f"total parameters: {total:,} " in result.stdout
