"""CTranslate2 export: our checkpoint written tensor by tensor into CTranslate2's Transformer spec.

The spec describes every variant we train for translation (pre- or post-norm, sinusoidal or
learned positions, tied or separate embeddings, any vocabulary), and its decoder starts from
our BOS embedding (EOS's, with model.decoder_start_row = eos), so the exported model computes
what ours does. PAD is left out of both vocabularies (it is never an input the model sees
unmasked) and BOS gets a -inf output bias: neither is ever generated, as in our search.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..choices import CT2_QUANTIZATIONS
from ..data.fairseq_vocab import FairseqVocab
from ..data.vocab import BOS, EOS, PAD, UNK, MarianVocab, SentencePieceVocab, SymbolVocab, Vocab
from ..fileio import atomic_directory, check_output_dir
from ..model.embeddings import sinusoid
from ..model.kinds import assembly_for
from ..store.checkpoint import EXPORT_INFO, file_sha256, vocab_digest, vocab_files
from ..store.load import LoadedModel, load_model

TOKENS: dict[type, str] = {  # what the tokens are, by vocabulary kind
    SentencePieceVocab: "sentencepiece pieces: the source tokenizer encodes a line (out_type=str), "
    "the target tokenizer decodes an output's pieces",
    MarianVocab: "Marian's sentencepiece pieces (the source and target tokenizers), a leading >>lang<< "
    "code as one token",
    SymbolVocab: "the symbols between single spaces of a line, joined by spaces on output",
    FairseqVocab: "fairseq's sentencepiece pieces (M2M100, NLLB): the source tokenizer encodes a line after "
    "its language token (__en__, eng_Latn), one token; translate_batch's target_prefix forces the target "
    "language's token",
}
ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "swish": "SWISH"}


def tokenizers(folder: Path) -> tuple[Path | None, Path | None]:
    """An export's source and target sentencepiece models, as its EXPORT_INFO names them (None for
    a symbol vocabulary)."""
    info = json.loads((folder / EXPORT_INFO).read_text(encoding="utf-8"))
    return tuple(
        folder / info[key] if info.get(key) else None for key in ("source_tokenizer", "target_tokenizer")
    )  # type: ignore[return-value]


SINUSOID_ROWS = 1024  # positions a sinusoidal model's exported table covers, at the least


class ExportError(ValueError):
    """A checkpoint CTranslate2 cannot represent, or a missing package; says why."""


def unsupported(loaded: LoadedModel) -> list[str]:
    """What in this model has no CTranslate2 Transformer counterpart (empty: exportable)."""
    m = loaded.config.model
    problems = []
    if not assembly_for(m.kind).cross_attention:
        problems.append(f"model.kind={m.kind} (only encoder-decoder models)")
    if m.arch != "transformer":
        problems.append(f"model.arch={m.arch} (only arch=transformer: no shared recurrent layers)")
        if m.act:
            problems.append("model.act (adaptive computation time)")
    if m.transition != "ffn":
        problems.append(f"model.transition={m.transition} (only ffn)")
    if m.local_window is not None:
        problems.append("model.local_window (CTranslate2 attends to every position)")
    if m.syntax_mask != "none":
        problems.append(f"model.syntax_mask={m.syntax_mask} (no source trees in CTranslate2)")
    if m.position_eval != "dense":
        problems.append(f"model.position_eval={m.position_eval} (CTranslate2 uses positions 0..n-1)")
    if loaded.factor_vocabs:
        problems.append("factored source tokens")
    return problems


def check_exportable(loaded: LoadedModel) -> None:
    """ExportError naming what in this model CTranslate2 cannot represent."""
    problems = unsupported(loaded)
    if problems:
        raise ExportError(f"{loaded.path}: CTranslate2 cannot represent {'; '.join(problems)}")


def _vocab_rows(vocab: Vocab, side: str) -> tuple[list[int], list[str]]:
    """Our ids without PAD, and their token names, which CTranslate2 needs distinct."""
    rows = [i for i in range(len(vocab)) if i != PAD]
    names = [vocab.token(i) for i in rows]
    seen: dict[str, int] = {}
    for row, name in zip(rows, names, strict=True):
        if name in seen:
            raise ExportError(
                f"the {side} vocabulary names ids {seen[name]} and {row} both {name!r}; "
                "CTranslate2 needs one id per token"
            )
        seen[name] = row
    return rows, names


class _Tensors:
    """The model's tensors by name, each taken at most once, so that a tensor the spec leaves
    out is found rather than silently dropped."""

    def __init__(self, state: dict[str, Tensor]) -> None:
        self.state = {name: t.detach().float() for name, t in state.items()}
        self.taken: set[str] = set()

    def __call__(self, name: str) -> Tensor:
        self.taken.add(name)
        return self.state[name]

    def left(self) -> list[str]:
        return sorted(set(self.state) - self.taken)


def _linear(spec: Any, weight: Tensor, bias: Tensor) -> None:
    spec.weight, spec.bias = weight, bias


def _norm(spec: Any, take: _Tensors, name: str) -> None:
    spec.gamma, spec.beta = take(f"{name}.weight"), take(f"{name}.bias")


def _sublayers(spec: Any, take: _Tensors, prefix: str, cross: bool) -> None:
    """One encoder (cross=False) or decoder layer."""
    w = take(f"{prefix}.self_attn.in_proj.weight")
    b = take(f"{prefix}.self_attn.in_proj.bias")
    _linear(spec.self_attention.linear[0], w, b)
    out = f"{prefix}.self_attn.out_proj"
    _linear(spec.self_attention.linear[1], take(f"{out}.weight"), take(f"{out}.bias"))
    _norm(spec.self_attention.layer_norm, take, f"{prefix}.self_sub.norm")
    if cross:
        d = w.shape[1]
        w = take(f"{prefix}.cross_attn.in_proj.weight")
        b = take(f"{prefix}.cross_attn.in_proj.bias")
        _linear(spec.attention.linear[0], w[:d], b[:d])  # queries from the decoder
        _linear(spec.attention.linear[1], w[d:], b[d:])  # keys and values from the encoder
        out = f"{prefix}.cross_attn.out_proj"
        _linear(spec.attention.linear[2], take(f"{out}.weight"), take(f"{out}.bias"))
        _norm(spec.attention.layer_norm, take, f"{prefix}.cross_sub.norm")
    for ours, theirs in (("w1", spec.ffn.linear_0), ("w2", spec.ffn.linear_1)):
        _linear(theirs, take(f"{prefix}.ffn.{ours}.weight"), take(f"{prefix}.ffn.{ours}.bias"))
    _norm(spec.ffn.layer_norm, take, f"{prefix}.ffn_sub.norm")


def _positions(take: _Tensors, side: str, loaded: LoadedModel) -> Tensor:
    """The position table CTranslate2 adds: our learned one, or our sinusoids precomputed."""
    m = loaded.config.model
    if m.positions == "learned":
        return take(f"{side}.positions.weight")
    rows = torch.arange(max(SINUSOID_ROWS, m.max_positions)) + m.position_offset
    return sinusoid(rows, m.d_model, m.pos_layout, m.pos_frequencies)


def build_spec(loaded: LoadedModel) -> Any:
    """The CTranslate2 TransformerSpec holding this model, vocabularies and config included."""
    from ctranslate2.specs import common_spec, transformer_spec

    check_exportable(loaded)
    m = loaded.config.model
    pre = m.norm == "pre"
    spec = transformer_spec.TransformerSpec.from_config(
        (m.encoder_layers, m.decoder_layers),
        m.heads,
        pre_norm=pre,
        activation=getattr(common_spec.Activation, ACTIVATIONS[m.activation]),
    )
    take = _Tensors(loaded.model.state_dict())
    src_rows, src_names = _vocab_rows(loaded.src_vocab, "source")
    tgt_rows, tgt_names = _vocab_rows(loaded.tgt_vocab, "target")
    scale = float(m.d_model**0.5) if m.scale_embeddings else 1.0
    for stack, side, rows in ((spec.encoder, "src_embed", src_rows), (spec.decoder, "tgt_embed", tgt_rows)):
        stack.scale_embeddings = scale
        embeddings = stack.embeddings[0] if isinstance(stack.embeddings, list) else stack.embeddings
        embeddings.weight = take(f"{side}.tokens.weight")[rows]
        stack.position_encodings.encodings = _positions(take, side, loaded)
    for side, stack, count in (
        ("encoder", spec.encoder, m.encoder_layers),
        ("decoder", spec.decoder, m.decoder_layers),
    ):
        for i in range(count):
            _sublayers(stack.layer[i], take, f"{side}.layers.{i}", cross=side == "decoder")
        if pre:
            _norm(stack.layer_norm, take, f"{side}.final_norm")
    weight = take("output.weight")
    bias = take("output.bias") if "output.bias" in take.state else torch.zeros(weight.shape[0])
    bias = bias.clone()
    bias[BOS] = -torch.inf  # the decoder's start, never an output
    _linear(spec.decoder.projection, weight[tgt_rows], bias[tgt_rows])
    left = take.left()
    if left:
        raise ExportError(f"{loaded.path}: tensors with no CTranslate2 counterpart: {left[:5]}")
    spec.register_source_vocabulary(src_names)
    spec.register_target_vocabulary(tgt_names)
    tgt = loaded.tgt_vocab
    spec.config.unk_token = tgt.token(UNK)
    spec.config.bos_token = tgt.token(BOS)
    spec.config.eos_token = tgt.token(EOS)
    spec.config.decoder_start_token = tgt.token(EOS if m.decoder_start_row == "eos" else BOS)
    spec.config.layer_norm_epsilon = m.layer_norm_eps
    return spec


def export_ctranslate2(
    checkpoint: Path,
    out: Path,
    quantization: str = "float32",
    force: bool = False,
    vmap: Callable[[Vocab, Vocab], list[str]] | None = None,
) -> None:
    """Write a CTranslate2 model directory (needs the `ctranslate2` package); `out` is replaced
    only if `export` wrote it (or `force`). `vmap` gives the lines of a vocabulary map for the
    model's vocabularies (a shortlist's `Shortlist.vmap`), which go with it as vmap.txt (used by
    `translate_batch(use_vmap=True)`). Sources are given to CTranslate2 as
    our tokens followed by EOS (`</s>`), as `transduce translate` encodes them; the directory
    holds the tokenizers for that (`write_tokenizers`)."""
    check_quantization(quantization)
    check_output_dir(Path(out), "export", [Path(checkpoint)], force)
    loaded = load_model(Path(checkpoint))
    check_exportable(loaded)
    lines = vmap(loaded.src_vocab, loaded.tgt_vocab) if vmap is not None else None
    with atomic_directory(Path(out), "export", [Path(checkpoint)], force) as staging:
        write_export(loaded, staging, quantization, lines)


def check_quantization(quantization: str) -> None:
    """ExportError for a weight type CTranslate2 does not take, or without the package."""
    if quantization not in CT2_QUANTIZATIONS:
        raise ExportError(f"quantization {quantization!r} is not one of: {', '.join(CT2_QUANTIZATIONS)}")
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise ExportError("CTranslate2 export needs `pip install ctranslate2`") from None


def write_export(loaded: LoadedModel, folder: Path, quantization: str, vmap: list[str] | None = None) -> None:
    """The CTranslate2 model of `loaded` (a checkpoint with its weights) written into `folder`, a
    fresh staging directory, with its tokenizers and EXPORT_INFO; `vmap`: the lines of a
    vocabulary map to ship with it."""
    import ctranslate2

    spec = build_spec(loaded)

    class Ready(ctranslate2.converters.Converter):
        def _load(self) -> Any:
            return spec

    with tempfile.TemporaryDirectory() as tmp:
        vmap_file = None
        if vmap is not None:
            vmap_file = Path(tmp) / "vmap.txt"
            vmap_file.write_text("".join(f"{line}\n" for line in vmap), encoding="utf-8")
        Ready().convert(
            str(folder),
            vmap=None if vmap_file is None else str(vmap_file),
            quantization=quantization,
            force=True,
        )
    write_tokenizers(loaded, folder, quantization)


def export_files(folder: Path) -> dict[str, str]:
    """The checksum of each file of an export but model.bin (checksummed on its own) and
    EXPORT_INFO: CTranslate2's config and vocabularies, a vocabulary map, our vocabulary files."""
    return {
        p.name: file_sha256(p)
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name not in ("model.bin", EXPORT_INFO)
    }


