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
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from ..config import DEPTH_MAX, POSITIONS_MAX, WIDTH_MAX, Config, ConfigError, build_config
from ..data.vocab import BOS, EOS, PAD, MarianVocab
from ..fileio import atomic_directory, check_output_dir, write_safetensors
from ..model import build_model
from ..model.kinds import assembly_for
from ..store.checkpoint import save_checkpoint
from ..store.load import load_model
from ..store.meta import CheckpointMeta


class MarianError(ValueError):
    """A Marian directory or a checkpoint that cannot be converted; says why."""


ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
# config.json's integer sizes and their largest values (our config's bounds)
STRUCTURE_KEYS = {
    "d_model": WIDTH_MAX,
    "encoder_layers": DEPTH_MAX,
    "decoder_layers": DEPTH_MAX,
    "encoder_attention_heads": WIDTH_MAX,
    "decoder_attention_heads": WIDTH_MAX,
    "encoder_ffn_dim": WIDTH_MAX,
    "decoder_ffn_dim": WIDTH_MAX,
}
VOCAB_MAX = 1 << 22  # real vocabularies stay below 300k; the id permutation is a list this long
# Marian tensors outside the layers, each (vocab_size, d_model) or, for the bias, (1, vocab_size)
EMBEDDINGS = (
    "model.shared.weight",
    "model.encoder.embed_tokens.weight",
    "model.decoder.embed_tokens.weight",
    "lm_head.weight",
)
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
# Our BOS row repeats a Marian row (its decoder start; our ids keep PAD and BOS apart where
# Marian's pad is its start), so its logit would count that token twice in every softmax: a
# score off by about log((V + 1) / V) per token. The output bias masks it. exp(-1e4) is 0 in
# float32, as exp(-inf) is, but the mask stays finite for label smoothing's mean over the
# vocabulary when fine-tuning, and within float16's range.
MASKED_LOGIT = -1e4
FUSED = {
    "encoder": [("self_attn", "self_attn")],
    "decoder": [("self_attn", "self_attn"), ("cross_attn", "encoder_attn")],
}


def special_permutation(vocab_size: int, pad: int, unk: int, eos: int, start: int) -> list[int]:
    """perm[our id] = Marian id: specials first, then Marian's other ids in order."""
    rest = [i for i in range(vocab_size) if i not in (pad, unk, eos)]
    return [pad, unk, start, eos, *rest]


def _read_json(path: Path) -> Any:
    """A JSON file's content; a missing, unreadable or malformed file is a MarianError naming it."""
    if not path.exists():
        raise MarianError(f"{path}: missing")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise MarianError(f"{path}: not a readable JSON file: {exc}") from None


def _read_marian(hf_dir: Path) -> tuple[dict[str, Any], dict[str, Tensor]]:
    config_file = hf_dir / "config.json"
    if not config_file.exists():
        raise MarianError(f"{hf_dir}: no config.json (not a Hugging Face model directory)")
    hf = _read_json(config_file)
    if not isinstance(hf, dict):
        raise MarianError(f"{config_file}: must hold a JSON object, not {type(hf).__name__}")
    if hf.get("model_type") != "marian":
        raise MarianError(f"{config_file}: model_type is {hf.get('model_type')!r}, not 'marian'")
    weights_file = hf_dir / "model.safetensors"
    if not weights_file.exists():
        raise MarianError(
            f"{hf_dir}: no model.safetensors (pickled pytorch_model.bin is not loaded, "
            "for safety; convert it with save_pretrained(safe_serialization=True))"
        )
    try:
        weights = load_file(str(weights_file))
    except (SafetensorError, OSError) as exc:
        raise MarianError(f"{weights_file}: not a readable safetensors file: {exc}") from None
    return hf, weights


def _int_key(hf: dict[str, Any], key: str, low: int, high: int) -> int:
    """config.json's integer `key` within [low, high]; bools and floats are not integers here."""
    value = hf.get(key)
    if type(value) is not int or not low <= value <= high:
        raise MarianError(f"config.json: {key} must be an integer from {low} to {high} (got {value!r})")
    return value


def marian_config(hf: dict[str, Any]) -> Config:
    """Our config for a Marian config.json: every convention an explicit option. Its position
    table is not imported (our sinusoids are computed), but a size below 1 means a broken file."""
    sizes = {key: _int_key(hf, key, 1, high) for key, high in STRUCTURE_KEYS.items()}
    if hf.get("max_position_embeddings") is not None:
        _int_key(hf, "max_position_embeddings", 1, POSITIONS_MAX)
    if (
        sizes["encoder_attention_heads"] != sizes["decoder_attention_heads"]
        or sizes["encoder_ffn_dim"] != sizes["decoder_ffn_dim"]
    ):
        raise MarianError(
            "encoder and decoder differ in heads or FFN width, which transduce does not support"
        )
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
        "d_model": sizes["d_model"],
        "heads": sizes["encoder_attention_heads"],
        "d_ff": sizes["encoder_ffn_dim"],
        "encoder_layers": sizes["encoder_layers"],
        "decoder_layers": sizes["decoder_layers"],
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


