"""Hugging Face M2M100ForConditionalGeneration directories (M2M100, NLLB) <-> transduce checkpoints.

The architecture is fairseq's pre-norm Transformer, each of its conventions a config option:
`norm = "pre"` (a final layer norm closing each stack), embeddings scaled by sqrt(d), one table
for source, target and output, and fairseq's sinusoids (`pos_layout = "halves"`, `pos_frequencies
= "tensor2tensor"`, `position_offset` = padding_idx + 1: the first token is position 2), and a
decoder that starts from `</s>`'s row (`decoder_start_row = "eos"`: fine-tuning trains one row for
both uses, as fairseq's does, so a fine-tuned model exports as it computes). Special ids are
permuted as Marian's are (bart.py: our BOS row a copy of `</s>`'s, masked in the output bias); the
tables below map every other tensor, checked both ways.

The vocabulary (data/fairseq_vocab.py, read by fairseq_tokenizers.py) carries the language tokens:
a source starts with its language's token and the decoder's first output is forced to the target
language's (`forced_bos_token_id`). `language_tokens` says which tokens those are for a pair.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..config import POSITIONS_MAX, Config, ConfigError, build_config
from ..data.fairseq_vocab import FairseqVocab
from ..data.vocab import BOS, EOS, PAD, Vocab
from ..fileio import atomic_directory, check_output_dir, write_safetensors
from ..model.kinds import assembly_for
from ..store.checkpoint import save_checkpoint
from ..store.load import LoadedModel, load_model
from ..store.meta import CheckpointMeta
from .bart import (
    MASKED_LOGIT,
    VOCAB_MAX,
    ConversionError,
    check_shapes,
    expected_shapes,
    fused_to_ours,
    fused_to_theirs,
    hf_sizes,
    int_key,
    layer_pairs,
    read_hf_directory,
    read_object,
    special_permutation,
    structure,
)
from .fairseq_tokenizers import fairseq_vocab, read_tokenizer, write_tokenizer

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
SHARED = "model.shared.weight"  # (vocab_size, d_model): source, target and output embeddings
# Copies of the shared table (tied in M2M100): read for their shapes, never mapped
TIED_COPIES = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight")
FINAL_NORMS = [
    ("encoder.final_norm", "model.encoder.layer_norm"),
    ("decoder.final_norm", "model.decoder.layer_norm"),
]
HF_LAYER_NORM_EPS = 1e-5  # torch's default, which M2M100's nn.LayerNorm layers keep


def weight_map(cfg: Config) -> list[tuple[str, str]]:
    """(our tensor, theirs) for every tensor copied as it is: the layers' and the final norms'.
    The shared embedding (rows permuted) and the fused q/k/v (bart.py) are the others."""
    norms = [(f"{o}.{leaf}", f"{t}.{leaf}") for o, t in FINAL_NORMS for leaf in ("weight", "bias")]
    return layer_pairs(cfg) + norms


def _hf_settings(hf: dict[str, Any]) -> tuple[str, bool]:
    """config.json's activation and scale_embedding, checked."""
    activation = hf.get("activation_function", "relu")
    act = ACTIVATIONS.get(activation) if isinstance(activation, str) else None
    if act is None:
        raise ConversionError(
            f"config.json: activation_function {activation!r} is not one of {sorted(ACTIVATIONS)}"
        )
    scale = hf.get("scale_embedding", True)
    if not isinstance(scale, bool):
        raise ConversionError(f"config.json: scale_embedding must be true or false (got {scale!r})")
    if hf.get("tie_word_embeddings", True) is not True:
        raise ConversionError(
            "config.json: tie_word_embeddings is not true; an untied lm_head is not supported"
        )
    return act, scale


