"""M2M100 / NLLB interop against Hugging Face transformers, on random models built here with the
real tokenizer layouts: tokens, logits, greedy and beam `generate` with the target language
forced first, `translate` through the CLI, the round trip, and broken directories."""

import io
import json
import random
import re
import shutil
import subprocess
import sys

import pytest
import sentencepiece as spm
import torch
import transformers
from hf_damage import edit_json, edit_tensors, linked_to_a_device, pipe, remove, write
from safetensors.torch import load_file
from typer.testing import CliRunner

import transduce
from transduce.cli import app
from transduce.data.batching import encode_sources
from transduce.data.vocab import BOS, EOS
from transduce.decode.beam import beam_search
from transduce.decode.search import greedy
from transduce.interop.bart import ConversionError
from transduce.interop.m2m100 import (
    FINAL_NORMS,
    SHARED,
    TIED_COPIES,
    export_m2m100,
    import_m2m100,
    language_tokens,
    weight_map,
)
from transduce.store.checkpoint import CheckpointError
from transduce.store.load import load_model

TEXTS = {
    "en": ["the quick brown fox jumps over the lazy dog", "a cat sat on the mat", "hello world"],
    "de": ["der schnelle braune fuchs springt", "eine katze sitzt auf der matte", "hallo welt"],
    "fr": ["le renard brun saute", "un chat est sur le tapis", "bonjour le monde"],
}
LANGUAGES = ("en", "de", "fr")


def train_spm(lines, size):
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buffer, vocab_size=size, model_type="bpe", minloglevel=2
    )
    return buffer.getvalue()


def fairseq_vocab_json(proto):
    """fairseq's dictionary as M2M100's vocab.json holds it: <s>, <pad>, </s>, <unk>, then the
    pieces (sentencepiece's own control and unknown pieces left out)."""
    sp = spm.SentencePieceProcessor(model_proto=proto)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(sp.get_piece_size()):
        if not (sp.is_control(i) or sp.is_unknown(i)):
            vocab.setdefault(sp.id_to_piece(i), len(vocab))
    return vocab


def random_m2m100(size, seed, layers=2, d=32):
    """A random M2M100ForConditionalGeneration whose layers outweigh the embeddings (tied to the
    output), so that outputs do not merely echo their last input, and whose distributions are
    peaked (a large final layer norm gain): greedy choices far from ties."""
    torch.manual_seed(seed)
    config = transformers.M2M100Config(
        vocab_size=size,
        d_model=d,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=2 * d,
        decoder_ffn_dim=2 * d,
        max_position_embeddings=128,
    )
    model = transformers.M2M100ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if tensor.dim() == 2 and "shared" not in name:
                tensor.normal_(0.0, 0.3)
        model.model.shared.weight.normal_(0.0, 0.2)
        model.model.decoder.layer_norm.weight.normal_(5.0, 1.0)
        model.model.decoder.layer_norm.bias.normal_(0.0, 0.2)
    return model


def make_m2m100(folder, seed=0):
    """A random M2M100 directory with M2M100Tokenizer's files: sentencepiece.bpe.model, vocab.json
    (fairseq's specials first), tokenizer_config.json; the 100 language tokens and 8 madeup words
    numbered after vocab.json's entries, as in facebook/m2m100_418M."""
    folder.mkdir(parents=True, exist_ok=True)
    proto = train_spm([t for texts in TEXTS.values() for t in texts] * 20, 70)
    (folder / "sentencepiece.bpe.model").write_bytes(proto)
    vocab = fairseq_vocab_json(proto)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    model = random_m2m100(len(vocab) + 100 + 8, seed)
    with torch.no_grad():  # as if trained on three languages: the others' tokens rarely win
        codes = transformers.models.m2m_100.tokenization_m2m_100.FAIRSEQ_LANGUAGE_CODES["m2m100"]
        for i in range(len(vocab), model.config.vocab_size):
            if i - len(vocab) >= len(codes) or codes[i - len(vocab)] not in LANGUAGES:
                model.model.shared.weight[i] *= 0.1
    model.save_pretrained(folder)
    tokenizer = transformers.M2M100Tokenizer(
        vocab_file=str(folder / "vocab.json"), spm_file=str(folder / "sentencepiece.bpe.model")
    )
    tokenizer.save_pretrained(folder)
    return model, tokenizer


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("m2m100")
    hf_model, tokenizer = make_m2m100(root / "hf")
    import_m2m100(root / "hf", root / "ours")
    return root, hf_model, tokenizer, load_model(root / "ours")


