"""Parsing as sequence-to-sequence on a generated treebank: prepare, learn, decode, score."""

from pathlib import Path

import pytest
from pcfg import Grammar, generate_treebank
from typer.testing import CliRunner

from transduce.cli import app
from transduce.config import load_config
from transduce.data.dataset import Dataset
from transduce.data.prepare import prepare_parse
from transduce.data.trees import linearise
from transduce.parsing import gold_tree

GRAMMAR = Grammar.parse((Path(__file__).parent / "data" / "toy.pcfg").read_text())


def write_treebank(directory: Path, sizes=(("train", 3000), ("dev", 150), ("test", 150))) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for seed, (name, size) in enumerate(sizes):
        trees = generate_treebank(GRAMMAR, size, seed=seed, max_words=15)
        (directory / f"{name}.trees").write_text("".join(f"{t}\n" for t in trees))
    return directory


def test_prepare_parse_writes_words_and_linearised_trees(tmp_path):
    raw = write_treebank(tmp_path / "raw", (("train", 50), ("dev", 10)))
    report = prepare_parse(raw, tmp_path / "data")
    assert report["splits"]["train"]["trees"] == 50
    data = Dataset(tmp_path / "data")
    src, tgt = data.splits["dev"].pair(0)
    gold = gold_tree(data.gold_trees("dev")[0])
    assert src.tolist() == data.src_vocab.encode(" ".join(gold.words()))
    assert data.tgt_vocab.decode(tgt.tolist()).split() == linearise(gold, words=False, tags=False)
    assert prepare_parse(raw, tmp_path / "data")["up_to_date"]
    (raw / "dev.trees").write_text("(S (NP (NN a))\n")
    with pytest.raises(ValueError, match=r"dev\.trees:1: tree not closed"):
        prepare_parse(raw, tmp_path / "data")


def test_small_model_learns_to_parse_the_generated_treebank(tmp_path):
    from transduce.train.trainer import Trainer

    raw = write_treebank(tmp_path / "raw")
    prepare_parse(raw, tmp_path / "data")
    cfg = load_config(
        "small",
        [
            f"data.dataset={tmp_path / 'data'}",
            "data.max_tokens=2048",
            "model.d_model=64",
            "model.heads=4",
            "model.d_ff=256",
            "model.encoder_layers=2",
            "model.decoder_layers=2",
            "model.dropout=0",
            "model.tie_embeddings=decoder",
            "train.steps=600",
            "train.warmup=150",
            "train.lr_scale=0.5",
            "train.validate_every=600",
            "train.save_every=600",
            "train.threads=1",
            "decode.max_len_a=3",
            "decode.max_len_b=10",
        ],
    )
    metrics = Trainer(cfg, tmp_path / "run", show_progress=False).fit()
    # The targets hide the words (XX), so the model must count them; when it gets that right
    # depends on the seed and on float rounding: over 15 runs of this setting (seeds 1-4, 600
    # and 900 steps, two loss implementations) dev F1 ranged 0.78-0.98. The bar sits below
    # that spread and above the 0.40 and 0.51 the same model scores after 50 and 150 steps.
    assert metrics["dev_f1"] >= 0.70, metrics

    runner = CliRunner()
    sentence = "the dog near the cat saw Mary ."
    out = runner.invoke(app, ["translate", str(tmp_path / "run"), "--greedy"], input=sentence + "\n")
    assert out.exit_code == 0, out.output
    assert out.stdout.strip().startswith("(S ") and "(NP" in out.stdout
    scored = runner.invoke(
        app, ["evaluate", str(tmp_path / "run"), "--trees", str(raw / "test.trees"), "--greedy"]
    )
    assert scored.exit_code == 0, scored.output
    f1 = float(scored.stdout.split("F1 ")[1].split()[0])
    assert f1 >= 70.0, scored.stdout


def test_cli_and_server_print_the_same_trees_for_a_parser(tmp_path):
    """One decoding path: a parsing model served over HTTP answers bracketed trees, the same as
    `translate` prints, each over exactly the input's words."""
    from fastapi.testclient import TestClient
    from tiny import train_tiny

    from transduce.serve import create_app
    from transduce.store.load import load_model

    raw = write_treebank(tmp_path / "raw", (("train", 60), ("dev", 5)))
    prepare_parse(raw, tmp_path / "data")
    run = train_tiny(
        tmp_path / "run",
        2,
        f"data.dataset={tmp_path / 'data'}",
        "data.task=null",
        "model.tie_embeddings=decoder",
    )
    sentences = ["the dog saw a cat", "a cat ran"]
    cli = CliRunner().invoke(app, ["translate", str(run), "--greedy"], input="\n".join(sentences) + "\n")
    assert cli.exit_code == 0, cli.output
    with TestClient(create_app(load_model(run))) as client:
        answer = client.post("/translate", json={"segments": sentences, "beam": 1})
    served = [t["text"] for t in answer.json()["translations"]]
    assert served == cli.stdout.splitlines()
    for line, words in zip(served, sentences, strict=True):
        assert gold_tree(line).words() == words.split()
