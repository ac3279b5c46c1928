"""Marian interop against Hugging Face transformers: tokens, logits, greedy text, round trip."""

import io
import json
import random
import shutil
import subprocess
import sys

import pytest
import sentencepiece as spm
import torch
import transformers  # the test extra has it: its absence is a failure, not a skip
from hf_damage import edit_json, edit_tensors, remove, truncate, write
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from transduce.cli import app
from transduce.data.batching import encode_sources
from transduce.data.vocab import BOS
from transduce.decode.search import greedy
from transduce.interop.marian import MarianError, export_marian, import_marian
from transduce.store.load import load_model

# The two sides' texts differ, so each spm has pieces the other lacks (vocab.json has both).
SOURCE_TEXT = [
    "die geänderte version ist gut",
    "der hund läuft schnell über die straße",
    "eine katze sitzt auf der matte",
    "wir übersetzen hier kurze sätze",
] * 30
TARGET_TEXT = [
    "the quick brown fox jumps over the lazy dog",
    "a cat sat on the mat near the door",
    "hello world and all the people in it",
    "we translate short sentences here",
] * 30
LANGUAGE_CODES = [">>deu<<", ">>fra<<"]


def _spm(lines, size):
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=buffer,
        vocab_size=size,
        model_type="unigram",
        minloglevel=2,
    )
    return buffer.getvalue()


def make_marian(folder, seed=0):
    """A random MarianMTModel with real tokenizer files, made locally: source.spm and target.spm
    learned on different texts, vocab.json the union of their pieces plus language codes."""
    protos = {"source.spm": _spm(SOURCE_TEXT, 40), "target.spm": _spm(TARGET_TEXT, 45)}
    vocab = {"</s>": 0, "<unk>": 1}
    for code in LANGUAGE_CODES:
        vocab[code] = len(vocab)
    for proto in protos.values():
        sp = spm.SentencePieceProcessor(model_proto=proto)
        for i in range(sp.get_piece_size()):
            if not sp.is_control(i):
                vocab.setdefault(sp.id_to_piece(i), len(vocab))
    vocab["<pad>"] = len(vocab)
    size = len(vocab)
    torch.manual_seed(seed)
    config = transformers.MarianConfig(
        vocab_size=size,
        decoder_vocab_size=size,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        pad_token_id=size - 1,
        eos_token_id=0,
        decoder_start_token_id=size - 1,
        forced_eos_token_id=0,
        max_position_embeddings=128,
        activation_function="swish",
        scale_embedding=True,
    )
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_()
        model.lm_head.weight.mul_(3.0)
    model.save_pretrained(folder, safe_serialization=True)
    for name, proto in protos.items():
        (folder / name).write_bytes(proto)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    return model, transformers.MarianTokenizer(
        source_spm=str(folder / "source.spm"),
        target_spm=str(folder / "target.spm"),
        vocab=str(folder / "vocab.json"),
    )


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("marian")
    hf_model, tokenizer = make_marian(root / "hf")
    import_marian(root / "hf", root / "ours")
    return root, hf_model, tokenizer, load_model(root / "ours")


TOKENISATION_CASES = [
    *SOURCE_TEXT[:4],
    *TARGET_TEXT[:4],
    ">>deu<< die geänderte version",
    ">>fra<<der hund",
    ">>xyz<< ein unbekannter code",
    "mitten >>deu<< im satz",
    "a </s> b<unk>c <pad> d",
    "</s>>>deu<< hund",
    "  viele   leerzeichen  ",
    "unseen wörds, ÄÖÜ!",
    "",
]


def _as_model_input(vocab, text):
    """Our ids for `text` as the model gets them (EOS appended), in Marian's numbering."""
    return [vocab.perm[i] for i in encode_sources([vocab.encode(text)])[0].tolist()]


def test_source_ids_equal_marian_tokenizer(imported):
    root, _, tokenizer, ours = imported
    for text in TOKENISATION_CASES:
        assert _as_model_input(ours.src_vocab, text) == tokenizer(text).input_ids, text
    code = json.loads((root / "hf" / "vocab.json").read_text())[">>deu<<"]
    assert _as_model_input(ours.src_vocab, ">>deu<< die geänderte version")[0] == code


def test_target_ids_equal_marian_tokenizer(imported):
    _, _, tokenizer, ours = imported
    for text in TOKENISATION_CASES:
        assert _as_model_input(ours.tgt_vocab, text) == tokenizer(text_target=text).input_ids, text