def _model_input(vocab, text):
    """Our ids for `text` as the model gets them (EOS appended), in the model's numbering."""
    return [vocab.perm[i] for i in encode_sources([vocab.encode(text)])[0].tolist()]


TOKENISATION_CASES = [
    *[t for texts in TEXTS.values() for t in texts],
    "  many   spaces  ",
    "unseen wörds, ÄÖÜ!",
    "a </s> b<unk>c <pad> d <s>",
    "",
]


def test_source_and_target_ids_equal_m2m100_tokenizer(imported):
    """The language token typed before the text gives the ids the tokenizer gives with src_lang
    (tgt_lang) set: the language token, the pieces, </s>."""
    _, _, tokenizer, ours = imported
    for lang in LANGUAGES:
        tokenizer.src_lang, tokenizer.tgt_lang = lang, lang
        for text in TOKENISATION_CASES:
            mine = _model_input(ours.src_vocab, f"__{lang}__ {text}")
            assert mine == tokenizer(text).input_ids, (lang, text)
            assert mine == tokenizer(text_target=text).input_ids, (lang, text)


def test_detokenised_text_equals_m2m100_tokenizer(imported):
    """Every id sequence, madeup words (no piece: '<unk>' text) and specials included, reads as the
    tokenizer reads it with skip_special_tokens; the language tokens are left out (transformers 5
    no longer counts them as special tokens, so they are taken out before it decodes)."""
    _, _, tokenizer, ours = imported
    vocab = ours.tgt_vocab
    languages = set(tokenizer.lang_code_to_id.values())
    size = len(vocab.perm) - 1
    rng = random.Random(0)
    sequences = [tokenizer(text).input_ids for text in TOKENISATION_CASES]
    sequences += [[rng.randrange(size) for _ in range(rng.randint(1, 12))] for _ in range(400)]
    for ids in sequences:
        expected = tokenizer.decode([i for i in ids if i not in languages], skip_special_tokens=True)
        assert vocab.decode([vocab.ours[i] for i in ids]) == expected, ids


def test_weight_map_covers_both_models(imported):
    """The declarative map, the shared embedding and the fused q/k/v account for every tensor of
    ours and every tensor of theirs, once."""
    _, hf_model, _, ours = imported
    cfg = ours.config
    pairs = weight_map(cfg)
    fused = [n for n in ours.model.state_dict() if ".in_proj." in n]
    mine = {o for o, _ in pairs} | set(fused) | {"tgt_embed.tokens.weight", "output.bias"}
    tied = {"src_embed.tokens.weight", "output.weight"}  # the same tensor as tgt_embed.tokens.weight
    assert mine | tied == set(ours.model.state_dict())
    assert len(pairs) == len({o for o, _ in pairs}) == len({t for _, t in pairs})
    qkv = {n.replace(".in_proj.", f".{p}_proj.") for n in fused for p in "qkv"}
    qkv = {("model." + n).replace("cross_attn", "encoder_attn") for n in qkv}
    theirs = {t for _, t in pairs} | qkv | {SHARED, *TIED_COPIES}
    assert theirs == set(hf_model.state_dict())
    assert {f"{t}.weight" for _, t in FINAL_NORMS} <= theirs


def test_same_weights_give_same_logits(imported):
    _, hf_model, tokenizer, ours = imported
    tokenizer.src_lang = "en"
    batch = tokenizer(TEXTS["en"][:2], return_tensors="pt", padding=True)
    fr = tokenizer.get_lang_id("fr")
    decoder_ids = torch.tensor([[2, fr, 40, 9, 12, 7], [2, fr, 5, 6, 150, 9]])
    with torch.no_grad():
        theirs = hf_model(**batch, decoder_input_ids=decoder_ids).logits
    inverse = ours.src_vocab.ours
    src = torch.tensor([[inverse[int(t)] for t in row] for row in batch.input_ids])
    tgt = torch.tensor([[BOS] + [inverse[int(t)] for t in row[1:]] for row in decoder_ids])
    with torch.no_grad():
        mine = ours.model(src, tgt).logits
    mapped = torch.stack([mine[..., inverse[m]] for m in range(theirs.shape[-1])], -1)
    assert (mapped - theirs).abs().max() < 1e-4


