"""CTranslate2 export: the converted model decodes exactly as ours does."""

import pytest
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
def trained(tmp_path_factory):
    """A small model trained to upper-case words, with its dataset and dev lines."""
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
    overrides = [
        "model.d_model=32",
        "model.heads=4",
        "model.d_ff=64",
        "model.encoder_layers=2",
        "model.decoder_layers=2",
        "model.pos_layout=halves",
        f"data.dataset={tmp_path / 'data'}",
        "data.max_tokens=400",
        "train.steps=60",
        "train.warmup=20",
        "train.save_every=60",
        "train.validate_every=60",
    ]
    Trainer(load_config("small", overrides), tmp_path / "run", show_progress=False).fit()
    return tmp_path


def test_ctranslate2_greedy_equals_ours(trained, tmp_path):
    result = CliRunner().invoke(
        app, ["export", str(trained / "run"), "--format", "ctranslate2", "-o", str(tmp_path / "ct2")]
    )
    assert result.exit_code == 0, result.output
    # Trained, our BOS row is not zero; CTranslate2 starts from zero: said, not hidden.
    assert "warning:" in result.stderr and "zero vector" in result.stderr
    ours = load_model(trained / "run")
    lines = (trained / "dev.en").read_text().splitlines()
    sources = [ours.src_vocab.encode(line) for line in lines]
    mine = [h.tokens for h in greedy(ours.model, encode_sources(sources), max_len_a=0.0, max_len_b=12)]
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    tokens = [[ours.src_vocab.token(i) for i in s] + ["</s>"] for s in sources]
    theirs = translator.translate_batch(tokens, beam_size=1, max_decoding_length=12)
    piece_ids = [[ours.tgt_vocab.sp.piece_to_id(p) for p in r.hypotheses[0]] for r in theirs]
    assert piece_ids == mine
    assert any(len(m) > 1 for m in mine)  # not trivially empty


def test_export_rejects_unknown_format_and_quantization(tmp_path):
    bad = CliRunner().invoke(app, ["export", str(tmp_path), "--format", "onnx"])
    assert bad.exit_code == 2 and "marian, ctranslate2" in bad.output
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
