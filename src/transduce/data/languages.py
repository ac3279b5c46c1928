"""Language pairs of a multilingual dataset and the target-language tags that pick the output
language: by OPUS-MT's convention a source line starts with `>>deu<<` (the ISO 639-3 code of the
target language) and the model learns to translate into that language; another form can be
named (`__{lang}__`, `<2{lang}>`). The tags are pieces of their own in the shared vocabulary."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TAG = ">>{lang}<<"
# ISO 639-1 -> ISO 639-3 for the languages most corpora hold, as OPUS-MT's tags spell them;
# any other code is used as given (a three-letter code, or a code of the user's own).
ISO639_3 = {
    "ar": "ara", "bg": "bul", "ca": "cat", "cs": "ces", "da": "dan", "de": "deu", "el": "ell",
    "en": "eng", "es": "spa", "et": "est", "eu": "eus", "fa": "fas", "fi": "fin", "fr": "fra",
    "ga": "gle", "gl": "glg", "he": "heb", "hi": "hin", "hr": "hrv", "hu": "hun", "id": "ind",
    "is": "isl", "it": "ita", "ja": "jpn", "ko": "kor", "lt": "lit", "lv": "lav", "nb": "nob",
    "nl": "nld", "pl": "pol", "pt": "por", "ro": "ron", "ru": "rus", "sk": "slk", "sl": "slv",
    "sr": "srp", "sv": "swe", "tr": "tur", "uk": "ukr", "vi": "vie", "zh": "zho",
}  # fmt: skip
CODE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,15}")


class LanguageError(ValueError):
    """A pair, language code or tag form that cannot be used; says why."""


class LanguagePair(BaseModel):
    """One pair of a multilingual dataset: its languages and the tag its sources start with."""

    model_config = ConfigDict(extra="forbid")
    src: str = Field(pattern=CODE.pattern)
    tgt: str = Field(pattern=CODE.pattern)
    tag: str = Field(min_length=1)

    @property
    def name(self) -> str:
        return f"{self.src}-{self.tgt}"


def tag_for(lang: str, form: str = DEFAULT_TAG) -> str:
    """The tag that asks for output in `lang`: `form` with `{lang}` the language's ISO 639-3 code
    (OPUS-MT's), or the code as given where the table has none."""
    if form.count("{lang}") != 1:
        raise LanguageError(f"--tag-format {form!r}: it must hold {{lang}} once, e.g. {DEFAULT_TAG!r}")
    tag = form.replace("{lang}", ISO639_3.get(lang, lang))
    if any(c.isspace() for c in tag):
        raise LanguageError(f"--tag-format {form!r}: a tag is one token, without spaces")
    if tag.isalnum():
        raise LanguageError(
            f"--tag-format {form!r}: the tag {tag} could be a word of the text; mark it, e.g. {DEFAULT_TAG!r}"
        )
    return tag


def parse_pair(spec: str, form: str = DEFAULT_TAG) -> tuple[LanguagePair, Path]:
    """`SRC-TGT=DIR` (`en-de=corpus/en-de`) as a pair and its directory."""
    langs, sep, folder = spec.partition("=")
    src, dash, tgt = langs.partition("-")
    if not (sep and dash and folder and CODE.fullmatch(src) and CODE.fullmatch(tgt)):
        raise LanguageError(f"--pair {spec!r}: give SRC-TGT=DIR, e.g. en-de=corpus/en-de")
    if src == tgt:
        raise LanguageError(
            f"--pair {spec!r}: the source and the target are one language, so one file ({src})"
        )
    return LanguagePair(src=src, tgt=tgt, tag=tag_for(tgt, form)), Path(folder)


def check_pairs(pairs: list[LanguagePair]) -> None:
    """Pairs that one model can learn together: each at most once, and one tag per target language."""
    seen: dict[str, LanguagePair] = {}
    tags: dict[str, str] = {}
    for pair in pairs:
        if pair.name in seen:
            raise LanguageError(f"--pair {pair.name} is given twice")
        seen[pair.name] = pair
        if tags.setdefault(pair.tag, pair.tgt) != pair.tgt:
            raise LanguageError(f"the tag {pair.tag} would stand for both {tags[pair.tag]} and {pair.tgt}")


def target_tags(pairs: list[LanguagePair]) -> dict[str, str]:
    """Each target language's tag, by its code as the pairs name it (and by the tag's own code)."""
    found = {}
    for pair in pairs:
        found[pair.tgt] = pair.tag
        found[ISO639_3.get(pair.tgt, pair.tgt)] = pair.tag
    return found
