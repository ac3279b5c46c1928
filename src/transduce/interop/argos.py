"""Argos Translate packages: `transduce export --format argos -o en_de.argosmodel`.

An .argosmodel is a zip of one folder, which `argostranslate.package.install_from_path` unpacks
into its packages directory. What Argos Translate (1.11: package.py, translate.py) reads there:
- metadata.json: `from_code`, `from_name`, `to_code`, `to_name`, `package_version` (compared as
  a version), `argos_version`, `type`; the other keys are kept and ignored (ours: description,
  license, where the weights came from);
- model/: a CTranslate2 model, decoded with translate_batch(beam_size=max(n, ARGOS_BEAM_SIZE
  (4)), length_penalty=0.2, replace_unknowns=True) and CTranslate2's default length limit
  (256), with the compute type ARGOS_COMPUTE_TYPE (`auto`: int8 on a CPU that has it, whatever
  the weights; so int8 weights by default here, and `translate --engine ctranslate2 --quantize
  int8` decodes as Argos does);
- sentencepiece.model: one tokenizer for both sides (encode the source, decode the output's
  pieces), so only a model with one shared sentencepiece vocabulary can be packaged;
- minisbd/: the sentence-boundary model; ours never splits (interop/minisbd.py), so each line
  is translated whole and nothing is downloaded;
- README.md: shown as the package's description.
Argos gives CTranslate2 a line's pieces alone, where our models read them followed by EOS, so
the model's config.json asks CTranslate2 to add it (`add_source_eos`).
"""

from __future__ import annotations

import json
import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.vocab import SentencePieceVocab
from ..fileio import OutputError, atomic_file, check_output_file
from ..store.languages import Languages, language_name, model_languages
from ..store.load import LoadedModel, load_model
from .ctranslate2 import EXPORT_INFO, ExportError, check_exportable, check_quantization, write_export
from .minisbd import never_split_model

ARGOS_VERSION = "1.0"  # the package format's version, as Argos Translate's own packages give it
CT2_FILES = ("model.bin", "config.json", "shared_vocabulary.json")  # CTranslate2's, for a shared vocabulary
VERSION = re.compile(r"\d+(?:\.\d+)*")
PROVENANCE = "transduce"  # metadata.json's key saying where the package came from


@dataclass(frozen=True)
class PackageInfo:
    """What the user says about a package; the rest comes from the checkpoint (the languages
    too, where its dataset names them: store/languages.py)."""

    source: str | None = None
    target: str | None = None
    version: str = "1.0"
    description: str | None = None
    license: str | None = None

    def __post_init__(self) -> None:
        if not VERSION.fullmatch(self.version):
            raise ExportError(
                f"--package-version {self.version!r}: give numbers between dots, such as 1.0 or 2.1.3 "
                "(Argos Translate compares them to find updates)"
            )


def check_packageable(loaded: LoadedModel) -> None:
    """ExportError unless one sentencepiece model reads the source and writes the target."""
    check_exportable(loaded)
    if loaded.tgt_vocab is not loaded.src_vocab:
        has = "separate source and target vocabularies"
    elif not isinstance(loaded.src_vocab, SentencePieceVocab):
        has = "no sentencepiece vocabulary of ours (its tokens are symbols, Marian's or fairseq's)"
    else:
        return
    raise ExportError(
        f"{loaded.path}: an Argos Translate package holds one sentencepiece model for both sides; "
        f"this checkpoint has {has}"
    )


def package_languages(loaded: LoadedModel, info: PackageInfo) -> Languages:
    """The package's one pair: Argos Translate packages translate one language into one other."""
    languages = model_languages(loaded, info.source, info.target)
    if languages.tagged:
        raise ExportError(
            f"{loaded.path}: a multilingual model reads a target-language tag before each source, and "
            "Argos Translate puts none there; export a model of one pair"
        )
    return languages


