"""Other toolkits' models: `import marian` and `import m2m100` into a transduce checkpoint, `export`
out of one."""

from __future__ import annotations

from collections.abc import Callable
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


@import_app.command("m2m100")
def import_m2m100_cmd(
    hf_dir: Annotated[
        Path,
        typer.Argument(
            help="A Hugging Face M2M100ForConditionalGeneration directory: config.json, model.safetensors, "
            "sentencepiece.bpe.model, and the tokenizer that tokenizer_config.json names (M2M100Tokenizer: "
            "vocab.json; NllbTokenizer: tokenizer.json)."
        ),
    ],
    out: Annotated[Path, out_option("Checkpoint directory to write.")] = Path("imported"),
    force: Force = False,
) -> None:
    """Import an M2M100 or NLLB model (e.g. facebook/m2m100_418M) as a transduce checkpoint.

    Translate with the source language's token starting each line (`__en__ Hello`, `eng_Latn
    Hello`) and the target language's forced first (`--prefix`, a file with `__de__` on every
    line); the output text leaves it out. An existing -o is replaced only if `import m2m100` wrote
    it (else --force)."""
    from ..fileio import OutputError
    from ..interop.bart import ConversionError
    from ..interop.m2m100 import import_m2m100

    with user_errors(ConversionError, OutputError):
        cfg = import_m2m100(hf_dir, out, force)
    console.print(
        f"imported {hf_dir} ({cfg.model.encoder_layers}+{cfg.model.decoder_layers} pre-norm layers, "
        f"d={cfg.model.d_model}) into {out}"
    )


@app.command("export")
def export_cmd(
    checkpoint: Checkpoint,
    format: Annotated[
        str,
        typer.Option(
            metavar=one_of(EXPORT_FORMATS),
            help="marian, m2m100 (Hugging Face MarianMTModel, M2M100ForConditionalGeneration directories), "
            "ctranslate2, or argos (an Argos Translate package, .argosmodel: docs/argos-libretranslate.md).",
        ),
    ] = "marian",
    out: Annotated[
        Path | None,
        out_option(
            "Directory to write (default: exported); argos: the package file (default: SRC_TGT.argosmodel)."
        ),
    ] = None,
    quantization: Annotated[
        str | None,
        typer.Option(
            metavar="TYPE",
            help=f"ctranslate2 and argos: the weights' type: {', '.join(CT2_QUANTIZATIONS)} (default: "
            "float32; argos: int8, what Argos Translate computes in on a CPU anyway).",
        ),
    ] = None,
    force: Force = False,
    shortlist: Annotated[
        Path | None,
        typer.Option(
            help="ctranslate2: a shortlist (`transduce shortlist`) to ship as the model's vocabulary "
            "map, for translate_batch(use_vmap=True)."
        ),
    ] = None,
    source_lang: Annotated[
        str | None, typer.Option(help="argos: the source language's code (default: the dataset's --src).")
    ] = None,
    target_lang: Annotated[
        str | None, typer.Option(help="argos: the target language's code (default: the dataset's --tgt).")
    ] = None,
    package_version: Annotated[str, typer.Option(help="argos: the package's version.")] = "1.0",
    description: Annotated[
        str | None, typer.Option(help="argos: a description (default: one from the checkpoint).")
    ] = None,
    license: Annotated[
        str | None, typer.Option(help="argos: the license of the model, as you give it.")
    ] = None,
) -> None:
    """Export a checkpoint as a MarianMTModel or M2M100ForConditionalGeneration directory, a
    CTranslate2 model or an Argos Translate package.

    An existing -o is replaced only if `export` wrote it (else --force)."""
    from ..fileio import OutputError
    from ..interop.ctranslate2 import ExportError, export_ctranslate2
    from ..interop.marian import MarianError
    from ..store.checkpoint import CheckpointError

    argos_texts = (source_lang, target_lang, description, license)  # "" is given too
    argos_options = any(t is not None for t in argos_texts) or package_version != "1.0"
    _refuse_ignored(format, quantization, shortlist, argos_options)
    if format == "argos":
        given = {"source": source_lang, "target": target_lang, "version": package_version}
        _export_argos(
            checkpoint, out, quantization or "int8", force, **given, description=description, license=license
        )
        return
    listed = read_shortlist(shortlist)
    out = out or Path("exported")
    with user_errors(MarianError, ExportError, CheckpointError, OutputError, ValueError):
        writer = _hf_writer(format)
        if writer is not None:
            writer(checkpoint, out, force)
        else:
            vmap = listed.vmap if listed else None
            export_ctranslate2(checkpoint, out, quantization or "float32", force, vmap=vmap)
    console.print(f"exported {checkpoint} to {out} ({format})")


def _hf_writer(format: str) -> Callable[[Path, Path, bool], None] | None:
    """The writer of a Hugging Face directory format (marian, m2m100); None for the others."""
    from ..interop.m2m100 import export_m2m100
    from ..interop.marian import export_marian

    return {"marian": export_marian, "m2m100": export_m2m100}.get(format)


def _refuse_ignored(format: str, quantization: str | None, shortlist: Path | None, argos: bool) -> None:
    """One error line for an unknown format or weight type, or an option the format would ignore."""
    if format not in EXPORT_FORMATS:
        fail(f"--format {format!r}: allowed: {', '.join(EXPORT_FORMATS)}")
    if quantization is not None and quantization not in CT2_QUANTIZATIONS:
        fail(f"--quantization {quantization!r}: allowed: {', '.join(CT2_QUANTIZATIONS)}")
    if quantization is not None and format not in ("ctranslate2", "argos"):
        fail(f"--quantization goes with --format ctranslate2 or argos, not {format}")
    if shortlist is not None and format != "ctranslate2":
        fail("--shortlist goes with --format ctranslate2 (Marian models, Argos packages: no vocabulary map)")
    if argos and format != "argos":
        fail("--source-lang, --target-lang, --package-version, --description, --license: for --format argos")


def _export_argos(
    checkpoint: Path, out: Path | None, quantization: str, force: bool, **given: str | None
) -> None:
    """`export --format argos`: the package, named SRC_TGT.argosmodel unless -o says otherwise."""
    from ..fileio import OutputError
    from ..interop.argos import PackageInfo, export_argos
    from ..interop.ctranslate2 import ExportError
    from ..store.checkpoint import CheckpointError
    from ..store.languages import LanguagesError

    with user_errors(ExportError, CheckpointError, OutputError, LanguagesError):
        info = PackageInfo(**given)
        written, meta = export_argos(checkpoint, out, info, quantization, force)
    console.print(
        f"exported {checkpoint} to {written} (argos: {meta['from_code']} -> {meta['to_code']}, "
        f"version {meta['package_version']})"
    )
