"""Other toolkits' models: `import marian` into a transduce checkpoint, `export` out of one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..choices import CT2_QUANTIZATIONS, EXPORT_FORMATS
from .common import Checkpoint, Force, app, console, fail, out_option, read_shortlist, user_errors
from .metavars import App, one_of

import_app = App(help="Convert other toolkits' models into transduce checkpoints.", no_args_is_help=True)
app.add_typer(import_app, name="import")


@import_app.command("marian")
def import_marian_cmd(
    hf_dir: Annotated[
        Path,
        typer.Argument(
            help="A Hugging Face MarianMTModel directory (config.json, "
            "model.safetensors, source.spm, target.spm, vocab.json)."
        ),
    ],
    out: Annotated[Path, out_option("Checkpoint directory to write.")] = Path("imported"),
    force: Force = False,
) -> None:
    """Import a MarianMTModel (e.g. an OPUS-MT model) as a transduce checkpoint.

    An existing -o is replaced only if `import marian` wrote it (else --force)."""
    from ..fileio import OutputError
    from ..interop.marian import MarianError, import_marian

    with user_errors(MarianError, OutputError):
        cfg = import_marian(hf_dir, out, force)
    console.print(
        f"imported {hf_dir} ({cfg.model.encoder_layers}+{cfg.model.decoder_layers} layers, "
        f"d={cfg.model.d_model}) into {out}"
    )


@app.command("export")
def export_cmd(
    checkpoint: Checkpoint,
    format: Annotated[
        str,
        typer.Option(
            metavar=one_of(EXPORT_FORMATS),
            help="marian (a Hugging Face MarianMTModel directory) or ctranslate2.",
        ),
    ] = "marian",
    out: Annotated[Path, out_option("Directory to write.")] = Path("exported"),
    quantization: Annotated[
        str,
        typer.Option(metavar="TYPE", help=f"ctranslate2: the weights' type: {', '.join(CT2_QUANTIZATIONS)}."),
    ] = "float32",
    force: Force = False,
    shortlist: Annotated[
        Path | None,
        typer.Option(
            help="ctranslate2: a shortlist (`transduce shortlist`) to ship as the model's vocabulary "
            "map, for translate_batch(use_vmap=True)."
        ),
    ] = None,
) -> None:
    """Export a checkpoint as a MarianMTModel directory or a CTranslate2 model.

    An existing -o is replaced only if `export` wrote it (else --force)."""
    from ..fileio import OutputError
    from ..interop.ctranslate2 import ExportError, export_ctranslate2
    from ..interop.marian import MarianError, export_marian
    from ..store.checkpoint import CheckpointError

    if format not in EXPORT_FORMATS:
        fail(f"--format {format!r}: allowed: {', '.join(EXPORT_FORMATS)}")
    if quantization not in CT2_QUANTIZATIONS:
        fail(f"--quantization {quantization!r}: allowed: {', '.join(CT2_QUANTIZATIONS)}")
    if shortlist is not None and format != "ctranslate2":
        fail("--shortlist goes with --format ctranslate2 (a Marian model has no vocabulary map)")
    listed = read_shortlist(shortlist)
    with user_errors(MarianError, ExportError, CheckpointError, OutputError, ValueError):
        if format == "marian":
            export_marian(checkpoint, out, force)
        else:
            export_ctranslate2(checkpoint, out, quantization, force, vmap=listed.vmap if listed else None)
    console.print(f"exported {checkpoint} to {out} ({format})")