PAIRS = [("en", "fr"), ("de", "en"), ("fr", "de")]


def _generate(hf_model, tokenizer, src, tgt, **options):
    """HF's outputs for `src` -> `tgt`: the ids after the decoder start, and the text without
    language tokens. <pad> is barred (our search never outputs PAD)."""
    tokenizer.src_lang = src
    batch = tokenizer(TEXTS[src], return_tensors="pt", padding=True)
    generated = hf_model.generate(
        **batch,
        forced_bos_token_id=tokenizer.get_lang_id(tgt),
        forced_eos_token_id=2,
        max_new_tokens=13,
        bad_words_ids=[[hf_model.config.pad_token_id]],
        do_sample=False,
        **options,
    )
    rows = [[t for t in row[1:].tolist() if t != hf_model.config.pad_token_id] for row in generated]
    languages = set(tokenizer.lang_code_to_id.values())  # not special tokens in transformers 5
    return rows, [
        tokenizer.decode([t for t in row if t not in languages], skip_special_tokens=True) for row in rows
    ]


def _ours(ours, src, tgt, search):
    """Our outputs with the language tokens given as `language_tokens` says: typed before each
    source, and forced as each output's prefix. Limit 12 tokens (HF: 12 and a forced </s>)."""
    prefixes = language_tokens(ours, tgt, src)
    vocab = ours.src_vocab
    sources = encode_sources([vocab.encode(" ".join([*prefixes.source, t])) for t in TEXTS[src]])
    forced = [vocab.encode(" ".join(prefixes.target))] * len(TEXTS[src])
    hyps = search(ours.model, sources, max_len_a=0.0, max_len_b=12, prefixes=forced)
    rows = [[vocab.perm[t] for t in h.tokens] + [2] for h in hyps]  # HF's </s>, forced at the limit
    return rows, [vocab.decode(h.tokens) for h in hyps]


@pytest.mark.parametrize(("src", "tgt"), PAIRS)
def test_greedy_equals_generate_with_forced_target_language(imported, src, tgt):
    _, hf_model, tokenizer, ours = imported
    expected = _generate(hf_model, tokenizer, src, tgt, num_beams=1)
    assert _ours(ours, src, tgt, greedy) == expected


@pytest.mark.parametrize(("src", "tgt"), PAIRS)
def test_beam_equals_generate_without_length_penalty(imported, src, tgt):
    """HF divides by len^alpha, GNMT by ((5 + len) / 6)^alpha: with alpha = 0 both are log P (HF
    scores the forced token 0, we its log-probability: the same for every hypothesis)."""
    _, hf_model, tokenizer, ours = imported

    def beam(model, sources, **options):
        return [h[0] for h in beam_search(model, sources, beam=4, alpha=0.0, **options)]

    expected = _generate(hf_model, tokenizer, src, tgt, num_beams=4, length_penalty=0.0, early_stopping=True)
    assert _ours(ours, src, tgt, beam) == expected


def test_round_trip_is_bit_exact(imported, tmp_path):
    """import -> export gives M2M100's tensors back exactly, and the tokenizer files it read;
    importing the export gives our tensors back exactly."""
    root, hf_model, tokenizer, ours = imported
    export_m2m100(root / "ours", tmp_path / "hf")
    back = transformers.M2M100ForConditionalGeneration.from_pretrained(tmp_path / "hf").eval()
    original = hf_model.state_dict()
    assert set(back.state_dict()) == set(original)
    worst = max((back.state_dict()[k] - v).abs().max().item() for k, v in original.items())
    assert worst == 0.0
    assert all(torch.equal(back.state_dict()[k], v) for k, v in original.items())
    for name in ("vocab.json", "tokenizer_config.json"):
        assert json.loads((tmp_path / "hf" / name).read_text()) == json.loads(
            (root / "hf" / name).read_text()
        )
    again_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf", src_lang="de")
    tokenizer.src_lang = "de"
    assert again_tokenizer(TEXTS["de"]).input_ids == tokenizer(TEXTS["de"]).input_ids
    import_m2m100(tmp_path / "hf", tmp_path / "again")
    first, second = ours.model.state_dict(), load_model(tmp_path / "again").model.state_dict()
    assert set(first) == set(second) and all(torch.equal(first[k], second[k]) for k in first)


