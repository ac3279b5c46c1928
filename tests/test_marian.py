"""Marian interop against Hugging Face transformers: tokens, logits, greedy text, round trip."""

import json

import pytest
import sentencepiece as spm
import torch

from transduce.data.batching import encode_sources
from transduce.data.vocab import BOS
from transduce.decode.search import greedy
from transduce.inference import load_model
from transduce.interop.marian import MarianError, export_marian, import_marian

transformers = pytest.importorskip("transformers", reason="install the 'interop' extra")

TEXT = [
    "the quick brown fox jumps over the lazy dog",
    "a cat sat on the mat near the door",
    "hello world and all the people in it",
    "we translate short sentences here",
] * 30


def make_marian(folder, seed=0):
    """A random MarianMTModel with real sentencepiece tokenizer files, made locally."""
    import io

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXT), model_writer=buffer, vocab_size=45, model_type="unigram", minloglevel=2
    )
    proto = buffer.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=proto)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not sp.is_control(i)]
    vocab = {"</s>": 0, "<unk>": 1}
    for p in pieces:
        vocab.setdefault(p, len(vocab))
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
    (folder / "source.spm").write_bytes(proto)
    (folder / "target.spm").write_bytes(proto)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    return model, transformers.MarianTokenizer(
        str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json")
    )


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("marian")
    hf_model, tokenizer = make_marian(root / "hf")
    import_marian(root / "hf", root / "ours")
    return root, hf_model, tokenizer, load_model(root / "ours")


def test_tokenisation_matches_marian_tokenizer(imported):
    _, _, tokenizer, ours = imported
    for text in ["the lazy dog sat", "hello people", "unseen wörds ok"]:
        marian_ids = tokenizer(text).input_ids[:-1]
        assert [ours.src_vocab.perm[i] for i in ours.src_vocab.encode(text)] == marian_ids


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
        mine = ours.model(src, tgt)
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
    from transduce.decode.search import beam_search

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
