"""CTranslate2 export: our checkpoint -> Marian layout -> CTranslate2's own converter."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..fileio import atomic_directory, check_output_dir
from .marian import MarianError, export_marian

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16")


def export_ctranslate2(
    checkpoint: Path, out: Path, quantization: str = "float32", force: bool = False
) -> None:
    """Write a CTranslate2 model directory (needs the `ctranslate2` and `transformers` packages);
    `out` is replaced only if `export` wrote it (or `force`)."""
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
        converter = ctranslate2.converters.TransformersConverter(str(hf_dir))
        with atomic_directory(Path(out), "export", [Path(checkpoint)], force) as staging:
            converter.convert(str(staging), quantization=quantization, force=True)
