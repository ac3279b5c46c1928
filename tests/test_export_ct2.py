"""CTranslate2 export: the converted model decodes exactly as ours does."""

import pytest
from tiny import train_tiny
from tiny_models import DIGITS, saved_checkpoint
from typer.testing import CliRunner

from transduce.cli import app
from transduce.config import load_config
from transduce.data.batching import encode_sources
from transduce.data.dataset import Dataset
from transduce.data.vocab import EOS
from transduce.decode.search import greedy
from transduce.decode.shortlist import Shortlisted, build_shortlist, output_matrix
from transduce.store.load import load_model
from transduce.train.trainer import Trainer

ctranslate2 = pytest.importorskip("ctranslate2", reason="the ctranslate2 package is not installed")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Words to upper-case, prepared with a sentencepiece vocabulary."""
    tmp_path = tmp_path_factory.mktemp("ct2")
    import random

    from transduce.data.prepare import PrepareOptions, prepare_text

    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away"]
    rng = random.Random(0)
    for split, size in (("train", 300), ("dev", 10)):
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 7))) for _ in range(size)]
        (tmp_path / f"{split}.en").write_text("".join(f"{line}\n" for line in lines))
        (tmp_path / f"{split}.up").write_text("".join(f"{line.upper()}\n" for line in lines))
    prepare_text(tmp_path, tmp_path / "data", PrepareOptions("en", "up", vocab_size=300), show_progress=False)
    return tmp_path


def train(corpus, run, extra):
    """A tiny model trained for 60 updates on the corpus, with `extra` config overrides."""
    overrides = [
        "model.d_model=32",
        "model.heads=4",
        "model.d_ff=64",
        "model.encoder_layers=2",
        "model.decoder_layers=2",
        f"data.dataset={corpus / 'data'}",
        "data.max_tokens=400",
        "train.steps=60",
        "train.warmup=20",
        "train.save_every=60",
        "train.validate_every=60",
        *extra,
    ]
    Trainer(load_config("small", overrides), run, show_progress=False).fit()
    return run


@pytest.fixture(scope="module")
def trained(corpus):
    """The corpus directory, with a post-norm model in Marian's conventions in run/."""
    train(corpus, corpus / "run", ["model.pos_layout=halves"])
    return corpus