def _check_detokenised(tokenizer, vocab, ids):
    """transformers 4 detokenises with target.spm, 5 with source.spm: ours equals both."""
    mine = vocab.decode([vocab.ours[i] for i in ids])
    assert mine == tokenizer.decode(ids, skip_special_tokens=True), ids
    assert mine == tokenizer.decode(ids, skip_special_tokens=True, use_source_tokenizer=False), ids
    return mine


def test_pieces_only_in_source_spm_detokenise_with_spaces(imported):
    root, _, tokenizer, ours = imported
    target = spm.SentencePieceProcessor(model_file=str(root / "hf" / "target.spm"))
    text = "die geänderte version ist gut"
    ids = tokenizer(text).input_ids
    foreign = [p for p in tokenizer.convert_ids_to_tokens(ids) if target.piece_to_id(p) == target.unk_id()]
    assert any(p.startswith("\u2581") for p in foreign[1:])  # a word-initial piece target.spm lacks
    assert _check_detokenised(tokenizer, ours.tgt_vocab, ids) == text


def test_detokenised_text_equals_marian_tokenizer(imported):
    _, _, tokenizer, ours = imported
    sequences = [tokenizer(text).input_ids for text in TOKENISATION_CASES]
    sequences += [tokenizer(text_target=text).input_ids for text in TOKENISATION_CASES]
    rng = random.Random(0)
    size = len(ours.tgt_vocab.perm) - 1  # Marian's ids; our BOS row is an extra one
    sequences += [[rng.randrange(size) for _ in range(rng.randint(1, 12))] for _ in range(300)]
    for ids in sequences:
        _check_detokenised(tokenizer, ours.tgt_vocab, ids)


def test_same_weights_give_same_logits(imported):
    _, hf_model, tokenizer, ours = imported
    batch = tokenizer(["the quick dog", "a cat sat on the mat near"], return_tensors="pt", padding=True)
    decoder_ids = torch.tensor([[hf_model.config.decoder_start_token_id, 5, 9, 12, 7]] * 2)
    with torch.no_grad():
        theirs = hf_model(**batch, decoder_input_ids=decoder_ids).logits
    inverse = {m: o for o, m in enumerate(ours.src_vocab.perm) if o != BOS}
    src = torch.tensor([[inverse[int(t)] for t in row] for row in batch.input_ids])
    tgt = torch.tensor([[BOS] + [inverse[int(t)] for t in row[1:]] for row in decoder_ids])
    with torch.no_grad():
        mine = ours.model(src, tgt).logits
    mapped = torch.stack([mine[..., inverse[m]] for m in range(theirs.shape[-1])], -1)
    assert (mapped - theirs).abs().max() < 1e-4


def test_greedy_text_equals_generate(imported):
    _, hf_model, tokenizer, ours = imported
    texts = ["the quick brown fox", "hello world", "a cat sat on the mat near the door"]
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    pad = hf_model.config.pad_token_id
    generated = hf_model.generate(
        **batch, num_beams=1, do_sample=False, max_new_tokens=12, bad_words_ids=[[pad]]
    )
    expected = tokenizer.batch_decode(generated, skip_special_tokens=True)
    src = encode_sources([ours.src_vocab.encode(t) for t in texts])
    mine = [ours.tgt_vocab.decode(h.tokens) for h in greedy(ours.model, src, max_len_a=0.0, max_len_b=11)]
    assert mine == expected


def test_beam_text_equals_generate_without_length_penalty(imported):
    """HF divides by len^alpha, GNMT by ((5 + len) / 6)^alpha: with alpha = 0 both are log P."""
    from transduce.decode.beam import beam_search

    _, hf_model, tokenizer, ours = imported
    texts = ["the quick brown fox", "hello world", "a cat sat on the mat near the door", "we translate"]
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    pad = hf_model.config.pad_token_id
    generated = hf_model.generate(
        **batch,
        num_beams=4,
        do_sample=False,
        max_new_tokens=12,
        length_penalty=0.0,
        early_stopping=True,
        bad_words_ids=[[pad]],
    )
    expected = tokenizer.batch_decode(generated, skip_special_tokens=True)
    src = encode_sources([ours.src_vocab.encode(t) for t in texts])
    hyps = beam_search(ours.model, src, beam=4, alpha=0.0, max_len_a=0.0, max_len_b=11)
    assert [ours.tgt_vocab.decode(h[0].tokens) for h in hyps] == expected


