"""Tree-to-string, factored and syntax-annotated sources: prepare, train, translate end to end."""

from pathlib import Path

import numpy as np
import pytest
import torch
from pcfg import Grammar, generate_treebank
from typer.testing import CliRunner

from transduce.cli import app
from transduce.config import load_config
from transduce.data.dataset import Dataset
from transduce.data.prepare import PrepareOptions, prepare_text
from transduce.data.source import SourceFormat
from transduce.data.syntax import constituency_omega, dependency_omega, expand_to_pieces
from transduce.data.trees import linearise
from transduce.train.trainer import Trainer

GRAMMAR = Grammar.parse((Path(__file__).parent / "data" / "toy.pcfg").read_text())
TINY = [
    "model.d_model=32",
    "model.heads=4",
    "model.d_ff=64",
    "model.encoder_layers=2",
    "model.decoder_layers=1",
    "model.tie_embeddings=none",
    "data.max_tokens=2000",
    "train.steps=4",
    "train.save_every=4",
    "train.validate_every=4",
    "train.warmup=2",
]


def write_pairs(folder: Path, source_line, extra=None) -> dict:
    """train/dev pairs from generated trees: a source built from the tree, target = words upper-cased."""
    trees = {}
    for seed, (split, size) in enumerate((("train", 120), ("dev", 8))):
        trees[split] = generate_treebank(GRAMMAR, size, seed=seed, max_words=10)
        (folder / f"{split}.src").write_text("".join(source_line(t) + "\n" for t in trees[split]))
        (folder / f"{split}.tgt").write_text(
            "".join(" ".join(t.words()).upper() + "\n" for t in trees[split])
        )
        if extra is not None:
            extra(folder, split, trees[split])
    return trees


def train_and_translate(tmp_path: Path, data: Path, lines: str, *options: str, model=()) -> str:
    cfg = load_config("small", [*TINY, *model, "data.task=null", f"data.dataset={data}"])
    Trainer(cfg, tmp_path / "run", show_progress=False).fit()
    result = CliRunner().invoke(app, ["translate", str(tmp_path / "run"), "--greedy", *options], input=lines)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_tree_to_string_source_keeps_bracket_tokens_whole(tmp_path):
    trees = write_pairs(tmp_path, str)
    opts = PrepareOptions("src", "tgt", vocab_size=380, shared_vocab=False, source=SourceFormat("tree"))
    with pytest.raises(ValueError, match="all 120 training pairs were filtered out"):
        prepare_text(tmp_path, tmp_path / "data", opts, show_progress=False)  # trees are > 3x longer
    opts.max_ratio = None
    prepare_text(tmp_path, tmp_path / "data", opts, show_progress=False)
    data = Dataset(tmp_path / "data")
    ids, _ = data.splits["dev"].pair(0)
    pieces = [data.src_vocab.token(i) for i in ids]
    brackets = [p.lstrip("▁") for p in pieces if p.lstrip("▁")[:1] in ("(", ")")]
    expected = [t for t in linearise(trees["dev"][0]) if t[0] in "()"]
    assert brackets == expected  # every (X and )X is one piece
    assert data.src_vocab.decode(ids.tolist()) == " ".join(linearise(trees["dev"][0]))
    out = train_and_translate(tmp_path, tmp_path / "data", f"{trees['dev'][0]}\n\n")
    assert len(out.split("\n")) == 3
    bad = CliRunner().invoke(app, ["translate", str(tmp_path / "run")], input="(S (NP dog\n")
    assert bad.exit_code == 2 and "not closed" in bad.output


def test_factored_source_tags_follow_subword_pieces(tmp_path):
    def factored(tree):
        return " ".join(f"{w}|{tag}" for w, tag in tree.leaves())

    trees = write_pairs(tmp_path, factored)
    opts = PrepareOptions("src", "tgt", vocab_size=300, shared_vocab=False, source=SourceFormat(factors=1))
    prepare_text(tmp_path, tmp_path / "data", opts, show_progress=False)
    data = Dataset(tmp_path / "data")
    tag_vocab = data.factor_vocabs[0]
    split = data.splits["train"]
    split_words = 0
    for i in range(len(split)):
        ids, _ = split.pair(i)
        pieces = [data.src_vocab.token(t) for t in ids]
        tags = [tag_vocab.token(t) for t in split.annotation(i).factors[0]]
        word_tags = iter(trees["train"][i].tags())
        current = None
        for piece, tag in zip(pieces, tags, strict=True):
            if piece.startswith("▁"):
                current = next(word_tags)
            else:
                split_words += 1
            assert tag == current
    assert split_words > 0  # some words were cut into several pieces
    out = train_and_translate(
        tmp_path, tmp_path / "data", "the|DT dog|NN saw|VBD\n", model=["model.factor_combine=ffn2"]
    )
    assert len(out.split("\n")) == 2
    bad = CliRunner().invoke(app, ["translate", str(tmp_path / "run")], input="the dog|NN\n")
    assert bad.exit_code == 2 and "'the' has 0 tag(s)" in bad.output
    plots = CliRunner().invoke(
        app, ["attention", str(tmp_path / "run"), "the|DT dog|NN", "-o", str(tmp_path / "a"), "--layers", "1"]
    )
    assert plots.exit_code == 0, plots.output
    assert sorted(f.name for f in (tmp_path / "a").iterdir()) == ["encoder-layer1.png"]