def test_language_tokens_give_the_tokenizers_ids(imported):
    _, _, tokenizer, ours = imported
    prefixes = language_tokens(ours, "de", "fr")
    assert prefixes.source == ("__fr__",) and prefixes.target == ("__de__",)
    assert language_tokens(ours.src_vocab, "__de__", "__fr__") == prefixes  # tokens name languages too
    vocab = ours.src_vocab
    for token, code in ((prefixes.source[0], "fr"), (prefixes.target[0], "de")):
        assert [vocab.perm[i] for i in vocab.encode(token)] == [tokenizer.get_lang_id(code)]
    assert vocab.decode(vocab.encode("__de__ hallo welt")) == "hallo welt"  # left out of the text


@pytest.mark.parametrize(
    ("tgt", "src", "fragment"),
    [
        ("xx", "en", "language 'xx' is not one of this model's 100: af, am,"),
        ("de", None, "give it too"),
    ],
)
def test_language_tokens_refuse_in_one_line(imported, tgt, src, fragment):
    with pytest.raises(ValueError, match=fragment) as err:
        language_tokens(imported[3], tgt, src)
    assert "\n" not in str(err.value)


def test_language_tokens_of_a_model_without_them(tmp_path):
    from tiny_models import saved_checkpoint

    native = saved_checkpoint(tmp_path / "native", list("abc"), seed=0)
    with pytest.raises(ValueError, match="has no language tokens"):
        language_tokens(native, "de", "en")


@pytest.mark.parametrize(
    ("search", "options"),
    [
        (["--greedy"], {"num_beams": 1}),
        (["--beam", "4", "--alpha", "0"], {"num_beams": 4, "length_penalty": 0.0, "early_stopping": True}),
    ],
)
def test_translate_with_the_language_tokens_reproduces_generate(imported, tmp_path, search, options):
    """`transduce translate` given what `language_tokens` says (the source's token typed before each
    line, the target's as each line's forced prefix) writes the text HF's generate gives with
    src_lang and forced_bos_token_id."""
    root, hf_model, tokenizer, ours = imported
    for src, tgt in PAIRS:
        prefixes = language_tokens(ours, tgt, src)
        (tmp_path / "in").write_text("".join(f"{prefixes.source[0]} {text}\n" for text in TEXTS[src]))
        (tmp_path / "prefix").write_text(f"{prefixes.target[0]}\n" * len(TEXTS[src]))
        args = [
            "translate",
            str(root / "ours"),
            "-i",
            str(tmp_path / "in"),
            "--prefix",
            str(tmp_path / "prefix"),
        ]
        result = CliRunner().invoke(app, [*args, "--max-len-a", "0", "--max-len-b", "12", *search])
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == _generate(hf_model, tokenizer, src, tgt, **options)[1]


def _language_in_vocab_json(folder):
    vocab = json.loads((folder / "vocab.json").read_text())
    vocab["__de__"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab))


def _more_pieces(folder):
    """Damage: 20 more pieces in vocab.json, so that the language tokens no longer fit."""
    vocab = json.loads((folder / "vocab.json").read_text())
    vocab.update({f"extra{i}": len(vocab) + i for i in range(20)})
    (folder / "vocab.json").write_text(json.dumps(vocab))


FC1 = "model.encoder.layers.0.fc1.weight"
NORM = "model.decoder.layer_norm.weight"