VARIANTS = {
    "post-norm, halves": ["model.pos_layout=halves"],
    "pre-norm, interleaved": ["model.norm=pre"],
    "pre-norm, learned positions, untied, gelu": [
        "model.norm=pre",
        "model.positions=learned",
        "model.max_positions=128",
        "model.tie_embeddings=none",
        "model.activation=gelu",
        "model.scale_embeddings=false",
    ],
    "post-norm, decoder-tied, swish": ["model.tie_embeddings=decoder", "model.activation=swish"],
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_ctranslate2_greedy_equals_ours(corpus, tmp_path, variant):
    """Every architecture variant translates token for token as ours (its decoder started from
    our BOS embedding, so nothing needs a caveat)."""
    run = train(corpus, tmp_path / "run", VARIANTS[variant])
    result = CliRunner().invoke(
        app, ["export", str(run), "--format", "ctranslate2", "-o", str(tmp_path / "ct2")]
    )
    assert result.exit_code == 0, result.output
    assert "warning:" not in result.output
    ours = load_model(run)
    lines = (corpus / "dev.en").read_text().splitlines()
    sources = [ours.src_vocab.encode(line) for line in lines]
    mine = [h.tokens for h in greedy(ours.model, encode_sources(sources), max_len_a=0.0, max_len_b=12)]
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    tokens = [[ours.src_vocab.token(i) for i in s] + ["</s>"] for s in sources]
    theirs = translator.translate_batch(tokens, beam_size=1, max_decoding_length=12)
    piece_ids = [[ours.tgt_vocab.sp.piece_to_id(p) for p in r.hypotheses[0]] for r in theirs]
    assert piece_ids == mine
    assert any(len(m) > 1 for m in mine)  # not trivially empty


def test_a_symbol_vocabulary_model_exports_too(tmp_path):
    """Generated-task models (symbol vocabularies, no sentencepiece) decode as ours there too."""
    loaded = saved_checkpoint(tmp_path / "ck", DIGITS, seed=3)
    result = CliRunner().invoke(
        app, ["export", str(tmp_path / "ck"), "--format", "ctranslate2", "-o", str(tmp_path / "ct2")]
    )
    assert result.exit_code == 0, result.output
    rows = [[5, 6, 7], [9, 4, 4, 12, 8], [13]]
    mine = [h.tokens for h in greedy(loaded.model, encode_sources(rows), max_len_a=0.0, max_len_b=8)]
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    tokens = [[loaded.src_vocab.token(i) for i in r] + ["</s>"] for r in rows]
    theirs = translator.translate_batch(tokens, beam_size=1, max_decoding_length=8)
    names = {loaded.tgt_vocab.token(i): i for i in range(len(loaded.tgt_vocab))}
    assert [[names[t] for t in r.hypotheses[0]] for r in theirs] == mine
    assert any(mine)


def test_export_refuses_what_ctranslate2_cannot_represent(tmp_path):
    train_tiny(tmp_path / "ut", 2, "model.arch=universal")
    result = CliRunner().invoke(
        app, ["export", str(tmp_path / "ut"), "--format", "ctranslate2", "-o", str(tmp_path / "ct2")]
    )
    assert result.exit_code == 2
    assert "error:" in result.output and "model.arch=universal" in result.output
    assert not (tmp_path / "ct2").exists()


def test_export_rejects_unknown_format_and_quantization(tmp_path):
    bad = CliRunner().invoke(app, ["export", str(tmp_path), "--format", "onnx"])
    assert bad.exit_code == 2 and "marian, m2m100, ctranslate2, argos" in bad.output
    bad = CliRunner().invoke(
        app, ["export", str(tmp_path), "--format", "ctranslate2", "--quantization", "int3"]
    )
    assert bad.exit_code == 2 and "int8" in bad.output


def test_a_shortlist_becomes_ctranslate2s_vocabulary_map(trained, tmp_path):
    """CTranslate2 with use_vmap decodes as our shortlisted greedy search (the same restriction)."""
    data = Dataset(trained / "data")
    train = data.splits["train"]
    pairs = [train.pair(i) for i in range(len(train))]
    listed = build_shortlist(pairs, len(data.src_vocab), len(data.tgt_vocab), per_token=2, frequent=3)
    listed.save(tmp_path / "list")
    out = tmp_path / "ct2"
    args = ["export", str(trained / "run"), "--format", "ctranslate2", "-o", str(out)]
    result = CliRunner().invoke(app, [*args, "--shortlist", str(tmp_path / "list")])
    assert result.exit_code == 0, result.output
    vmap = (out / "vmap.txt").read_text(encoding="utf-8").splitlines()
    assert vmap[0] == "\t" + " ".join(data.tgt_vocab.token(int(i)) for i in listed.frequent if int(i) > EOS)
    word = data.src_vocab.encode("cat")[0]
    row = [data.tgt_vocab.token(int(i)) for i in listed.per_token[word] if int(i) > EOS]
    assert f"{data.src_vocab.token(word)}\t{' '.join(row)}" in vmap
    ours = load_model(trained / "run")
    lines = (trained / "dev.en").read_text().splitlines()
    sources = [ours.src_vocab.encode(line) for line in lines]
    translator = ctranslate2.Translator(str(out), device="cpu")
    tokens = [[ours.src_vocab.token(i) for i in s] + ["</s>"] for s in sources]
    theirs = translator.translate_batch(tokens, beam_size=1, max_decoding_length=12, use_vmap=True)
    for source, result in zip(sources, theirs, strict=True):
        src = encode_sources([source])
        wrapped = Shortlisted(ours.model, listed.allowed(src), *output_matrix(ours.model))
        mine = greedy(wrapped, src, max_len_a=0.0, max_len_b=12)[0].tokens
        assert [ours.tgt_vocab.sp.piece_to_id(p) for p in result.hypotheses[0]] == mine
    wrong = CliRunner().invoke(app, [*args, "--format", "marian", "--shortlist", str(tmp_path / "list")])
    assert wrong.exit_code == 2 and "--shortlist goes with --format ctranslate2" in wrong.output


# Run in a fresh interpreter with ctranslate2 and sentencepiece alone: what a CTranslate2 user has.
STANDALONE = """
import json, sys
from pathlib import Path
import ctranslate2, sentencepiece

folder = Path(sys.argv[1])
info = json.loads((folder / "transduce.json").read_text())
source = sentencepiece.SentencePieceProcessor(model_file=str(folder / info["source_tokenizer"]))
target = sentencepiece.SentencePieceProcessor(model_file=str(folder / info["target_tokenizer"]))
translator = ctranslate2.Translator(str(folder), device="cpu")
lines = sys.stdin.read().splitlines()
batch = [source.encode(line, out_type=str) + info["source_suffix"] for line in lines]
for result in translator.translate_batch(batch, beam_size=1, max_decoding_length=12):
    print(target.decode(result.hypotheses[0]))
print(json.dumps([info["exported_from"], info["step"], any(m.startswith("transduce") for m in sys.modules)]))
"""


def test_the_export_translates_with_ctranslate2_and_sentencepiece_alone(trained, tmp_path):
    """The exported directory is self-contained: its sentencepiece models and transduce.json let a
    script that imports only ctranslate2 and sentencepiece translate text as `transduce
    translate --greedy` does, and transduce.json names the checkpoint it came from."""
    import json
    import subprocess
    import sys

    out = tmp_path / "ct2"
    result = CliRunner().invoke(
        app, ["export", str(trained / "run"), "--format", "ctranslate2", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    lines = (trained / "dev.en").read_text()
    ran = subprocess.run(
        [sys.executable, "-c", STANDALONE, str(out)], input=lines, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    *theirs, last = ran.stdout.splitlines()
    args = ["translate", str(trained / "run"), "--greedy", "--max-len-a", "0", "--max-len-b", "12"]
    ours = CliRunner().invoke(app, args, input=lines)
    assert ours.exit_code == 0, ours.output
    assert theirs == ours.stdout.splitlines() and any(theirs)
    origin = load_model(trained / "run").path
    assert json.loads(last) == [origin.name, load_model(origin).meta.step, False]  # no path of this machine
    info = json.loads((out / "transduce.json").read_text())
    assert info["source_tokenizer"] == info["target_tokenizer"] == "src.spm"  # one shared file
    assert (out / "src.spm").read_bytes() == (origin / "src.spm").read_bytes()
    assert sorted(p.name for p in out.glob("*.spm")) == ["src.spm"]


def test_a_symbol_vocabulary_export_says_its_tokens_are_words(tmp_path):
    import json

    saved_checkpoint(tmp_path / "ck", DIGITS, seed=3)
    result = CliRunner().invoke(
        app, ["export", str(tmp_path / "ck"), "--format", "ctranslate2", "-o", str(tmp_path / "ct2")]
    )
    assert result.exit_code == 0, result.output
    info = json.loads((tmp_path / "ct2" / "transduce.json").read_text())
    assert info["source_tokenizer"] is None and info["target_tokenizer"] is None
    assert info["tokens"].startswith("the symbols between single spaces") and info["source_suffix"] == [
        "</s>"
    ]
    assert not list((tmp_path / "ct2").glob("*.spm"))
