"""What Hugging Face's BART-family translation models share (MarianMTModel, and
M2M100ForConditionalGeneration for M2M100 and NLLB): their layers' tensor names, q/k/v as three
projections where ours are fused, config.json's sizes, and the checks a directory passes before
anything is written. Each family's module (marian.py, m2m100.py) adds its own conventions.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from ..config import DEPTH_MAX, WIDTH_MAX, Config, ModelConfig
from ..model import build_model


class ConversionError(ValueError):
    """A Hugging Face directory or a checkpoint that cannot be converted; says why in one line."""


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
# (our sub-module, theirs), per encoder and decoder layer
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
# Our attention's one in_proj is their q_proj, k_proj and v_proj stacked.
FUSED = {
    "encoder": [("self_attn", "self_attn")],
    "decoder": [("self_attn", "self_attn"), ("cross_attn", "encoder_attn")],
}
# Our BOS row repeats one of theirs (their decoder start, which is also a token of theirs), so its
# logit would count that token twice in every softmax: a score off by about log((V + 1) / V) per
# token. The output bias masks it. exp(-1e4) is 0 in float32, as exp(-inf) is, but the mask stays
# finite for label smoothing's mean over the vocabulary when fine-tuning, and within float16's range.
MASKED_LOGIT = -1e4


def special_permutation(vocab_size: int, pad: int, unk: int, eos: int, start: int) -> list[int]:
    """perm[our id] = their id: specials first (our BOS is their decoder start), then their other
    ids in order."""
    rest = [i for i in range(vocab_size) if i not in (pad, unk, eos)]
    return [pad, unk, start, eos, *rest]


def check_regular(path: Path) -> None:
    """ConversionError for a path that is there but is no regular file once links are followed (a
    Hugging Face cache links to its blobs): a directory, or a pipe or device, which could block
    reading for ever."""
    if path.exists() and not path.is_file():
        raise ConversionError(f"{path}: not a regular file (a directory, pipe or device)")


def read_json(path: Path) -> Any:
    """A JSON file's content; a missing, unreadable or malformed file is a ConversionError naming it."""
    if not path.exists():
        raise ConversionError(f"{path}: missing")
    check_regular(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ConversionError(f"{path}: not a readable JSON file: {exc}") from None


def read_object(path: Path) -> dict[str, Any]:
    """`read_json` of a file that must hold a JSON object."""
    content = read_json(path)
    if not isinstance(content, dict):
        raise ConversionError(f"{path}: must hold a JSON object, not {type(content).__name__}")
    return content


def read_hf_directory(hf_dir: Path, model_type: str) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """config.json (of `model_type`) and the weights of a Hugging Face model directory."""
    config_file = hf_dir / "config.json"
    if not config_file.exists():
        raise ConversionError(f"{hf_dir}: no config.json (not a Hugging Face model directory)")
    hf = read_object(config_file)
    if hf.get("model_type") != model_type:
        raise ConversionError(f"{config_file}: model_type is {hf.get('model_type')!r}, not {model_type!r}")
    weights_file = hf_dir / "model.safetensors"
    if not weights_file.exists():
        raise ConversionError(
            f"{hf_dir}: no model.safetensors (pickled pytorch_model.bin is not loaded, "
            "for safety; convert it with save_pretrained(safe_serialization=True))"
        )
    check_regular(weights_file)
    try:
        weights = load_file(str(weights_file))
    except (SafetensorError, OSError) as exc:
        raise ConversionError(f"{weights_file}: not a readable safetensors file: {exc}") from None
    return hf, weights


def int_key(hf: dict[str, Any], key: str, low: int, high: int) -> int:
    """config.json's integer `key` within [low, high]; bools and floats are not integers here."""
    value = hf.get(key)
    if type(value) is not int or not low <= value <= high:
        raise ConversionError(f"config.json: {key} must be an integer from {low} to {high} (got {value!r})")
    return value


def structure(hf: dict[str, Any]) -> dict[str, int]:
    """The sizes our model takes from config.json (d_model, heads, d_ff, layers), checked."""
    sizes = {key: int_key(hf, key, 1, high) for key, high in STRUCTURE_KEYS.items()}
    if (
        sizes["encoder_attention_heads"] != sizes["decoder_attention_heads"]
        or sizes["encoder_ffn_dim"] != sizes["decoder_ffn_dim"]
    ):
        raise ConversionError(
            "encoder and decoder differ in heads or FFN width, which transduce does not support"
        )
    return {
        "d_model": sizes["d_model"],
        "heads": sizes["encoder_attention_heads"],
        "d_ff": sizes["encoder_ffn_dim"],
        "encoder_layers": sizes["encoder_layers"],
        "decoder_layers": sizes["decoder_layers"],
    }


def hf_sizes(m: ModelConfig) -> dict[str, Any]:
    """config.json's sizes and dropouts of a model of ours (`structure` read back)."""
    return {
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
    }


def layer_pairs(cfg: Config) -> list[tuple[str, str]]:
    """(our name, theirs) for every tensor of the layers but the fused q/k/v."""
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


def fused_names(cfg: Config) -> list[tuple[str, str]]:
    """(our attention module, theirs) for every attention, whose q/k/v we hold fused."""
    m = cfg.model
    return [
        (f"{side}.layers.{i}.{ours}", f"model.{side}.layers.{i}.{theirs}")
        for side, count in (("encoder", m.encoder_layers), ("decoder", m.decoder_layers))
        for i in range(count)
        for ours, theirs in FUSED[side]
    ]


def fused_to_ours(cfg: Config, take: Any) -> dict[str, Tensor]:
    """Our in_proj tensors, each their q, k and v (read with `take(name)`) stacked."""
    out = {}
    for ours, theirs in fused_names(cfg):
        for leaf in ("weight", "bias"):
            out[f"{ours}.in_proj.{leaf}"] = torch.cat([take(f"{theirs}.{p}_proj.{leaf}") for p in "qkv"])
    return out


def fused_to_theirs(cfg: Config, state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Their q, k and v tensors, our in_proj tensors split in three."""
    out = {}
    for ours, theirs in fused_names(cfg):
        for leaf in ("weight", "bias"):
            for part, tensor in zip("qkv", state[f"{ours}.in_proj.{leaf}"].chunk(3), strict=True):
                out[f"{theirs}.{part}_proj.{leaf}"] = tensor
    return out


def expected_shapes(cfg: Config, vocab_size: int) -> dict[str, tuple[int, ...]]:
    """Their layer tensors' shapes, read off our model built on the meta device (no memory)."""
    with torch.device("meta"):
        ours = build_model(cfg.model, vocab_size, vocab_size).state_dict()
    wanted = {theirs: tuple(ours[mine].shape) for mine, theirs in layer_pairs(cfg)}
    for mine, theirs in fused_names(cfg):
        for leaf in ("weight", "bias"):
            rows, *rest = ours[f"{mine}.in_proj.{leaf}"].shape
            wanted.update({f"{theirs}.{p}_proj.{leaf}": (rows // 3, *rest) for p in "qkv"})
    return wanted


def check_shapes(weights: dict[str, Tensor], wanted: dict[str, tuple[int, ...]], file: Path) -> None:
    """Each tensor the import uses must be a float tensor of the shape config.json implies."""
    for name, shape in wanted.items():
        tensor = weights.get(name)
        if tensor is not None and (tuple(tensor.shape) != shape or not tensor.is_floating_point()):
            raise ConversionError(
                f"{file}: {name} is {tensor.dtype} {tuple(tensor.shape)}, but config.json "
                f"(vocab_size, d_model, FFN width) implies a float tensor of shape {shape}"
            )


def read_pieces(path: Path, vocab_size: int) -> dict[str, int]:
    """vocab.json: an object from piece to id, ids within the embedding table, each id one piece's."""
    pieces = read_json(path)
    if not isinstance(pieces, dict):
        raise ConversionError(
            f"{path}: must hold a JSON object from piece to id, not {type(pieces).__name__}"
        )
    bad = [p for p, i in pieces.items() if type(i) is not int or not 0 <= i < vocab_size]
    if bad:
        raise ConversionError(
            f"{path}: ids must be integers from 0 to {vocab_size - 1} (vocab_size); "
            f"{len(bad)} entries are not, e.g. {bad[0]!r}: {pieces[bad[0]]!r}"
        )
    shared = [i for i, n in Counter(pieces.values()).items() if n > 1]
    if shared:
        names = sorted(p for p, i in pieces.items() if i == shared[0])
        raise ConversionError(
            f"{path}: each piece needs an id of its own, but id {shared[0]} is given to {names[:3]} "
            f"({len(names)} pieces; ids shared: {len(shared)})"
        )
    return pieces


def read_spm(path: Path) -> bytes:
    """A sentencepiece model file's bytes. An empty one is refused before sentencepiece sees it:
    it would load as an uninitialised model that fails on first use."""
    check_regular(path)
    if not path.is_file():
        raise ConversionError(f"{path}: missing tokenizer file {path.name}")
    try:
        proto = path.read_bytes()
    except OSError as exc:
        raise ConversionError(f"{path}: cannot be read: {exc.strerror}") from None
    if not proto:
        raise ConversionError(f"{path}: empty, not a sentencepiece model")
    return proto