# (row id, damage to a good M2M100 directory, expected message fragment)
BAD_M2M100 = [
    ("config-missing", remove("config.json"), "no config.json"),
    ("config-bad-json", write("config.json", b'{"model_type": '), "config.json: not a readable JSON"),
    ("config-list", write("config.json", b"[1]"), "config.json: must hold a JSON object, not list"),
    (
        "config-marian",
        edit_json("config.json", model_type="marian"),
        "model_type is 'marian', not 'm2m_100'",
    ),
    ("d_model-float", edit_json("config.json", d_model=32.0), "d_model must be an integer from 1 to 65536"),
    ("heads-differ", edit_json("config.json", decoder_attention_heads=2), "differ in heads or FFN width"),
    ("activation", edit_json("config.json", activation_function="tanh"), "activation_function 'tanh'"),
    (
        "scale-string",
        edit_json("config.json", scale_embedding="yes"),
        "scale_embedding must be true or false",
    ),
    ("untied", edit_json("config.json", tie_word_embeddings=False), "an untied lm_head is not supported"),
    ("dropout-string", edit_json("config.json", dropout="high"), "does not map onto a transduce model"),
    ("vocab_size-small", _more_pieces, "vocab_size 179 has no room for vocab.json's 91 entries and the 100"),
    ("vocab_size-shape", edit_json("config.json", vocab_size=1000), "model.shared.weight is torch.float32"),
    (
        "pad-not-pad",
        edit_json("config.json", pad_token_id=0),
        "pad_token_id is 0, but the tokenizer's <pad>",
    ),
    (
        "eos-not-eos",
        edit_json("generation_config.json", eos_token_id=3),
        "eos_token_id is 3, but the tokeniz",
    ),
    (
        "start-string",
        edit_json("generation_config.json", decoder_start_token_id="2"),
        "decoder_start_token_id must",
    ),
    ("pad-range", edit_json("config.json", pad_token_id=10**6), "pad_token_id must be an integer from 0"),
    ("weights-missing", remove("model.safetensors"), "no model.safetensors"),
    ("weights-garbage", write("model.safetensors", b"garbage!" * 8), "not a readable safetensors file"),
    ("tensor-missing", edit_tensors(lambda w: w.pop(FC1)), f"M2M100 weights lack {FC1}"),
    ("final-norm-missing", edit_tensors(lambda w: w.pop(NORM)), f"M2M100 weights lack {NORM}"),
    (
        "tensor-extra",
        edit_tensors(lambda w: w.update(extra=w[FC1].clone())),
        "M2M100 tensors not mapped: ['extra']",
    ),
    ("norm-shape", edit_tensors(lambda w: w.update({NORM: w[NORM][:4]})), f"{NORM} is torch.float32 (4,)"),
    (
        "tokenizer-class",
        edit_json("tokenizer_config.json", tokenizer_class="BertTokenizer"),
        "'BertTokenizer'",
    ),
    (
        "codes",
        edit_json("tokenizer_config.json", language_codes="all"),
        "language_codes 'all' is not one of",
    ),
    ("vocab-missing", remove("vocab.json"), "vocab.json: missing"),
    ("vocab-holds-language", _language_in_vocab_json, "holds the language token __de__"),
    ("vocab-no-unk", edit_json("vocab.json", **{"<unk>": None}), "lacks fairseq's special token <unk>"),
    ("spm-missing", remove("sentencepiece.bpe.model"), "sentencepiece.bpe.model: missing tokenizer file"),
    ("spm-garbage", write("sentencepiece.bpe.model", b"not a model"), "not a sentencepiece model"),
    ("spm-empty", write("sentencepiece.bpe.model", b""), "empty, not a sentencepiece model"),
    # issue 87's sweep (2026-12-04): pipes hung, a device was read without end
    ("config-pipe", pipe("config.json"), "config.json: not a regular file (a directory, pipe or device)"),
    ("weights-pipe", pipe("model.safetensors"), "model.safetensors: not a regular file"),
    ("spm-pipe", pipe("sentencepiece.bpe.model"), "sentencepiece.bpe.model: not a regular file"),
    ("vocab-pipe", pipe("vocab.json"), "vocab.json: not a regular file"),
    ("weights-device", linked_to_a_device("model.safetensors"), "model.safetensors: not a regular file"),
]


@pytest.fixture
def damaged(imported, tmp_path):
    """A copy of the good M2M100 directory, and an empty parent for the output."""
    folder = tmp_path / "hf"
    shutil.copytree(imported[0] / "hf", folder)
    (tmp_path / "outs").mkdir()
    return folder, tmp_path / "outs"


@pytest.mark.parametrize(("damage", "fragment"), [pytest.param(d, f, id=i) for i, d, f in BAD_M2M100])
def test_malformed_directory_is_refused_in_one_line(damaged, damage, fragment):
    folder, outs = damaged
    damage(folder)
    with pytest.raises(ConversionError) as err:
        import_m2m100(folder, outs / "out")
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)
    assert sorted(p.name for p in outs.iterdir()) == []


NLLB_CODES = {"en": "eng_Latn", "de": "deu_Latn", "fr": "fra_Latn"}


