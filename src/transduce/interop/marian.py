"""Hugging Face MarianMTModel directories <-> transduce checkpoints.

Marian is the vanilla Transformer with a few different conventions, each mapped onto a
config option: sinusoids in halves (`model.pos_layout = "halves"`), the FFN activation
(`swish`), a final logits bias, and its own special ids (EOS 0, UNK 1, PAD last, decoding
starting from PAD). Our ids are fixed (PAD 0, UNK 1, BOS 2, EOS 3), so embedding rows are
permuted on import: row r of ours is Marian's row `perm[r]`, BOS taking the decoder-start row,
whose output logit the bias masks (Marian counts that token once). Export applies the inverse.
One declarative table maps every other tensor name.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..config import POSITIONS_MAX, Config, ConfigError, build_config
from ..data.vocab import BOS, EOS, PAD, MarianVocab
from ..fileio import atomic_directory, check_output_dir, write_safetensors
from ..model.kinds import assembly_for
from ..store.checkpoint import save_checkpoint
from ..store.load import load_model
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
    read_pieces,
    read_spm,
    special_permutation,
    structure,
)

# One error type for every Hugging Face conversion (bart.py's helpers raise it too).
MarianError = ConversionError

ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
# Marian tensors outside the layers, each (vocab_size, d_model) or, for the bias, (1, vocab_size)
EMBEDDINGS = (
    "model.shared.weight",
    "model.encoder.embed_tokens.weight",
    "model.decoder.embed_tokens.weight",
    "lm_head.weight",
)


def marian_config(hf: dict[str, Any]) -> Config:
    """Our config for a Marian config.json: every convention an explicit option. Its position
    table is not imported (our sinusoids are computed), but a size below 1 means a broken file."""
    sizes = structure(hf)
    if hf.get("max_position_embeddings") is not None:
        int_key(hf, "max_position_embeddings", 1, POSITIONS_MAX)
    activation = hf.get("activation_function", "swish")
    act = ACTIVATIONS.get(activation) if isinstance(activation, str) else None
    if act is None:
        raise MarianError(
            f"config.json: activation_function {activation!r} is not one of {sorted(ACTIVATIONS)}"
        )
    if hf.get("normalize_before", False):
        raise MarianError("pre-norm Marian models are not supported")
    shared = hf.get("share_encoder_decoder_embeddings", True)
    if not isinstance(shared, bool):
        raise MarianError(
            f"config.json: share_encoder_decoder_embeddings must be true or false (got {shared!r})"
        )
    model = {
        **sizes,
        "dropout": hf.get("dropout", 0.1),
        "attention_dropout": hf.get("attention_dropout", 0.0),
        "ffn_dropout": hf.get("activation_dropout", 0.0),
        "norm": "post",
        "activation": act,
        "positions": "sinusoidal",
        "pos_layout": "halves",
        "scale_embeddings": hf.get("scale_embedding", True),
        "tie_embeddings": "all" if shared else "decoder",
        "final_logits_bias": True,
        "layer_norm_eps": 1e-5,
    }
    decode = {"beam": hf.get("num_beams") or 4, "max_len_a": 1.0, "max_len_b": 50}
    try:
        return build_config({"model": model, "decode": decode})
    except ConfigError as exc:
        raise MarianError(f"config.json does not map onto a transduce model: {exc}") from None


def marian_to_ours(
    cfg: Config, weights: dict[str, Tensor], perm: list[int], shared: bool
) -> dict[str, Tensor]:
    """Our state dict from Marian tensors; fails naming any tensor left unmapped."""
    used: set[str] = set()

    def take(name: str) -> Tensor:
        if name not in weights:
            raise MarianError(f"Marian weights lack {name}")
        used.add(name)
        return weights[name]

    index = torch.tensor(perm)
    tgt_name = (
        "model.shared.weight"
        if shared and "model.shared.weight" in weights
        else "model.decoder.embed_tokens.weight"
    )
    out = {"tgt_embed.tokens.weight": take(tgt_name).index_select(0, index)}
    if not shared:
        out["src_embed.tokens.weight"] = take("model.encoder.embed_tokens.weight")
    out["output.bias"] = take("final_logits_bias").reshape(-1).index_select(0, index)
    for ours, theirs in layer_pairs(cfg):
        out[ours] = take(theirs)
    out.update(fused_to_ours(cfg, take))
    # Tied copies and position tables carry no information of their own.
    ignorable = {
        "lm_head.weight",
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
        "model.encoder.embed_positions.weight",
        "model.decoder.embed_positions.weight",
    }
    left = set(weights) - used - ignorable
    if left:
        raise MarianError(f"Marian tensors not mapped: {sorted(left)[:5]}")
    return out


def _special_ids(hf: dict[str, Any], pieces: dict[str, int], size: int) -> tuple[int, int, int, int]:
    """(pad, unk, eos, decoder start): in range, and pad, unk and EOS distinct, as the
    permutation needs one row of its own for each; vocab.json names the pad id `<pad>`."""
    pad = int_key(hf, "pad_token_id", 0, size - 1)
    eos = int_key(hf, "eos_token_id", 0, size - 1)
    given = hf.get("decoder_start_token_id") is not None
    start = int_key(hf, "decoder_start_token_id", 0, size - 1) if given else pad
    unk = pieces.get("<unk>", 1)
    if len({pad, unk, eos}) < 3:
        raise MarianError(
            f"config.json: pad_token_id ({pad}), eos_token_id ({eos}) and vocab.json's <unk> id ({unk}) "
            "must differ"
        )
    if "<pad>" not in pieces:
        raise MarianError("vocab.json: no <pad> piece (Marian pads and starts decoding with it)")
    if pieces["<pad>"] != pad:
        raise MarianError(f"vocab.json: <pad> has id {pieces['<pad>']}, config.json's pad_token_id is {pad}")
    return pad, unk, eos, start


def _check_shapes(cfg: Config, weights: dict[str, Tensor], vocab_size: int, file: Path) -> None:
    """Each Marian tensor the import uses must be a float tensor of the shape config.json implies."""
    wanted = {name: (vocab_size, cfg.model.d_model) for name in EMBEDDINGS}
    wanted["final_logits_bias"] = (1, vocab_size)
    check_shapes(weights, {**wanted, **expected_shapes(cfg, vocab_size)}, file)


def _read_vocab(path: Path, pieces: dict[str, int], perm: list[int]) -> MarianVocab:
    """A sentencepiece model file behind the Marian ids."""
    try:
        return MarianVocab(read_spm(path), pieces, perm)
    except RuntimeError:
        raise MarianError(f"{path}: not a sentencepiece model (sentencepiece cannot parse it)") from None


def import_marian(hf_dir: Path, out: Path, force: bool = False) -> Config:
    """Convert a MarianMTModel directory into a transduce checkpoint directory; `out` is
    replaced only if `import marian` wrote it (or `force`).

    Everything is read and checked before anything is written, so a malformed directory
    leaves no trace beside `out`."""

    hf_dir = Path(hf_dir)
    check_output_dir(out, "import marian", [hf_dir], force)
    hf, weights = read_hf_directory(hf_dir, "marian")
    cfg = marian_config(hf)
    shared = hf.get("share_encoder_decoder_embeddings", True)
    if not shared:
        raise MarianError(
            "separate source/target vocabularies (share_encoder_decoder_embeddings=false) "
            "are not supported yet"
        )
    vocab_size = int_key(hf, "vocab_size", 4, VOCAB_MAX)
    _check_shapes(cfg, weights, vocab_size, hf_dir / "model.safetensors")
    pieces = read_pieces(hf_dir / "vocab.json", vocab_size)
    perm = special_permutation(vocab_size, *_special_ids(hf, pieces, vocab_size))
    ours = marian_to_ours(cfg, weights, perm, shared)
    ours["output.bias"] = ours["output.bias"].clone()
    ours["output.bias"][BOS] = MASKED_LOGIT  # the repeated decoder-start row
    src = _read_vocab(hf_dir / "source.spm", pieces, perm)
    tgt = _read_vocab(hf_dir / "target.spm", pieces, perm)
    with tempfile.TemporaryDirectory() as vocab_dir:
        tmp = Path(vocab_dir)
        src.save(tmp / "src")
        tgt.save(tmp / "tgt")
        meta = CheckpointMeta(src_vocab_size=len(perm), tgt_vocab_size=len(perm), imported_from=hf_dir.name)
        save_checkpoint(out, ours, cfg, meta, sorted(tmp.iterdir()), command="import marian", force=force)
    return cfg


def marian_layout(vocab: object) -> tuple[list[int], list[str], int, int]:
    """For each Marian id, our row and token name; plus Marian's pad (= decoder start) and EOS ids.

    Imported vocabularies invert their permutation. Native ones take Marian's own layout, which
    CTranslate2's converter relies on: our BOS row last, named <pad>, as the decoder start;
    our PAD row (padding only, never an input the model sees unmasked) is dropped.
    """
    if isinstance(vocab, MarianVocab):
        size = len(vocab.perm) - 1
        rows = [0] * size
        for ours, theirs in enumerate(vocab.perm):
            if ours != BOS:
                rows[theirs] = ours
        names = [vocab.names.get(m, f"<unused{m}>") for m in range(size)]
        return rows, names, vocab.perm[PAD], vocab.perm[EOS]
    size = len(vocab)  # type: ignore[arg-type]
    rows = [o for o in range(size) if o not in (PAD, BOS)] + [BOS]
    names = [vocab.token(o) for o in rows[:-1]] + ["<pad>"]  # type: ignore[attr-defined]
    return rows, names, len(rows) - 1, rows.index(EOS)


def export_marian(checkpoint: Path, out: Path, force: bool = False) -> None:
    """Write a MarianMTModel directory (config.json, model.safetensors, tokenizer files); `out`
    is replaced only if `export` wrote it (or `force`)."""
    check_output_dir(Path(out), "export", [Path(checkpoint)], force)
    loaded = load_model(checkpoint)
    m = loaded.config.model
    problems = []
    if not assembly_for(m.kind).cross_attention:
        problems.append("only encoder-decoder models")
    if m.arch != "transformer" or m.transition != "ffn":
        problems.append("Marian needs arch=transformer with FFN transitions")
    if m.norm != "post" or m.positions != "sinusoidal" or m.pos_layout != "halves":
        problems.append("Marian needs norm=post, positions=sinusoidal, pos_layout=halves")
    if m.pos_frequencies != "paper" or m.position_offset:
        problems.append("Marian needs pos_frequencies=paper and position_offset=0")
    if m.tie_embeddings != "all" or m.local_window is not None:
        problems.append("Marian needs tie_embeddings=all and no local window")
    if problems:
        raise MarianError(f"{checkpoint}: cannot export losslessly: {'; '.join(problems)}")
    state = loaded.model.state_dict()
    vocab = loaded.src_vocab
    rows, names, pad, eos = marian_layout(vocab)
    marian_size = len(rows)
    index = torch.tensor(rows)
    emb = state["tgt_embed.tokens.weight"].index_select(0, index)
    bias = state.get("output.bias", torch.zeros(len(vocab))).index_select(0, index)
    weights = {"model.shared.weight": emb, "final_logits_bias": bias.reshape(1, -1)}
    cfg = loaded.config
    for ours, theirs in layer_pairs(cfg):
        weights[theirs] = state[ours]
    weights.update(fused_to_theirs(cfg, state))
    pieces = {name: m for m, name in enumerate(names)}
    start = pad
    hf_config = {
        "model_type": "marian",
        "architectures": ["MarianMTModel"],
        "vocab_size": marian_size,
        "decoder_vocab_size": marian_size,
        **hf_sizes(m),
        "max_position_embeddings": max(m.max_positions, 512),
        "scale_embedding": m.scale_embeddings,
        "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": True,
        "pad_token_id": pad,
        "eos_token_id": eos,
        "forced_eos_token_id": eos,
        "decoder_start_token_id": start,
        "is_encoder_decoder": True,
        "num_beams": loaded.config.decode.beam,
    }
    with atomic_directory(Path(out), "export", [Path(checkpoint)], force) as tmp:
        write_safetensors(
            tmp / "model.safetensors",
            {k: v.contiguous() for k, v in weights.items()},
            metadata={"format": "pt"},
        )
        (tmp / "config.json").write_text(json.dumps(hf_config, indent=2), encoding="utf-8")
        (tmp / "vocab.json").write_text(json.dumps(pieces, ensure_ascii=False), encoding="utf-8")
        proto = getattr(vocab, "proto", None)
        if proto is not None:
            (tmp / "source.spm").write_bytes(proto)
            (tmp / "target.spm").write_bytes(getattr(loaded.tgt_vocab, "proto", proto))
