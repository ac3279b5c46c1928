"""Hugging Face MarianMTModel directories <-> transduce checkpoints.

Marian is the vanilla Transformer with a few different conventions, each mapped onto a
config option: sinusoids in halves (`model.pos_layout = "halves"`), the FFN activation
(`swish`), a final logits bias, and its own special ids (EOS 0, UNK 1, PAD last, decoding
starting from PAD). Our ids are fixed (PAD 0, UNK 1, BOS 2, EOS 3), so embedding rows are
permuted on import: row r of ours is Marian's row `perm[r]`, BOS taking the decoder-start row.
Export applies the inverse. One declarative table maps every other tensor name.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import sentencepiece as spm
import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from ..config import Config, build_config
from ..data.vocab import BOS, EOS, PAD, UNK
from ..fileio import atomic_directory, check_output_dir


class MarianError(ValueError):
    """A Marian directory or a checkpoint that cannot be converted; says why."""


ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
# (our sub-module, Marian's), per encoder and decoder layer
LAYER_MAP = {
    "encoder": [
        ("self_attn.out_proj", "self_attn.out_proj"),
        ("self_sub.norm", "self_attn_layer_norm"),
        ("ffn.w1", "fc1"),
        ("ffn.w2", "fc2"),
        ("ffn_sub.norm", "final_layer_norm"),
    ],
    "decoder": [
        ("self_attn.out_proj", "self_attn.out_proj"),
        ("self_sub.norm", "self_attn_layer_norm"),
        ("cross_attn.out_proj", "encoder_attn.out_proj"),
        ("cross_sub.norm", "encoder_attn_layer_norm"),
        ("ffn.w1", "fc1"),
        ("ffn.w2", "fc2"),
        ("ffn_sub.norm", "final_layer_norm"),
    ],
}
FUSED = {
    "encoder": [("self_attn", "self_attn")],
    "decoder": [("self_attn", "self_attn"), ("cross_attn", "encoder_attn")],
}


class MarianVocab:
    """Marian's tokenizer files behind our ids: spm pieces -> vocab.json ids -> permuted ids."""

    def __init__(self, spm_proto: bytes, pieces: dict[str, int], perm: list[int]) -> None:
        self.proto = spm_proto
        self.sp = spm.SentencePieceProcessor(model_proto=spm_proto)
        self.pieces = pieces
        self.perm = perm  # ours -> marian
        self.ours = {m: o for o, m in enumerate(perm) if o != BOS}  # marian -> ours
        self.names = {i: p for p, i in pieces.items()}
        self.unk = self.ours[perm[UNK]]

    def __len__(self) -> int:
        return len(self.perm)

    def encode(self, text: str) -> list[int]:
        return [self.ours.get(self.pieces.get(p, -1), self.unk) for p in self.sp.encode(text, out_type=str)]

    def decode(self, ids: list[int]) -> str:
        return self.sp.decode_pieces([self.names[self.perm[i]] for i in ids if i > EOS])

    def token(self, i: int) -> str:
        return self.names.get(self.perm[i], "<unk>")

    def save(self, prefix: Path) -> None:
        Path(f"{prefix}.marian.spm").write_bytes(self.proto)
        Path(f"{prefix}.marian.json").write_text(
            json.dumps({"pieces": self.pieces, "perm": self.perm}), encoding="utf-8"
        )

    @classmethod
    def load(cls, prefix: Path) -> MarianVocab:
        data = json.loads(Path(f"{prefix}.marian.json").read_text(encoding="utf-8"))
        return cls(Path(f"{prefix}.marian.spm").read_bytes(), data["pieces"], data["perm"])


def special_permutation(vocab_size: int, pad: int, unk: int, eos: int, start: int) -> list[int]:
    """perm[our id] = Marian id: specials first, then Marian's other ids in order."""
    rest = [i for i in range(vocab_size) if i not in (pad, unk, eos)]
    return [pad, unk, start, eos, *rest]


def _read_marian(hf_dir: Path) -> tuple[dict[str, Any], dict[str, Tensor]]:
    config_file = hf_dir / "config.json"
    if not config_file.exists():
        raise MarianError(f"{hf_dir}: no config.json (not a Hugging Face model directory)")
    hf = json.loads(config_file.read_text(encoding="utf-8"))
    if hf.get("model_type") != "marian":
        raise MarianError(f"{config_file}: model_type is {hf.get('model_type')!r}, not 'marian'")
    if (hf_dir / "model.safetensors").exists():
        weights = load_file(str(hf_dir / "model.safetensors"))
    else:
        raise MarianError(
            f"{hf_dir}: no model.safetensors (pickled pytorch_model.bin is not loaded, "
            "for safety; convert it with save_pretrained(safe_serialization=True))"
        )
    return hf, weights