def make_nllb(folder, seed=1):
    """A random NLLB directory: sentencepiece.bpe.model, and tokenizer.json and
    tokenizer_config.json as NllbTokenizer writes them (fairseq's ids, then `<mask>` and the
    language codes among its added tokens); two rows past them have no token, as NLLB-200's."""
    folder.mkdir(parents=True, exist_ok=True)
    proto = train_spm([t for texts in TEXTS.values() for t in texts] * 20, 70)
    (folder / "sentencepiece.bpe.model").write_bytes(proto)
    tokenizer = transformers.NllbTokenizer.from_pretrained(
        str(folder), additional_special_tokens=sorted(NLLB_CODES.values())
    )
    tokenizer.save_pretrained(folder)
    model = random_m2m100(len(tokenizer) + 2, seed)
    model.save_pretrained(folder)
    return model, transformers.AutoTokenizer.from_pretrained(str(folder))


@pytest.fixture(scope="module")
def nllb(tmp_path_factory):
    root = tmp_path_factory.mktemp("nllb")
    hf_model, tokenizer = make_nllb(root / "hf")
    import_m2m100(root / "hf", root / "ours")
    return root, hf_model, tokenizer, load_model(root / "ours")


def test_nllb_ids_and_text_equal_nllb_tokenizer(nllb):
    """Sources (the language code first), and decoded text with the specials and codes left out.
    Spaces next to a special token in the text are left aside: transformers 5's tokenizers-library
    NllbTokenizer keeps such a space as a piece `▁`, sentencepiece (and so we, and transformers 4's
    NllbTokenizer) drop it."""
    _, _, tokenizer, ours = nllb
    vocab = ours.src_vocab
    assert set(vocab.languages.tokens) == set(NLLB_CODES.values())
    for code in NLLB_CODES.values():
        tokenizer.src_lang = code
        for text in [*[t for texts in TEXTS.values() for t in texts], "a</s>b<unk>c", "unseen wörds"]:
            assert _model_input(vocab, f"{code} {text}") == tokenizer(text).input_ids, (code, text)
    rng = random.Random(1)
    size = len(vocab.perm) - 1
    for _ in range(300):
        ids = [rng.randrange(size) for _ in range(rng.randint(1, 12))]
        assert vocab.decode([vocab.ours[i] for i in ids]) == tokenizer.decode(
            ids, skip_special_tokens=True
        ), ids


@pytest.mark.parametrize("beams", [1, 4])
def test_nllb_generate_equals_ours(nllb, beams):
    _, hf_model, tokenizer, ours = nllb
    vocab = ours.src_vocab
    for src, tgt in PAIRS:
        tokenizer.src_lang = NLLB_CODES[src]
        batch = tokenizer(TEXTS[src], return_tensors="pt", padding=True)
        generated = hf_model.generate(
            **batch,
            forced_bos_token_id=tokenizer.convert_tokens_to_ids(NLLB_CODES[tgt]),
            forced_eos_token_id=2,
            max_new_tokens=13,
            bad_words_ids=[[1]],
            num_beams=beams,
            length_penalty=0.0,
            early_stopping=True,
        )
        expected = tokenizer.batch_decode(generated, skip_special_tokens=True)
        prefixes = language_tokens(ours, NLLB_CODES[tgt], NLLB_CODES[src])
        sources = encode_sources([vocab.encode(f"{prefixes.source[0]} {t}") for t in TEXTS[src]])
        forced = [vocab.encode(prefixes.target[0])] * len(TEXTS[src])
        hyps = beam_search(
            ours.model, sources, beam=beams, alpha=0.0, max_len_a=0.0, max_len_b=12, prefixes=forced
        )
        assert [vocab.decode(h[0].tokens) for h in hyps] == expected


def test_nllb_round_trip(nllb, tmp_path):
    root, hf_model, tokenizer, _ = nllb
    export_m2m100(root / "ours", tmp_path / "hf")
    back = transformers.M2M100ForConditionalGeneration.from_pretrained(tmp_path / "hf").eval()
    assert all(torch.equal(back.state_dict()[k], v) for k, v in hf_model.state_dict().items())
    assert json.loads((tmp_path / "hf" / "tokenizer.json").read_text()) == json.loads(
        (root / "hf" / "tokenizer.json").read_text()
    )
    again = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"), src_lang="deu_Latn")
    tokenizer.src_lang = "deu_Latn"
    assert again(TEXTS["de"]).input_ids == tokenizer(TEXTS["de"]).input_ids