def test_export_round_trip(imported, tmp_path):
    root, hf_model, _, ours = imported
    export_marian(root / "ours", tmp_path / "hf")
    back = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    original = hf_model.state_dict()
    for name, tensor in back.state_dict().items():
        if "embed_positions" in name:
            continue
        assert torch.equal(tensor, original[name]), name
    import_marian(tmp_path / "hf", tmp_path / "again")
    again = load_model(tmp_path / "again")
    first, second = ours.model.state_dict(), again.model.state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_clear_errors(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(MarianError, match=r"no config\.json"):
        import_marian(tmp_path / "x", tmp_path / "o")
    (tmp_path / "x" / "config.json").write_text(json.dumps({"model_type": "bart"}))
    with pytest.raises(MarianError, match="not 'marian'"):
        import_marian(tmp_path / "x", tmp_path / "o")


def _eos_is_pad(folder):
    config = json.loads((folder / "config.json").read_text())
    edit_json("config.json", eos_token_id=config["pad_token_id"])(folder)


def _one_id_for_all(folder):
    """Damage: every piece of vocab.json mapped to id 0."""
    pieces = json.loads((folder / "vocab.json").read_text())
    (folder / "vocab.json").write_text(json.dumps(dict.fromkeys(pieces, 0)))


def _vocab_size(folder):
    return json.loads((folder / "config.json").read_text())["vocab_size"]


FC1 = "model.encoder.layers.0.fc1.weight"

# (row id, damage to a good MarianMTModel directory, expected message fragment)
BAD_MARIAN = [
    ("config-missing", remove("config.json"), "no config.json"),
    (
        "config-bad-json",
        write("config.json", b'{"model_type": "marian",'),
        "config.json: not a readable JSON",
    ),
    ("config-not-utf8", write("config.json", b'{"model_type": "\xff"}'), "config.json: not a readable JSON"),
    ("config-list", write("config.json", b"[1, 2]"), "config.json: must hold a JSON object, not list"),
    ("config-other-type", edit_json("config.json", model_type="bart"), "model_type is 'bart', not 'marian'"),
    ("d_model-missing", edit_json("config.json", d_model=None), "config.json: d_model must be an integer"),
    ("d_model-float", edit_json("config.json", d_model=32.0), "d_model must be an integer from 1 to 65536"),
    ("layers-string", edit_json("config.json", encoder_layers="2"), "encoder_layers must be an integer"),
    (
        "layers-negative",
        edit_json("config.json", decoder_layers=-1),
        "decoder_layers must be an integer from 1",
    ),
    (
        "layers-zero",
        edit_json("config.json", encoder_layers=0),
        "encoder_layers must be an integer from 1 to 64",
    ),
    (
        "layers-huge",
        edit_json("config.json", encoder_layers=10**6),
        "encoder_layers must be an integer from 1",
    ),
    (
        "heads-bool",
        edit_json("config.json", encoder_attention_heads=True),
        "encoder_attention_heads must be",
    ),
    (
        "activation-list",
        edit_json("config.json", activation_function=["swish"]),
        "activation_function ['swish']",
    ),
    ("dropout-string", edit_json("config.json", dropout="high"), "does not map onto a transduce model"),
    (
        "shared-string",
        edit_json("config.json", share_encoder_decoder_embeddings="yes"),
        "must be true or false",
    ),
    (
        "vocab_size-huge",
        edit_json("config.json", vocab_size=10**12),
        "vocab_size must be an integer from 4 to",
    ),
    (
        "vocab_size-mismatch",
        edit_json("config.json", vocab_size=1000),
        "model.shared.weight is torch.float32",
    ),
    (
        "pad-out-of-range",
        edit_json("config.json", pad_token_id=10**6),
        "pad_token_id must be an integer from 0",
    ),
    ("pad-negative", edit_json("config.json", pad_token_id=-1), "pad_token_id must be an integer from 0"),
    ("eos-is-pad", _eos_is_pad, "and vocab.json's <unk> id (1) must differ"),
    ("start-string", edit_json("config.json", decoder_start_token_id="0"), "decoder_start_token_id must be"),
    (
        "max-positions-zero",
        edit_json("config.json", max_position_embeddings=0),
        "max_position_embeddings must be an integer from 1 to 65536 (got 0)",
    ),
    ("pad-not-named-pad", edit_json("config.json", pad_token_id=43), "config.json's pad_token_id is 43"),
    ("vocab-no-pad", edit_json("vocab.json", **{"<pad>": None}), "vocab.json: no <pad> piece"),
    ("vocab-ids-all-zero", _one_id_for_all, "vocab.json: each piece needs an id of its own, but id 0"),
    ("vocab-missing", remove("vocab.json"), "vocab.json: missing"),
    ("vocab-bad-json", write("vocab.json", b"{"), "vocab.json: not a readable JSON file"),
    (
        "vocab-list",
        write("vocab.json", b'["a", "b"]'),
        "vocab.json: must hold a JSON object from piece to id",
    ),
    ("vocab-id-range", write("vocab.json", b'{"</s>": 0, "a": 100000}'), "vocab.json: ids must be integers"),
    ("vocab-id-type", write("vocab.json", b'{"</s>": 0, "a": "1"}'), "vocab.json: ids must be integers"),
    ("spm-missing", remove("source.spm"), "source.spm: missing tokenizer file"),
    ("spm-garbage", write("source.spm", b"not a model"), "source.spm: not a sentencepiece model"),
    ("spm-truncated", truncate("target.spm"), "target.spm: not a sentencepiece model"),
    ("spm-empty", write("target.spm", b""), "target.spm: empty, not a sentencepiece model"),
    ("weights-missing", remove("model.safetensors"), "no model.safetensors"),
    ("weights-garbage", write("model.safetensors", b"garbage!" * 8), "not a readable safetensors file"),
    (
        "weights-truncated",
        truncate("model.safetensors"),
        "model.safetensors: not a readable safetensors file",
    ),
    ("tensor-missing", edit_tensors(lambda w: w.pop(FC1)), f"Marian weights lack {FC1}"),
    (
        "tensor-shape",
        edit_tensors(lambda w: w.update({FC1: w[FC1].T.contiguous()})),
        f"{FC1} is torch.float32",
    ),
    (
        "tensor-dtype",
        edit_tensors(lambda w: w.update({FC1: w[FC1].long()})),
        f"{FC1} is torch.int64 (64, 32)",
    ),
]


@pytest.fixture
def damaged(imported, tmp_path):
    """A copy of the good Marian directory, and an empty parent for the output."""
    root = imported[0]
    folder = tmp_path / "hf"
    shutil.copytree(root / "hf", folder)
    (tmp_path / "outs").mkdir()
    return folder, tmp_path / "outs"


def _left_beside(outs):
    """What an import left in the output's parent (temporary folders included)."""
    return sorted(p.name for p in outs.iterdir())


@pytest.mark.parametrize(("damage", "fragment"), [pytest.param(d, f, id=i) for i, d, f in BAD_MARIAN])
def test_malformed_marian_directory_is_refused_naming_the_fault(damaged, damage, fragment):
    folder, outs = damaged
    damage(folder)
    with pytest.raises(MarianError) as err:
        import_marian(folder, outs / "out")
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)
    assert _left_beside(outs) == []


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ("config-bad-json", "not a readable JSON"),
        ("spm-garbage", "source.spm"),
        ("layers-zero", "encoder_layers"),
    ],
)
def test_cli_import_marian_prints_one_error_line(damaged, row, fragment):
    folder, outs = damaged
    dict((i, d) for i, d, _ in BAD_MARIAN)[row](folder)
    run = subprocess.run(
        [sys.executable, "-m", "transduce", "import", "marian", str(folder), "-o", str(outs / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1, run.stderr
    assert fragment in run.stderr and "Traceback" not in run.stderr
    assert _left_beside(outs) == []


def test_output_bias_is_fixed_and_masks_the_repeated_start_row(imported, tmp_path):
    """Every Marian id's bias is Marian's; our BOS row (a second copy of Marian's decoder-start
    row) is masked, so that token is counted once, as in Marian. A zero Marian bias imports as
    that mask alone: the logits are those of the model with its bias zeroed."""
    root, hf_model, _, ours = imported
    assert ours.config.model.final_logits_bias
    assert "output.bias" not in dict(ours.model.named_parameters())  # a buffer, as in Marian: never trained
    rows = [i for i in range(len(ours.tgt_vocab.perm)) if i != BOS]
    marian_ids = torch.tensor([ours.tgt_vocab.perm[i] for i in rows])
    assert torch.equal(
        ours.model.output.bias[rows], hf_model.final_logits_bias[0].index_select(0, marian_ids)
    )
    assert ours.model.output.bias[BOS] <= -1e4
    shutil.copytree(root / "hf", tmp_path / "hf")
    weights = load_file(tmp_path / "hf" / "model.safetensors")
    weights["final_logits_bias"] = torch.zeros_like(weights["final_logits_bias"])
    save_file(weights, tmp_path / "hf" / "model.safetensors", metadata={"format": "pt"})
    import_marian(tmp_path / "hf", tmp_path / "ours")
    unbiased = load_model(tmp_path / "ours")
    assert unbiased.model.output.bias[rows].eq(0).all() and unbiased.model.output.bias[BOS] <= -1e4
    zeroed = load_model(root / "ours").model
    zeroed.output.bias[rows] = 0.0
    src = encode_sources([ours.src_vocab.encode(t) for t in ("der hund", "ein unbekannter code")])
    with torch.no_grad():
        expected = zeroed(src, src[:, :3]).logits
        got = unbiased.model(src, src[:, :3]).logits
    torch.testing.assert_close(got, expected)


def test_score_equals_hf_forced_decoding(imported, tmp_path):
    """`transduce score` gives each target token the log-probability Hugging Face's forced
    decoding gives it (the repeated start row took log((V + 1) / V) or so per token before)."""
    root, hf_model, tokenizer, _ = imported
    sources = ["the quick brown fox", "a cat sat on the mat near the door", "hello world"]
    targets = ["die geänderte version ist gut", "eine katze", "wir übersetzen hier kurze sätze"]
    (tmp_path / "src").write_text("".join(f"{t}\n" for t in sources))
    (tmp_path / "tgt").write_text("".join(f"{t}\n" for t in targets))
    args = ["score", str(root / "ours"), "--src", str(tmp_path / "src"), "--tgt", str(tmp_path / "tgt")]
    result = CliRunner().invoke(app, [*args, "--per-token"])
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    start = hf_model.config.decoder_start_token_id
    for (total, _, per_token), source, target in zip(rows, sources, targets, strict=True):
        labels = tokenizer(text_target=target).input_ids
        with torch.no_grad():
            logits = hf_model(
                input_ids=torch.tensor([tokenizer(source).input_ids]),
                decoder_input_ids=torch.tensor([[start, *labels[:-1]]]),
            ).logits[0]
        theirs = logits.log_softmax(-1).gather(1, torch.tensor(labels)[:, None])[:, 0].tolist()
        mine = [float(pair.rsplit("=", 1)[1]) for pair in per_token.split(" ")]
        assert mine == pytest.approx(theirs, abs=1e-4)
        assert float(total) == pytest.approx(sum(theirs), abs=1e-3)
        assert [pair.rsplit("=", 1)[0] for pair in per_token.split(" ")] == tokenizer.convert_ids_to_tokens(
            labels
        )


def test_prepare_vocab_from_an_imported_model_encodes_as_its_tokenizer(imported, tmp_path):
    """Data for fine-tuning an imported model gets the ids Marian's tokenizer gives (the imported
    vocabulary's own encoding), not the raw ids of its sentencepiece models."""
    from transduce.data.dataset import Dataset

    root, _, tokenizer, ours = imported
    (tmp_path / "c").mkdir()
    for split, rows in (("train", TARGET_TEXT[:4]), ("dev", TARGET_TEXT[4:6])):
        (tmp_path / "c" / f"{split}.en").write_text("".join(f"{t}\n" for t in rows))
        (tmp_path / "c" / f"{split}.de").write_text("".join(f"{t}\n" for t in SOURCE_TEXT[:4][: len(rows)]))
    args = ["prepare", str(tmp_path / "c"), "--src", "en", "--tgt", "de", "-o", str(tmp_path / "d")]
    result = CliRunner().invoke(app, [*args, "--vocab-from", str(root / "ours")])
    assert result.exit_code == 0, result.output
    train = Dataset(tmp_path / "d").splits["train"]
    for i, (source, target) in enumerate(zip(TARGET_TEXT[:4], SOURCE_TEXT[:4], strict=True)):
        src, tgt = (ids.tolist() for ids in train.pair(i))
        assert [ours.src_vocab.perm[t] for t in src] == tokenizer(source).input_ids[:-1]  # without EOS
        assert [ours.tgt_vocab.perm[t] for t in tgt] == tokenizer(text_target=target).input_ids[:-1]
