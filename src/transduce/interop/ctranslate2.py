"""CTranslate2 export: our checkpoint -> Marian layout -> CTranslate2's own converter."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..data.vocab import BOS, EOS, PAD, UNK, Vocab
from ..decode.shortlist import Shortlist
from ..fileio import atomic_directory, check_output_dir
from ..store.load import load_model
from .marian import MarianError, export_marian

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16")


def start_row_norm(hf_dir: Path) -> float:
    """The norm of the embedding row a Marian decoder starts from (the pad row, our BOS).

    CTranslate2's Marian converter always starts decoders from a zero vector instead, as Marian
    itself does; a model whose start row is not zero decodes differently there."""
    from safetensors import safe_open

    pad = int(json.loads((hf_dir / "config.json").read_text(encoding="utf-8"))["pad_token_id"])
    with safe_open(str(hf_dir / "model.safetensors"), framework="pt") as f:
        names = set(f.keys())  # a safe_open handle is not a container
        name = next(n for n in ("model.decoder.embed_tokens.weight", "model.shared.weight") if n in names)
        return float(f.get_tensor(name)[pad].norm())


def vmap_lines(shortlist: Shortlist, src_vocab: Vocab, tgt_vocab: Vocab) -> list[str]:
    """A shortlist as CTranslate2's vocabulary map: `source token<TAB>target tokens` per listed
    source token, and the always-scored tokens under the empty key (CTranslate2 adds its own
    UNK, BOS and EOS; our special tokens are left out)."""
    specials = {PAD, UNK, BOS, EOS}

    def pieces(ids: list[int]) -> str:
        return " ".join(tgt_vocab.token(i) for i in ids if i >= 0 and i not in specials)

    lines = [f"\t{pieces(shortlist.frequent.tolist())}"]
    for source, row in enumerate(shortlist.per_token.tolist()):
        listed = pieces(row)
        if source not in specials and listed:
            lines.append(f"{src_vocab.token(source)}\t{listed}")
    return lines


def export_ctranslate2(
    checkpoint: Path,
    out: Path,
    quantization: str = "float32",
    force: bool = False,
    shortlist: Shortlist | None = None,
) -> str | None:
    """Write a CTranslate2 model directory (needs the `ctranslate2` and `transformers` packages);
    `out` is replaced only if `export` wrote it (or `force`). A `shortlist` goes with it as its
    vocabulary map (vmap.txt, used by `translate_batch(use_vmap=True)`). Returns a warning when
    CTranslate2 will not decode exactly as we do (a decoder start embedding that is not zero)."""
    if quantization not in QUANTIZATIONS:
        raise MarianError(f"quantization {quantization!r} is not one of: {', '.join(QUANTIZATIONS)}")
    try:
        import ctranslate2
    except ImportError:
        raise MarianError("CTranslate2 export needs `pip install ctranslate2 transformers`") from None
    check_output_dir(Path(out), "export", [Path(checkpoint)], force)
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = Path(tmp) / "marian"
        export_marian(checkpoint, hf_dir)
        if not (hf_dir / "source.spm").exists():
            raise MarianError(
                f"{checkpoint}: CTranslate2's converter needs a sentencepiece vocabulary; this model "
                "has a symbol vocabulary (generated task or parser)"
            )
        norm = start_row_norm(hf_dir)
        vmap = None
        if shortlist is not None:
            loaded = load_model(Path(checkpoint))
            shortlist.check_model(len(loaded.src_vocab), len(loaded.tgt_vocab), "--shortlist")
            vmap = Path(tmp) / "vmap.txt"
            lines = vmap_lines(shortlist, loaded.src_vocab, loaded.tgt_vocab)
            vmap.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        converter = ctranslate2.converters.TransformersConverter(str(hf_dir))
        with atomic_directory(Path(out), "export", [Path(checkpoint)], force) as staging:
            converter.convert(
                str(staging), vmap=None if vmap is None else str(vmap), quantization=quantization, force=True
            )
    if norm == 0.0:
        return None
    return (
        f"CTranslate2 starts Marian decoders from a zero vector, this model from its BOS embedding "
        f"(norm {norm:.3g}), so CTranslate2's outputs may differ from transduce's and Hugging Face's"
    )