def write_tokenizers(loaded: LoadedModel, folder: Path, quantization: str) -> dict[str, Any]:
    """What a CTranslate2 user needs besides the model, so that the directory runs without this
    package: the checkpoint's vocabulary files (src.*, tgt.*: for `transduce --engine
    ctranslate2` given the directory, with the metadata, so that it reads and renders text as the
    checkpoint does), among them the sentencepiece models that EXPORT_INFO names as the source
    and target tokenizers (one file when the vocabulary is shared; none for a symbol vocabulary,
    whose tokens are the words between spaces), and EXPORT_INFO itself: the checkpoint's name
    (not the exporting machine's path) and step, checksums, and how to tokenise. Returns
    EXPORT_INFO's content."""
    for vocab_file in vocab_files(loaded.path):
        shutil.copyfile(vocab_file, folder / vocab_file.name)
    files = {
        side: next(
            (
                name
                for name in (f"{prefix}.spm", f"{prefix}.marian.spm", f"{prefix}.fairseq.spm")
                if (folder / name).is_file()
            ),
            None,
        )
        for side, prefix in (("source", "src"), ("target", "tgt"))
    }
    files["target"] = files["target"] or files["source"]  # a shared vocabulary: one file
    info = {
        "exported_from": loaded.path.name,
        "step": loaded.meta.step,
        "weights_sha256": loaded.meta.checksums.get("model.safetensors"),
        "vocab_sha256": vocab_digest(loaded.path),
        "quantization": quantization,
        "model_sha256": file_sha256(folder / "model.bin"),  # a damaged export is found, not decoded
        "files_sha256": export_files(folder),  # and so are its other files (config, vocabularies)
        "source_tokenizer": files.get("source"),
        "target_tokenizer": files.get("target"),
        "tokens": TOKENS[type(loaded.src_vocab)],
        "source_suffix": [loaded.src_vocab.token(EOS)],
        "checkpoint": loaded.meta.model_dump(mode="json"),
    }
    (folder / EXPORT_INFO).write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return info