def marian_config(hf: dict[str, Any]) -> Config:
    """Our config for a Marian config.json: every convention an explicit option."""
    if (
        hf["encoder_attention_heads"] != hf["decoder_attention_heads"]
        or hf["encoder_ffn_dim"] != hf["decoder_ffn_dim"]
    ):
        raise MarianError(
            "encoder and decoder differ in heads or FFN width, which transduce does not support"
        )
    act = ACTIVATIONS.get(hf.get("activation_function", "swish"))
    if act is None:
        raise MarianError(f"activation {hf.get('activation_function')!r} is not one of {sorted(ACTIVATIONS)}")
    if hf.get("normalize_before", False):
        raise MarianError("pre-norm Marian models are not supported")
    shared = hf.get("share_encoder_decoder_embeddings", True)
    model = {
        "d_model": hf["d_model"],
        "heads": hf["encoder_attention_heads"],
        "d_ff": hf["encoder_ffn_dim"],
        "encoder_layers": hf["encoder_layers"],
        "decoder_layers": hf["decoder_layers"],
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
    return build_config({"model": model, "decode": decode})


def _layer_pairs(cfg: Config) -> list[tuple[str, str]]:
    """(our name, Marian name) for every non-fused tensor."""
    m = cfg.model
    pairs = []
    for side, count in (("encoder", m.encoder_layers), ("decoder", m.decoder_layers)):
        for i in range(count):
            for ours, theirs in LAYER_MAP[side]:
                for leaf in ("weight", "bias"):
                    pairs.append(
                        (f"{side}.layers.{i}.{ours}.{leaf}", f"model.{side}.layers.{i}.{theirs}.{leaf}")
                    )
    return pairs


def _fused_names(cfg: Config) -> list[tuple[str, str]]:
    m = cfg.model
    return [
        (f"{side}.layers.{i}.{ours}", f"model.{side}.layers.{i}.{theirs}")
        for side, count in (("encoder", m.encoder_layers), ("decoder", m.decoder_layers))
        for i in range(count)
        for ours, theirs in FUSED[side]
    ]


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
    for ours, theirs in _layer_pairs(cfg):
        out[ours] = take(theirs)
    for ours, theirs in _fused_names(cfg):
        for leaf in ("weight", "bias"):
            out[f"{ours}.in_proj.{leaf}"] = torch.cat([take(f"{theirs}.{p}_proj.{leaf}") for p in "qkv"])
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


def import_marian(hf_dir: Path, out: Path, force: bool = False) -> Config:
    """Convert a MarianMTModel directory into a transduce checkpoint directory; `out` is
    replaced only if `import marian` wrote it (or `force`)."""
    from ..train.checkpoint import save_checkpoint

    hf_dir = Path(hf_dir)
    check_output_dir(out, "import marian", [hf_dir], force)
    hf, weights = _read_marian(hf_dir)
    cfg = marian_config(hf)
    shared = hf.get("share_encoder_decoder_embeddings", True)
    if not shared:
        raise MarianError(
            "separate source/target vocabularies (share_encoder_decoder_embeddings=false) "
            "are not supported yet"
        )
    for name in ("source.spm", "target.spm", "vocab.json"):
        if not (hf_dir / name).exists():
            raise MarianError(f"{hf_dir}: missing tokenizer file {name}")
    pieces = json.loads((hf_dir / "vocab.json").read_text(encoding="utf-8"))
    vocab_size = hf["vocab_size"]
    perm = special_permutation(
        vocab_size,
        hf["pad_token_id"],
        pieces.get("<unk>", 1),
        hf["eos_token_id"],
        hf.get("decoder_start_token_id", hf["pad_token_id"]),
    )
    ours = marian_to_ours(cfg, weights, perm, shared)
    src = MarianVocab((hf_dir / "source.spm").read_bytes(), pieces, perm)
    tgt = MarianVocab((hf_dir / "target.spm").read_bytes(), pieces, perm)
    with tempfile.TemporaryDirectory() as vocab_dir:
        tmp = Path(vocab_dir)
        src.save(tmp / "src")
        tgt.save(tmp / "tgt")
        meta = {
            "src_vocab_size": len(perm),
            "tgt_vocab_size": len(perm),
            "shared_vocab": False,
            "imported_from": hf_dir.name,
        }
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
    from ..inference import load_model

    check_output_dir(Path(out), "export", [Path(checkpoint)], force)
    loaded = load_model(checkpoint)
    m = loaded.config.model
    problems = []
    if m.kind != "encoder_decoder":
        problems.append("only encoder-decoder models")
    if m.arch != "transformer" or m.transition != "ffn":
        problems.append("Marian needs arch=transformer with FFN transitions")
    if m.norm != "post" or m.positions != "sinusoidal" or m.pos_layout != "halves":
        problems.append("Marian needs norm=post, positions=sinusoidal, pos_layout=halves")
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
    for ours, theirs in _layer_pairs(cfg):
        weights[theirs] = state[ours]
    for ours, theirs in _fused_names(cfg):
        for leaf in ("weight", "bias"):
            for part, tensor in zip("qkv", state[f"{ours}.in_proj.{leaf}"].chunk(3), strict=True):
                weights[f"{theirs}.{part}_proj.{leaf}"] = tensor
    pieces = {name: m for m, name in enumerate(names)}
    start = pad
    hf_config = {
        "model_type": "marian",
        "architectures": ["MarianMTModel"],
        "vocab_size": marian_size,
        "decoder_vocab_size": marian_size,
        "d_model": m.d_model,
        "encoder_layers": m.encoder_layers,
        "decoder_layers": m.decoder_layers,
        "encoder_attention_heads": m.heads,
        "decoder_attention_heads": m.heads,
        "encoder_ffn_dim": m.d_ff,
        "decoder_ffn_dim": m.d_ff,
        "activation_function": m.activation,
        "dropout": m.dropout,
        "attention_dropout": m.attention_dropout,
        "activation_dropout": m.ffn_dropout,
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
        save_file(
            {k: v.contiguous() for k, v in weights.items()},
            str(tmp / "model.safetensors"),
            metadata={"format": "pt"},
        )
        (tmp / "config.json").write_text(json.dumps(hf_config, indent=2), encoding="utf-8")
        (tmp / "vocab.json").write_text(json.dumps(pieces, ensure_ascii=False), encoding="utf-8")
        proto = getattr(vocab, "proto", None)
        if proto is not None:
            (tmp / "source.spm").write_bytes(proto)
            (tmp / "target.spm").write_bytes(getattr(loaded.tgt_vocab, "proto", proto))