def m2m100_config(hf: dict[str, Any], beam: int, starts_at_eos: bool) -> Config:
    """Our config for an M2M100 config.json: every convention an explicit option. Layerdrop is a
    training regulariser our trainer does not apply; the position table is computed, not read.
    `starts_at_eos`: the decoder starts from </s> (fairseq's way), whose row our BOS then reads."""
    sizes = structure(hf)
    act, scale = _hf_settings(hf)
    if hf.get("max_position_embeddings") is not None:
        int_key(hf, "max_position_embeddings", 1, POSITIONS_MAX)
    pad = int_key(hf, "pad_token_id", 0, POSITIONS_MAX - 1)
    model = {
        **sizes,
        "dropout": hf.get("dropout", 0.1),
        "attention_dropout": hf.get("attention_dropout", 0.0),
        "ffn_dropout": hf.get("activation_dropout", 0.0),
        "norm": "pre",
        "activation": act,
        "positions": "sinusoidal",
        "pos_layout": "halves",
        "pos_frequencies": "tensor2tensor",
        "position_offset": pad + 1,
        "scale_embeddings": scale,
        "tie_embeddings": "all",
        "final_logits_bias": True,  # zero but for the mask on our BOS
        "decoder_start_row": "eos" if starts_at_eos else "bos",
        "layer_norm_eps": HF_LAYER_NORM_EPS,
    }
    decode = {"beam": beam, "max_len_a": 1.0, "max_len_b": 50}
    try:
        return build_config({"model": model, "decode": decode})
    except ConfigError as exc:
        raise ConversionError(f"config.json does not map onto a transduce model: {exc}") from None


def m2m100_to_ours(cfg: Config, weights: dict[str, Tensor], perm: list[int]) -> dict[str, Tensor]:
    """Our state dict from M2M100 tensors; fails naming any tensor missing or left unmapped."""
    used: set[str] = set()

    def take(name: str) -> Tensor:
        if name not in weights:
            raise ConversionError(f"M2M100 weights lack {name}")
        used.add(name)
        return weights[name]

    index = torch.tensor(perm)
    out = {"tgt_embed.tokens.weight": take(SHARED).index_select(0, index)}
    bias = torch.zeros(len(perm))
    bias[BOS] = MASKED_LOGIT  # the repeated decoder-start row
    out["output.bias"] = bias
    out.update({ours: take(theirs) for ours, theirs in weight_map(cfg)})
    out.update(fused_to_ours(cfg, take))
    left = set(weights) - used - set(TIED_COPIES)
    if left:
        raise ConversionError(f"M2M100 tensors not mapped: {sorted(left)[:5]}")
    return out


def ours_to_m2m100(cfg: Config, state: dict[str, Tensor], rows: list[int]) -> dict[str, Tensor]:
    """M2M100 tensors from our state dict; `rows[their id]` is our row. Every tensor of ours is
    used (the BOS row and the bias are checked by `_check_exportable`)."""
    weights = {SHARED: state["tgt_embed.tokens.weight"].index_select(0, torch.tensor(rows))}
    weights.update({theirs: state[ours] for ours, theirs in weight_map(cfg)})
    weights.update(fused_to_theirs(cfg, state))
    return weights


def _generation(hf_dir: Path, hf: dict[str, Any]) -> dict[str, Any]:
    """generation_config.json's settings over config.json's (transformers 5 keeps them there)."""
    file = hf_dir / "generation_config.json"
    return {**hf, **(read_object(file) if file.exists() else {})}


def _special_ids(
    hf: dict[str, Any], generation: dict[str, Any], pieces: dict[str, int], size: int
) -> tuple[int, int, int, int]:
    """(pad, unk, eos, decoder start). The pad id is config.json's (the model's padding_idx, which
    numbers the positions); EOS and the decoder start are what generate reads (generation_config.json
    over config.json); pad and EOS must be the tokenizer's <pad> and </s>, the start defaults to EOS."""
    pad = int_key(hf, "pad_token_id", 0, size - 1)
    eos = int_key(generation, "eos_token_id", 0, size - 1)
    given = generation.get("decoder_start_token_id") is not None
    start = int_key(generation, "decoder_start_token_id", 0, size - 1) if given else eos
    for name, key, value in (("<pad>", "pad_token_id", pad), ("</s>", "eos_token_id", eos)):
        if pieces[name] != value:
            raise ConversionError(f"{key} is {value}, but the tokenizer's {name} has id {pieces[name]}")
    unk = pieces["<unk>"]
    if len({pad, unk, eos}) < 3:
        raise ConversionError(f"pad_token_id ({pad}), eos_token_id ({eos}) and <unk> ({unk}) must differ")
    return pad, unk, eos, start