def _nllb_damage(name, change):
    def damage(folder):
        data = json.loads((folder / name).read_text())
        change(data)
        (folder / name).write_text(json.dumps(data))

    return damage


BAD_NLLB = [
    ("tokenizer-json-missing", remove("tokenizer.json"), "tokenizer.json: missing"),
    (
        "legacy",
        edit_json("tokenizer_config.json", legacy_behaviour=True),
        "legacy_behaviour puts the source",
    ),
    (
        "no-model",
        _nllb_damage("tokenizer.json", lambda d: d.pop("model")),
        "no model vocabulary and added-token",
    ),
    (
        "id-range",
        _nllb_damage("tokenizer.json", lambda d: d["added_tokens"][-1].update(id=10**6)),
        "tokenizer.json: ids must be integers from 0 to",
    ),
]


@pytest.mark.parametrize(("damage", "fragment"), [pytest.param(d, f, id=i) for i, d, f in BAD_NLLB])
def test_malformed_nllb_directory_is_refused_in_one_line(nllb, tmp_path, damage, fragment):
    shutil.copytree(nllb[0] / "hf", tmp_path / "hf")
    damage(tmp_path / "hf")
    with pytest.raises(ConversionError) as err:
        import_m2m100(tmp_path / "hf", tmp_path / "out")
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_ctranslate2_export_decodes_as_ours(imported, tmp_path):
    """The CTranslate2 export of an imported model (fairseq's position table precomputed) gives
    our greedy output, the target language forced as a prefix."""
    import ctranslate2

    from transduce.interop.ctranslate2 import export_ctranslate2

    root, _, _, ours = imported
    export_ctranslate2(root / "ours", tmp_path / "ct2")
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    vocab = ours.src_vocab
    for src, tgt in PAIRS:
        prefixes = language_tokens(ours, tgt, src)
        sources = [vocab.encode(f"{prefixes.source[0]} {text}") for text in TEXTS[src]]
        forced = vocab.encode(prefixes.target[0])
        hyps = greedy(ours.model, encode_sources(sources), max_len_a=0.0, max_len_b=12, prefixes=[forced] * 3)
        results = translator.translate_batch(
            [[vocab.token(i) for i in ids] + [vocab.token(EOS)] for ids in sources],
            target_prefix=[[vocab.token(i) for i in forced]] * 3,
            beam_size=1,
            max_decoding_length=12,
        )
        assert [r.hypotheses[0] for r in results] == [[vocab.token(i) for i in h.tokens] for h in hyps]


