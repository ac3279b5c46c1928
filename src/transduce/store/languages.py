"""The languages a checkpoint translates between, for what names them to others: the server's
LibreTranslate-compatible API (`source`, `target`, GET /languages) and Argos Translate packages
(`from_code`, `to_code`).

A multilingual checkpoint names its pairs (`prepare --pair`: meta.json's `languages`, copied into
the checkpoint), and picks its target language by the tag its source starts with, so the target
a request asks for must reach the decoding (`tgt_lang`). An `import m2m100` checkpoint (M2M100,
NLLB) translates between any two of its vocabulary's language tokens and is told the source
language too (`src_lang`). A checkpoint does not record the
languages of a one-pair dataset: `prepare --src en --tgt de`
names the corpus files' suffixes, which meta.json keeps among prepare's options, and training
copies the dataset's facts but not its options. So they are read from the dataset the
checkpoint's config names, when it is still there and is the dataset the model was trained on
(its hash is the one the checkpoint recorded), and when the suffixes are language codes (not
prepare's defaults `src` and `tgt`). Elsewhere the user names them (`serve --source-lang`,
`export --source-lang`), and what the user names wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..data.fairseq_vocab import FairseqVocab
from ..data.meta import DatasetMeta, MetaError, read_model
from .load import LoadedModel

CODE = re.compile(r"[a-z]{2,3}(?:[_-][A-Za-z]{2,4})?")  # ISO 639-1/-3, optionally a region: pt_BR
NOT_LANGUAGES = {"src", "tgt"}  # prepare's default suffixes
NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "ca": "Catalan", "cs": "Czech", "da": "Danish", "de": "German",
    "el": "Greek", "en": "English", "eo": "Esperanto", "es": "Spanish", "et": "Estonian", "eu": "Basque",
    "fa": "Persian", "fi": "Finnish", "fr": "French", "ga": "Irish", "gl": "Galician", "he": "Hebrew",
    "hi": "Hindi", "hr": "Croatian", "hu": "Hungarian", "id": "Indonesian", "is": "Icelandic",
    "it": "Italian", "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian",
    "nb": "Norwegian Bokmål", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
    "pt_BR": "Portuguese (Brazil)", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian",
    "sr": "Serbian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian", "vi": "Vietnamese",
    "zh": "Chinese", "zh_CN": "Chinese (China)", "zh_TW": "Chinese (Taiwan)",
}  # fmt: skip


class LanguagesError(ValueError):
    """A language code that cannot be used, or languages that are needed and unknown; says how
    to name them."""


@dataclass(frozen=True)
class Languages:
    """The (source, target) pairs a model translates, where they were found (for messages), and
    whether the model is told its target language (a multilingual model's tag or token:
    `tgt_lang`) and its source language (M2M100's token: `src_lang`)."""

    pairs: tuple[tuple[str, str], ...]
    origin: str
    tagged: bool = False
    reads_source: bool = False

    @property
    def sources(self) -> list[str]:
        return sorted({s for s, _ in self.pairs})

    def targets(self, source: str | None = None) -> list[str]:
        """The targets of `source`, or of any source."""
        return sorted({t for s, t in self.pairs if source in (None, s)})


def language_name(code: str) -> str:
    """The English name of a language code, or the code itself where the table has none."""
    return NAMES.get(code, code)


def check_code(code: str, option: str) -> str:
    """`code` if it is a language code, else a LanguagesError naming `option`."""
    if not CODE.fullmatch(code):
        raise LanguagesError(f"{option} {code!r}: give a language code (ISO 639), such as en, de or pt_BR")
    return code


def _distinct(src: str, tgt: str) -> tuple[str, str]:
    """The pair the options name, unless both sides are one language."""
    if src == tgt:
        raise LanguagesError(
            f"--source-lang and --target-lang are both {src}: give the model's two languages"
        )
    return src, tgt


def dataset_languages(loaded: LoadedModel) -> Languages | None:
    """The languages of the dataset the checkpoint was trained on, as `prepare --src --tgt`
    named its files; None when the dataset is gone or changed, or the suffixes are not codes."""
    dataset = loaded.config.data.dataset
    identity = loaded.meta.data_identity
    if dataset is None or identity is None or not (Path(dataset) / "meta.json").is_file():
        return None
    try:
        meta = read_model(Path(dataset) / "meta.json", DatasetMeta)
    except MetaError:
        return None
    options = meta.options or {}
    src, tgt = options.get("src"), options.get("tgt")
    if meta.hash != identity.dataset_hash or not isinstance(src, str) or not isinstance(tgt, str):
        return None
    if {src, tgt} & NOT_LANGUAGES or not (CODE.fullmatch(src) and CODE.fullmatch(tgt)):
        return None
    return Languages(((src, tgt),), f"the dataset {dataset} (prepare --src {src} --tgt {tgt})")


def model_languages(loaded: LoadedModel, source: str | None = None, target: str | None = None) -> Languages:
    """The model's languages: a multilingual checkpoint's pairs or language tokens; else `source`
    and `target` where the user names them (each checked as a code), the rest from the
    checkpoint's dataset; a LanguagesError saying which options to give where a side is still
    unknown."""
    for code, option in ((source, "--source-lang"), (target, "--target-lang")):
        if code is not None:  # an empty code too: it is given, and would read as not given
            check_code(code, option)
    tokens = loaded.src_vocab.languages.tokens if isinstance(loaded.src_vocab, FairseqVocab) else {}
    if (loaded.meta.languages or tokens) and (source or target):
        raise LanguagesError(
            f"{loaded.path.name} names its languages (prepare --pair, or its language tokens); "
            "--source-lang and --target-lang are for a model of one pair"
        )
    if loaded.meta.languages:
        pairs = tuple((p.src, p.tgt) for p in loaded.meta.languages)
        return Languages(pairs, "the checkpoint's pairs (prepare --pair)", tagged=True)
    if tokens:
        pairs = tuple((s, t) for s in sorted(tokens) for t in sorted(tokens) if s != t)
        return Languages(pairs, "the model's language tokens", tagged=True, reads_source=True)
    found = dataset_languages(loaded)
    if source and target:
        pair = _distinct(check_code(source, "--source-lang"), check_code(target, "--target-lang"))
        return Languages((pair,), "--source-lang and --target-lang")
    if found is None:
        raise LanguagesError(
            f"{loaded.path.name}: its languages are unknown (its dataset is not at hand or was prepared "
            "without language suffixes); give --source-lang and --target-lang"
        )
    ((src, tgt),) = found.pairs
    if source or target:
        src, tgt = _distinct(
            check_code(source or src, "--source-lang"), check_code(target or tgt, "--target-lang")
        )
    return Languages(((src, tgt),), found.origin if not (source or target) else f"{found.origin} and options")