def _special_ids(hf: dict[str, Any], pieces: dict[str, int], size: int) -> tuple[int, int, int, int]:
    """(pad, unk, eos, decoder start): in range, and pad, unk and EOS distinct, as the
    permutation needs one row of its own for each; vocab.json names the pad id `<pad>`."""
    pad = _int_key(hf, "pad_token_id", 0, size - 1)
    eos = _int_key(hf, "eos_token_id", 0, size - 1)
    given = hf.get("decoder_start_token_id") is not None
    start = _int_key(hf, "decoder_start_token_id", 0, size - 1) if given else pad
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


def _read_pieces(path: Path, vocab_size: int) -> dict[str, int]:
    """vocab.json: an object from piece to Marian id, ids within the embedding table."""
    pieces = _read_json(path)
    if not isinstance(pieces, dict):
        raise MarianError(f"{path}: must hold a JSON object from piece to id, not {type(pieces).__name__}")
    bad = [p for p, i in pieces.items() if type(i) is not int or not 0 <= i < vocab_size]
    if bad:
        raise MarianError(
            f"{path}: ids must be integers from 0 to {vocab_size - 1} (vocab_size); "
            f"{len(bad)} entries are not, e.g. {bad[0]!r}: {pieces[bad[0]]!r}"
        )
    shared = [i for i, n in Counter(pieces.values()).items() if n > 1]
    if shared:
        names = sorted(p for p, i in pieces.items() if i == shared[0])
        raise MarianError(
            f"{path}: each piece needs an id of its own, but id {shared[0]} is given to {names[:3]} "
            f"({len(names)} pieces; ids shared: {len(shared)})"
        )
    return pieces


def _check_shapes(cfg: Config, weights: dict[str, Tensor], vocab_size: int, file: Path) -> None:
    """Each Marian tensor the import uses must be a float tensor of the shape config.json implies;
    our model is built on the meta device (no memory) to say which."""
    with torch.device("meta"):
        ours = build_model(cfg.model, vocab_size, vocab_size).state_dict()
    d = cfg.model.d_model
    wanted = {name: (vocab_size, d) for name in EMBEDDINGS}
    wanted["final_logits_bias"] = (1, vocab_size)
    wanted.update({theirs: tuple(ours[mine].shape) for mine, theirs in _layer_pairs(cfg)})
    for mine, theirs in _fused_names(cfg):
        for leaf in ("weight", "bias"):
            rows, *rest = ours[f"{mine}.in_proj.{leaf}"].shape
            wanted.update({f"{theirs}.{p}_proj.{leaf}": (rows // 3, *rest) for p in "qkv"})
    for name, shape in wanted.items():
        tensor = weights.get(name)
        if tensor is not None and (tuple(tensor.shape) != shape or not tensor.is_floating_point()):
            raise MarianError(
                f"{file}: {name} is {tensor.dtype} {tuple(tensor.shape)}, but config.json "
                f"(vocab_size, d_model, FFN width) implies a float tensor of shape {shape}"
            )


def _read_vocab(path: Path, pieces: dict[str, int], perm: list[int]) -> MarianVocab:
    """A sentencepiece model file behind the Marian ids. An empty one is refused before
    sentencepiece sees it: it would load as an uninitialised model that fails on first use."""
    if not path.is_file():
        raise MarianError(f"{path}: missing tokenizer file {path.name}")
    try:
        proto = path.read_bytes()
    except OSError as exc:
        raise MarianError(f"{path}: cannot be read: {exc.strerror}") from None
    if not proto:
        raise MarianError(f"{path}: empty, not a sentencepiece model")
    try:
        return MarianVocab(proto, pieces, perm)
    except RuntimeError:
        raise MarianError(f"{path}: not a sentencepiece model (sentencepiece cannot parse it)") from None


def import_marian(hf_dir: Path, out: Path, force: bool = False) -> Config:
    """Convert a MarianMTModel directory into a transduce checkpoint directory; `out` is
    replaced only if `import marian` wrote it (or `force`).

    Everything is read and checked before anything is written, so a malformed directory
    leaves no trace beside `out`."""

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
    vocab_size = _int_key(hf, "vocab_size", 4, VOCAB_MAX)
    _check_shapes(cfg, weights, vocab_size, hf_dir / "model.safetensors")
    pieces = _read_pieces(hf_dir / "vocab.json", vocab_size)
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