@pytest.mark.parametrize(
    ("row", "fragment"),
    [("config-marian", "not 'm2m_100'"), ("codes", "language_codes 'all'"), ("spm-garbage", "sentencepiece")],
)
def test_cli_import_m2m100_prints_one_error_line(damaged, row, fragment):
    folder, outs = damaged
    dict((i, d) for i, d, _ in BAD_M2M100)[row](folder)
    run = subprocess.run(
        [sys.executable, "-m", "transduce", "import", "m2m100", str(folder), "-o", str(outs / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1, run.stderr
    assert fragment in run.stderr and "Traceback" not in run.stderr
    assert sorted(p.name for p in outs.iterdir()) == []


FOREIGN = [  # a command given the Hugging Face directory where a checkpoint belongs
    ("translate", lambda hf, out: ["translate", str(hf)]),
    (
        "score",
        lambda hf, out: ["score", str(hf), "--src", str(hf / "vocab.json"), "--tgt", str(hf / "vocab.json")],
    ),
    ("export", lambda hf, out: ["export", str(hf), "--format", "ctranslate2", "-o", str(out)]),
]


@pytest.mark.parametrize("argv", [f[1] for f in FOREIGN], ids=[f[0] for f in FOREIGN])
def test_a_hugging_face_directory_as_a_checkpoint_says_to_import_it(imported, tmp_path, argv):
    """Read as a checkpoint, its config.json gave a list of missing fields (issue 87's sweep,
    2026-12-04); the Python API raises the same CheckpointError."""
    hf = imported[0] / "hf"
    result = CliRunner().invoke(app, argv(hf, tmp_path / "out"))
    expected = (
        f"{hf}: a Hugging Face model directory (model_type 'm2m_100'), not a transduce checkpoint; "
        f"convert it with `transduce import m2m100 {hf} -o DIR`"
    )
    assert result.exit_code == 2 and result.output.count("error:") == 1, result.output
    assert expected in " ".join(result.output.split()) and not (tmp_path / "out").exists()
    with pytest.raises(CheckpointError, match=re.escape(expected)):
        transduce.load(hf)


def test_cli_import_and_export_m2m100(imported, tmp_path):
    root, hf_model, _, ours = imported
    result = CliRunner().invoke(app, ["import", "m2m100", str(root / "hf"), "-o", str(tmp_path / "ckpt")])
    assert result.exit_code == 0, result.output
    # compared without white space: the console wraps at 80 columns, folding a long temporary path
    assert "2+2pre-normlayers,d=32" in "".join(result.output.split())
    again = load_model(tmp_path / "ckpt").model.state_dict()
    assert all(torch.equal(tensor, again[name]) for name, tensor in ours.model.state_dict().items())
    args = ["export", str(tmp_path / "ckpt"), "--format", "m2m100", "-o", str(tmp_path / "hf")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    back = load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert all(
        torch.equal(back[name], tensor) for name, tensor in hf_model.state_dict().items() if name in back
    )


def test_export_m2m100_refuses_a_model_it_cannot_hold(imported, tmp_path):
    """A native checkpoint (its own vocabulary, post-norm, the paper's sinusoids): one line
    naming what M2M100 needs."""
    from tiny_models import saved_checkpoint

    saved_checkpoint(tmp_path / "native", list("abc"), seed=0)
    args = ["export", str(tmp_path / "native"), "--format", "m2m100", "-o", str(tmp_path / "hf")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "cannot export losslessly: M2M100 needs one fairseq vocabulary" in result.output
    assert "norm=pre" in result.output and not (tmp_path / "hf").exists()


@pytest.mark.parametrize(("src", "tgt"), PAIRS)
def test_source_and_target_languages_by_name_reproduce_generate(imported, src, tgt):
    """`tgt_lang` and `src_lang` (translate's --tgt-lang and --src-lang) put the source language's
    token first and force the target language's: the text HF's generate gives; and scoring a
    translation with them equals scoring it with the tokens given by hand."""
    _, hf_model, tokenizer, ours = imported
    expected = _generate(hf_model, tokenizer, src, tgt, num_beams=1)[1]
    found = transduce.translate(
        ours, TEXTS[src], greedy=True, max_len_a=0.0, max_len_b=12, tgt_lang=tgt, src_lang=src
    )
    assert found == expected
    prefixes = language_tokens(ours, tgt, src)
    typed = [f"{prefixes.source[0]} {text}" for text in TEXTS[src]]
    by_name = transduce.score(ours, TEXTS[src], expected, tgt_lang=tgt, src_lang=src)
    by_hand = transduce.score(ours, typed, [f"{prefixes.target[0]} {text}" for text in expected])
    assert [s.log_prob for s in by_name] == pytest.approx([s.log_prob for s in by_hand])


LANGUAGE_ERRORS = [  # the arguments, as the Python API names them (the command line's options: --tgt-lang)
    ({"tgt_lang": "de"}, "tgt_lang de goes with src_lang: this model reads the source language"),
    ({"tgt_lang": "xx", "src_lang": "en"}, "tgt_lang xx: language 'xx' is not one of this model's"),
    ({"tgt_lang": "de", "src_lang": "xx"}, "src_lang xx: language 'xx' is not one of this model's"),
    ({"src_lang": "en"}, "src_lang en goes with tgt_lang"),
]


@pytest.mark.parametrize(("languages", "fragment"), LANGUAGE_ERRORS)
def test_a_language_the_model_cannot_read_is_one_clear_error(imported, languages, fragment):
    """The same through the API and the command line, each naming its own argument or option
    (the command line's said "give it too" for --src-lang before issue 87's sweep, 2026-12-04)."""
    root, _, _, ours = imported
    with pytest.raises(ValueError, match=re.escape(fragment)):
        transduce.translate(ours, TEXTS["en"], **languages)
    options = [word for name, code in languages.items() for word in (f"--{name.replace('_', '-')}", code)]
    result = CliRunner().invoke(app, ["translate", str(root / "ours"), *options], input="hello world\n")
    as_options = fragment.replace("tgt_lang", "--tgt-lang").replace("src_lang", "--src-lang")
    assert result.exit_code == 2 and result.output.count("error:") == 1, result.output
    assert as_options in " ".join(result.output.split())