def _check_shapes(cfg: Config, weights: dict[str, Tensor], size: int, file: Path) -> None:
    wanted = {name: (size, cfg.model.d_model) for name in (SHARED, *TIED_COPIES)}
    d = cfg.model.d_model
    wanted.update({f"{t}.{leaf}": (d,) for _, t in FINAL_NORMS for leaf in ("weight", "bias")})
    check_shapes(weights, {**wanted, **expected_shapes(cfg, size)}, file)


def import_m2m100(hf_dir: Path, out: Path, force: bool = False) -> Config:
    """Convert an M2M100ForConditionalGeneration directory (M2M100 or NLLB) into a transduce
    checkpoint directory; `out` is replaced only if `import m2m100` wrote it (or `force`).
    Everything is read and checked before anything is written."""
    hf_dir = Path(hf_dir)
    check_output_dir(out, "import m2m100", [hf_dir], force)
    hf, weights = read_hf_directory(hf_dir, "m2m_100")
    generation = _generation(hf_dir, hf)
    beam = generation.get("num_beams")
    start = generation.get("decoder_start_token_id")
    starts_at_eos = start is None or start == generation.get("eos_token_id")  # both checked below
    cfg = m2m100_config(hf, beam if type(beam) is int and 1 <= beam <= 1000 else 4, starts_at_eos)
    size = int_key(hf, "vocab_size", 4, VOCAB_MAX)
    _check_shapes(cfg, weights, size, hf_dir / "model.safetensors")
    proto, dictionary, carried = read_tokenizer(hf_dir, size)
    perm = special_permutation(size, *_special_ids(hf, generation, dictionary.pieces, size))
    ours = m2m100_to_ours(cfg, weights, perm)
    vocab = fairseq_vocab(proto, dictionary, perm, carried)
    with tempfile.TemporaryDirectory() as vocab_dir:
        vocab.save(Path(vocab_dir) / "src")
        meta = CheckpointMeta(src_vocab_size=len(perm), tgt_vocab_size=len(perm), imported_from=hf_dir.name)
        files = sorted(Path(vocab_dir).iterdir())
        save_checkpoint(out, ours, cfg, meta, files, command="import m2m100", force=force)
    return cfg


def _check_exportable(loaded: LoadedModel, state: dict[str, Tensor]) -> FairseqVocab:
    """The checkpoint's vocabulary; ConversionError naming everything M2M100 cannot hold."""
    m, vocab = loaded.config.model, loaded.src_vocab
    problems = []
    if not isinstance(vocab, FairseqVocab) or loaded.tgt_vocab is not vocab:
        problems.append("one fairseq vocabulary (an `import m2m100` checkpoint's)")
    if not assembly_for(m.kind).cross_attention or m.arch != "transformer" or m.transition != "ffn":
        problems.append("an encoder-decoder with arch=transformer and FFN transitions")
    if m.norm != "pre" or m.tie_embeddings != "all" or m.local_window is not None:
        problems.append("norm=pre, tie_embeddings=all and no local window")
    fairseq = (m.positions, m.pos_layout, m.pos_frequencies) == ("sinusoidal", "halves", "tensor2tensor")
    if isinstance(vocab, FairseqVocab) and (not fairseq or m.position_offset != vocab.perm[PAD] + 1):
        problems.append("fairseq's sinusoids (halves, tensor2tensor, position_offset = pad id + 1)")
    start_row = "eos" if isinstance(vocab, FairseqVocab) and vocab.perm[BOS] == vocab.perm[EOS] else "bos"
    if m.decoder_start_row != start_row:
        problems.append(f"decoder_start_row={start_row} (the decoder starts from that row)")
    if m.layer_norm_eps != HF_LAYER_NORM_EPS:
        problems.append(f"layer_norm_eps={HF_LAYER_NORM_EPS}")
    bias = state.get("output.bias")
    if bias is not None and bias[torch.arange(len(bias)) != BOS].any():
        problems.append("no output bias (M2M100 has none)")
    if problems:
        raise ConversionError(f"{loaded.path}: cannot export losslessly: M2M100 needs {'; '.join(problems)}")
    assert isinstance(vocab, FairseqVocab)
    return vocab


