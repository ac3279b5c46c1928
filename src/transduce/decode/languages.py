"""Decoding a multilingual model into a target language, by either convention:

- Ours and OPUS-MT's: the model's dataset was prepared with `prepare --pair`, each source starting
  with its target language's tag (`>>fra<<`), and the model translates into the language of the
  tag its input starts with. A line that already starts with one of the model's tags keeps it;
  otherwise the tag of the language asked for (`--tgt-lang fr`) is put in front, as its own
  piece, as in training, whatever the text tokenizer would make of it.
- M2M100's and NLLB's (an `import m2m100` checkpoint): a source starts with its own language's
  token (`--src-lang`), and the target language's token is forced as the first one the decoder
  writes, as Hugging Face's `forced_bos_token_id` does; the vocabulary leaves it out of the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..data.fairseq_vocab import FairseqVocab
from ..data.languages import LanguagePair, target_tags
from ..data.vocab import piece_id
from ..interop.m2m100 import language_tokens
from ..store.load import LoadedModel


class TargetLanguageError(ValueError):
    """A target language the model cannot translate into, or none where one is needed; says which
    languages the model knows."""

    def by_field(self) -> str:
        """The message with the options named as the Python API's arguments and the server's body
        fields name them (`tgt_lang`, `src_lang`), not as the command line's (`--tgt-lang`)."""
        return str(self).replace("--tgt-lang", "tgt_lang").replace("--src-lang", "src_lang")


@dataclass(frozen=True)
class TargetLanguages:
    """A model's target languages and the ids of their tags."""

    pairs: list[LanguagePair]
    ids: dict[str, int]  # tag -> its piece id

    @classmethod
    def of(cls, loaded: LoadedModel) -> TargetLanguages:
        pairs = list(loaded.meta.languages)
        return cls(pairs, {p.tag: piece_id(loaded.src_vocab, p.tag) for p in pairs})

    @property
    def multilingual(self) -> bool:
        return bool(self.pairs)

    def known(self) -> str:
        """The languages, as messages list them."""
        return ", ".join(sorted({f"{p.tgt} ({p.tag})" for p in self.pairs}))

    def tag(self, lang: str) -> str:
        """The tag of target language `lang` (its code as the pairs name it, or its ISO 639-3 code)."""
        tags = target_tags(self.pairs)
        if not self.pairs:
            raise TargetLanguageError(
                f"--tgt-lang {lang}: this model translates one language pair; --tgt-lang is for models "
                "prepared with several (`prepare --pair`)"
            )
        if lang not in tags:
            raise TargetLanguageError(f"--tgt-lang {lang}: the model translates into {self.known()}")
        return tags[lang]

    def split(self, line: str) -> tuple[str | None, str]:
        """A line's leading tag, if it is one of the model's, and the rest of the line."""
        head, _, rest = line.lstrip().partition(" ")
        return (head, rest) if head in self.ids else (None, line)


@dataclass(frozen=True)
class LanguageInput:
    """Lines made ready for a multilingual model: the text to encode, per line the token its
    source starts with, and the token every output starts with (M2M100's convention)."""

    texts: list[str]
    first: list[int | None]
    target: int | None = None


def language_input(
    loaded: LoadedModel, lines: list[str], tgt_lang: str | None, src_lang: str | None = None
) -> LanguageInput:
    """The lines as `loaded`'s convention wants them for `tgt_lang` (and, for M2M100's, `src_lang`);
    a model of one pair takes neither language."""
    if isinstance(loaded.src_vocab, FairseqVocab):
        return _language_tokens(loaded, lines, tgt_lang, src_lang)
    if src_lang is not None:
        raise TargetLanguageError(
            f"--src-lang {src_lang}: this model does not read the source language (M2M100 and NLLB "
            "checkpoints do); leave it out"
        )
    texts, tags = tagged_lines(loaded, lines, tgt_lang)
    return LanguageInput(texts, tags)


def _language_tokens(
    loaded: LoadedModel, lines: list[str], tgt_lang: str | None, src_lang: str | None
) -> LanguageInput:
    """M2M100's: the source language's token first, the target language's forced first; without
    `tgt_lang` the lines are taken as they are (tokens typed in them, and --prefix)."""
    if tgt_lang is None:
        if src_lang is not None:
            raise TargetLanguageError(f"--src-lang {src_lang} goes with --tgt-lang: give the target language")
        return LanguageInput(lines, [None] * len(lines))
    if src_lang is None:
        raise TargetLanguageError(
            f"--tgt-lang {tgt_lang} goes with --src-lang: this model reads the source language from a "
            "token before the source (M2M100, NLLB); give it"
        )
    for option, language in (("--src-lang", src_lang), ("--tgt-lang", tgt_lang)):
        try:
            loaded.src_vocab.languages.token(language)
        except ValueError as exc:  # names the language, not the option
            raise TargetLanguageError(f"{option} {language}: {exc}") from None
    found = language_tokens(loaded, tgt_lang, src_lang)
    vocab = loaded.src_vocab
    first = piece_id(vocab, found.source[0])
    firsts = [first if line.strip() else None for line in lines]
    return LanguageInput(lines, firsts, piece_id(vocab, found.target[0]))


def tagged_lines(
    loaded: LoadedModel, lines: list[str], lang: str | None
) -> tuple[list[str], list[int | None]]:
    """The lines without a leading tag of the model's, and per line the tag id its source starts
    with: the line's own, else `lang`'s; None for an empty line, and for every line of a model of
    one pair (which takes no `lang`). A non-empty line of a multilingual model with neither is a
    TargetLanguageError."""
    languages = TargetLanguages.of(loaded)
    asked = languages.tag(lang) if lang is not None else None
    if not languages.multilingual:
        return lines, [None] * len(lines)
    texts, tags = [], []
    for number, line in enumerate(lines, 1):
        own, rest = languages.split(line)
        tag = own or asked
        if tag is None and line.strip():
            raise TargetLanguageError(
                f"input line {number}: which language? give --tgt-lang, or start the line with a tag; "
                f"the model translates into {languages.known()}"
            )
        texts.append(rest)
        tags.append(languages.ids[tag] if tag is not None and rest.strip() else None)
    return texts, tags


def with_tags(sources: list[list[int]], tags: list[int | None]) -> list[list[int]]:
    """Each non-empty source with its tag id first."""
    return [[tag, *ids] if tag is not None and ids else ids for ids, tag in zip(sources, tags, strict=True)]