def metadata(loaded: LoadedModel, info: PackageInfo, languages: Languages) -> dict[str, Any]:
    """metadata.json: Argos Translate's keys, then ours (description, license, provenance)."""
    ((src, tgt),) = languages.pairs
    return {
        "package_version": info.version,
        "argos_version": ARGOS_VERSION,
        "type": "translate",
        "from_code": src,
        "from_name": language_name(src),
        "to_code": tgt,
        "to_name": language_name(tgt),
        "description": info.description or describe(loaded, languages),
        "license": info.license,
        PROVENANCE: {
            "checkpoint": loaded.path.name,
            "step": loaded.meta.step,
            "weights_sha256": loaded.meta.checksums.get("model.safetensors"),
            "languages_from": languages.origin,
        },
    }


def describe(loaded: LoadedModel, languages: Languages) -> str:
    """A one-line description from the checkpoint: its languages, size and last dev scores."""
    m = loaded.config.model
    scores = ", ".join(
        f"dev {k.removeprefix('dev_')} {v:.1f}"
        for k, v in loaded.meta.metrics.items()
        if k in ("dev_bleu", "dev_chrf")
    )
    src, tgt = (language_name(c) for c in languages.pairs[0])
    return (
        f"{src} to {tgt}: a transduce {m.arch} "
        f"({m.encoder_layers}+{m.decoder_layers} layers, d={m.d_model}), "
        f"step {loaded.meta.step}" + (f"; {scores}" if scores else "")
    )


def readme(meta: dict[str, Any]) -> str:
    licence = meta["license"] or "none given by the exporter"
    return (
        f"# {meta['from_name']} → {meta['to_name']}\n\n{meta['description']}\n\n"
        f"License: {licence}\n\nExported by transduce from checkpoint {meta[PROVENANCE]['checkpoint']} "
        f"(step {meta[PROVENANCE]['step']}). Sentences are not split: each line is translated whole.\n"
    )


def export_argos(
    checkpoint: Path, out: Path | None, info: PackageInfo, quantization: str = "int8", force: bool = False
) -> tuple[Path, dict[str, Any]]:
    """Write the package to `out` (default: SRC_TGT.argosmodel; replaced only if it is a package
    this exported, or `force`); returns where, and its metadata."""
    check_quantization(quantization)
    loaded = load_model(Path(checkpoint))
    check_packageable(loaded)
    meta = metadata(loaded, info, package_languages(loaded, info))
    out = Path(out or f"{meta['from_code']}_{meta['to_code']}.argosmodel")
    check_output_file(out, [Path(checkpoint)])
    _check_replaceable(out, force)
    folder = f"translate-{meta['from_code']}_{meta['to_code']}-{info.version.replace('.', '_')}"
    with tempfile.TemporaryDirectory() as tmp, atomic_file(out) as staging:
        export = Path(tmp)
        write_export(loaded, export, quantization)
        config = json.loads((export / "config.json").read_text(encoding="utf-8"))
        config["add_source_eos"] = True  # Argos passes the pieces alone; the model reads EOS after them
        (export / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        tokenizer = json.loads((export / EXPORT_INFO).read_text(encoding="utf-8"))["source_tokenizer"]
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as zipped:
            for name in CT2_FILES:
                if (export / name).is_file():
                    zipped.write(export / name, f"{folder}/model/{name}")
            zipped.write(export / tokenizer, f"{folder}/sentencepiece.model")
            zipped.writestr(f"{folder}/minisbd/never-split.onnx", never_split_model(meta["from_code"]))
            zipped.writestr(f"{folder}/metadata.json", json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
            zipped.writestr(f"{folder}/README.md", readme(meta))
    return out, meta


def _check_replaceable(out: Path, force: bool) -> None:
    """An existing `out` is replaced only if it is a package this export wrote (or `force`)."""
    if force or not out.exists():
        return
    try:
        with zipfile.ZipFile(out) as zipped:
            ours = any(
                name.endswith("/metadata.json") and PROVENANCE in json.loads(zipped.read(name))
                for name in zipped.namelist()
            )
    except (OSError, zipfile.BadZipFile, ValueError):
        ours = False
    if not ours:
        raise OutputError(f"{out} exists and is not a package `export` wrote; choose another -o, or --force")