def _hf_config(loaded: LoadedModel, vocab: FairseqVocab) -> dict[str, Any]:
    m = loaded.config.model
    pieces = vocab.pieces
    return {
        "model_type": "m2m_100",
        "architectures": ["M2M100ForConditionalGeneration"],
        "vocab_size": len(vocab.perm) - 1,
        **hf_sizes(m),
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "max_position_embeddings": max(m.max_positions, 1024),
        "scale_embedding": m.scale_embeddings,
        "tie_word_embeddings": True,
        "is_encoder_decoder": True,
        "bos_token_id": pieces["<s>"],
        "pad_token_id": vocab.perm[PAD],
        "eos_token_id": vocab.perm[EOS],
        "decoder_start_token_id": vocab.perm[BOS],
    }


def export_m2m100(checkpoint: Path, out: Path, force: bool = False) -> None:
    """Write an M2M100ForConditionalGeneration directory (config.json, generation_config.json,
    model.safetensors and the tokenizer files it was imported with); `out` is replaced only if
    `export` wrote it (or `force`)."""
    check_output_dir(Path(out), "export", [Path(checkpoint)], force)
    loaded = load_model(checkpoint)
    state = loaded.model.state_dict()
    vocab = _check_exportable(loaded, state)
    rows = [0] * (len(vocab.perm) - 1)
    for ours, theirs in enumerate(vocab.perm):
        if ours != BOS:
            rows[theirs] = ours
    weights = ours_to_m2m100(loaded.config, state, rows)
    hf_config = _hf_config(loaded, vocab)
    generation = {key: hf_config[key] for key in ("bos_token_id", "pad_token_id", "eos_token_id")}
    generation.update(decoder_start_token_id=vocab.perm[BOS], num_beams=loaded.config.decode.beam)
    with atomic_directory(Path(out), "export", [Path(checkpoint)], force) as tmp:
        tensors = {k: v.contiguous() for k, v in weights.items()}
        write_safetensors(tmp / "model.safetensors", tensors, metadata={"format": "pt"})
        for name, content in (("config.json", hf_config), ("generation_config.json", generation)):
            (tmp / name).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
        write_tokenizer(tmp, vocab)


@dataclass(frozen=True)
class LanguagePrefixes:
    """What selects the languages of a translation, as text the model's vocabulary reads as one
    token each: `source` goes before each source line, `target` is forced as the start of each
    output (`translate --prefix`), and the vocabulary leaves it out of the output text."""

    source: tuple[str, ...]
    target: tuple[str, ...]


def language_tokens(loaded: LoadedModel | Vocab, tgt_lang: str, src_lang: str | None) -> LanguagePrefixes:
    """For a model with language tokens (an `import m2m100` checkpoint, or its vocabulary): the
    tokens that translate from `src_lang` into `tgt_lang`, named by code (`de`, `deu_Latn`) or
    by token (`__de__`). ValueError, one line, for a model without them or an unknown language.

    M2M100 and NLLB read the source language from a token before the source (so `src_lang` is
    needed) and produce the target language's token first: `LanguagePrefixes(("__en__",),
    ("__de__",))` for en -> de."""
    vocab = loaded.src_vocab if isinstance(loaded, LoadedModel) else loaded
    if not isinstance(vocab, FairseqVocab):
        raise ValueError(
            "this model's vocabulary has no language tokens (an `import m2m100` checkpoint's has)"
        )
    if src_lang is None:
        raise ValueError("this model reads the source language from a token before the source: give it too")
    languages = vocab.languages
    return LanguagePrefixes(source=(languages.token(src_lang),), target=(languages.token(tgt_lang),))