def test_constituency_trees_beside_the_source_give_piece_level_omega(tmp_path):
    def tree_file(folder, split, trees):
        (folder / f"{split}.src.tree").write_text("".join(f"{t}\n" for t in trees))

    trees = write_pairs(tmp_path, lambda t: " ".join(t.words()), tree_file)
    opts = PrepareOptions("src", "tgt", vocab_size=300, shared_vocab=False, source=SourceFormat(trees="tree"))
    prepare_text(tmp_path, tmp_path / "data", opts, show_progress=False)
    data = Dataset(tmp_path / "data")
    split = data.splits["train"]
    for i in range(len(split)):
        ids, _ = split.pair(i)
        word_of = np.cumsum([data.src_vocab.token(t).startswith("▁") for t in ids]) - 1
        expected = expand_to_pieces(constituency_omega(trees["train"][i]), word_of)
        assert np.array_equal(split.annotation(i).omega, expected)
    dev = tmp_path / "dev.src"
    out = train_and_translate(
        tmp_path,
        tmp_path / "data",
        dev.read_text(),
        "--src-trees",
        str(tmp_path / "dev.src.tree"),
        model=["model.syntax_mask=hard", "model.omega_max=4", "model.syntax_layers=[1]"],
    )
    assert len(out.split("\n")) == 9
    missing = CliRunner().invoke(app, ["translate", str(tmp_path / "run")], input="the dog\n")
    assert missing.exit_code == 2 and "--src-trees" in missing.output
    other = tmp_path / "other.tree"
    other.write_text("(S (NP (DT a) (NN cat)))\n")
    wrong = CliRunner().invoke(
        app, ["translate", str(tmp_path / "run"), "--src-trees", str(other)], input="the dog\n"
    )
    assert wrong.exit_code == 2 and "differ from the source" in wrong.output
    first = dev.read_text().splitlines()[0]
    tree = tmp_path / "first.tree"
    tree.write_text((tmp_path / "dev.src.tree").read_text().splitlines()[0] + "\n")
    plots = CliRunner().invoke(
        app, ["attention", str(tmp_path / "run"), first, "--src-trees", str(tree), "-o", str(tmp_path / "a")]
    )
    assert plots.exit_code == 0, plots.output
    assert "wrote 4 heat maps" in plots.stdout  # encoder layers 0 and 1, decoder 0, cross 0


def test_conllu_trees_and_mismatches_are_reported(tmp_path):
    lines = ["a b c", "b c", "c a b a"]
    heads = [[2, 0, 2], [0, 1], [0, 1, 2, 3]]

    def conllu(words, hs):
        return "".join(
            f"{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n" for i, (w, h) in enumerate(zip(words, hs, strict=True), 1)
        )

    for split in ("train", "dev"):
        (tmp_path / f"{split}.src").write_text("".join(f"{s}\n" for s in lines * 20))
        (tmp_path / f"{split}.tgt").write_text("".join(f"{s.upper()}\n" for s in lines * 20))
        (tmp_path / f"{split}.src.conllu").write_text(
            "\n".join(conllu(s.split(), h) for s, h in zip(lines * 20, heads * 20, strict=True))
        )
    opts = PrepareOptions(
        "src", "tgt", vocab_size=270, shared_vocab=False, source=SourceFormat(trees="conllu")
    )
    prepare_text(tmp_path, tmp_path / "data", opts, show_progress=False)
    split = Dataset(tmp_path / "data").splits["dev"]
    assert np.array_equal(split.annotation(0).omega, dependency_omega(heads[0]))  # one piece per word
    (tmp_path / "dev.src.conllu").write_text(conllu(["a", "x", "c"], [2, 0, 2]))
    with pytest.raises(ValueError, match=r"dev\.src\.conllu: 1 trees"):
        prepare_text(tmp_path, tmp_path / "data", opts, show_progress=False)


def test_batches_of_annotated_sources_equal_one_by_one(tmp_path):
    """Padding in a batch changes nothing for factored, soft-masked syntax models."""
    from transduce.data.batching import collate
    from transduce.model import build_model

    def tree_file(folder, split, trees):
        (folder / f"{split}.src.tree").write_text("".join(f"{t}\n" for t in trees))

    write_pairs(tmp_path, lambda t: " ".join(f"{w}|{tag}" for w, tag in t.leaves()), tree_file)
    fmt = SourceFormat(factors=1, trees="tree")
    opts = PrepareOptions("src", "tgt", vocab_size=300, shared_vocab=False, source=fmt)
    prepare_text(tmp_path, tmp_path / "data", opts, show_progress=False)
    data = Dataset(tmp_path / "data")
    for kind in ("standard", "inverse", "hard"):
        cfg = load_config("small", [*TINY, f"model.syntax_mask={kind}", "model.dropout=0"]).model
        torch.manual_seed(0)
        model = build_model(
            cfg, len(data.src_vocab), len(data.tgt_vocab), 0, [len(data.factor_vocabs[0])]
        ).eval()
        batch = collate(data.splits["dev"], list(range(8)))
        with torch.no_grad():
            together = model.encode(batch.src, **batch.source).states
            for row in range(8):
                alone = collate(data.splits["dev"], [row])
                single = model.encode(alone.src, **alone.source).states[0]
                n = alone.src.shape[1]
                assert (together[row, :n] - single).abs().max() < 1e-5, (kind, row)
