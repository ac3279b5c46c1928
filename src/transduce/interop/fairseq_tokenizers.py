"""The tokenizer files of an M2M100ForConditionalGeneration directory, read as the tokenizer that
`tokenizer_config.json` names reads them, and written back on export.

Two layouts are read, each a fairseq dictionary (`<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, then the
sentencepiece pieces) with language tokens after it:

- M2M100Tokenizer: `vocab.json` (piece -> id) and `sentencepiece.bpe.model`; the language tokens
  `__en__`, `__de__`, ... are not in vocab.json but numbered after its entries, in the order of
  transformers' list for `language_codes` (`m2m100`: 100 languages, `wmt21`: 8); ids past them
  (its `num_madeup_words`) have no piece and decode as `<unk>`.
- NllbTokenizer: `tokenizer.json` (its model's vocabulary and its added tokens: the specials, the
  language codes `deu_Latn`, ... and `<mask>`) and `sentencepiece.bpe.model`, which splits text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..data.fairseq_vocab import FairseqTable, FairseqVocab, LanguageTokens
from .bart import ConversionError, read_object, read_pieces, read_spm

SPM_FILE = "sentencepiece.bpe.model"
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
# Files carried verbatim into the checkpoint and written back by export, when the directory has them.
CARRIED = ("tokenizer_config.json", "special_tokens_map.json", "vocab.json", "tokenizer.json")
# transformers' M2M100Tokenizer FAIRSEQ_LANGUAGE_CODES: the order numbers the language tokens.
M2M100_CODES = {
    "m2m100": [
        "af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br", "bs", "ca", "ceb", "cs", "cy",
        "da", "de", "el", "en", "es", "et", "fa", "ff", "fi", "fr", "fy", "ga", "gd", "gl", "gu", "ha",
        "he", "hi", "hr", "ht", "hu", "hy", "id", "ig", "ilo", "is", "it", "ja", "jv", "ka", "kk", "km",
        "kn", "ko", "lb", "lg", "ln", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr", "ms", "my", "ne",
        "nl", "no", "ns", "oc", "or", "pa", "pl", "ps", "pt", "ro", "ru", "sd", "si", "sk", "sl", "so",
        "sq", "sr", "ss", "su", "sv", "sw", "ta", "th", "tl", "tn", "tr", "uk", "ur", "uz", "vi", "wo",
        "xh", "yi", "yo", "zh", "zu",
    ],
    "wmt21": ["en", "ha", "is", "ja", "cs", "ru", "zh", "de"],
}  # fmt: skip


@dataclass(frozen=True)
class Dictionary:
    """What a layout's files say: every piece's and special token's id, the tokens kept whole, the
    language tokens, and how text is decoded (FairseqTable's `unnamed` and `detokenizer`)."""

    pieces: dict[str, int]
    specials: list[str]
    languages: dict[str, str]
    unnamed: str | None
    detokenizer: Literal["sentencepiece", "metaspace"]


def _m2m100(hf_dir: Path, config: dict[str, Any], size: int) -> Dictionary:
    pieces = read_pieces(hf_dir / "vocab.json", size)
    codes_name = config.get("language_codes", "m2m100")
    if not isinstance(codes_name, str) or codes_name not in M2M100_CODES:
        raise ConversionError(
            f"tokenizer_config.json: language_codes {codes_name!r} is not one of {sorted(M2M100_CODES)}"
        )
    languages = {code: f"__{code}__" for code in M2M100_CODES[codes_name]}
    inside = [t for t in languages.values() if t in pieces]
    if inside:
        raise ConversionError(
            f"vocab.json: holds the language token {inside[0]} (id {pieces[inside[0]]}), but M2M100Tokenizer "
            "numbers the language tokens after vocab.json's entries"
        )
    first = len(pieces)
    if first + len(languages) > size:
        raise ConversionError(
            f"config.json: vocab_size {size} has no room for vocab.json's {first} entries and the "
            f"{len(languages)} language tokens of language_codes {codes_name!r}"
        )
    pieces.update({token: first + i for i, token in enumerate(languages.values())})
    return Dictionary(
        pieces,
        [*FAIRSEQ_SPECIALS, *languages.values()],
        languages,
        unnamed="<unk>",
        detokenizer="sentencepiece",
    )


def _nllb(hf_dir: Path, config: dict[str, Any], size: int) -> Dictionary:
    if config.get("legacy_behaviour", False) is not False:
        raise ConversionError(
            "tokenizer_config.json: legacy_behaviour puts the source language token last; "
            "only the prefix layout (legacy_behaviour false) is read"
        )
    tokenizer = read_object(hf_dir / "tokenizer.json")
    model = tokenizer.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if isinstance(vocab, list):  # a Unigram model: [piece, score] pairs, numbered in order
        vocab = {entry[0]: i for i, entry in enumerate(vocab) if isinstance(entry, list) and entry}
    added = tokenizer.get("added_tokens", [])
    if (
        not isinstance(vocab, dict)
        or not isinstance(added, list)
        or not all(isinstance(a, dict) for a in added)
    ):
        raise ConversionError(
            f"{hf_dir / 'tokenizer.json'}: no model vocabulary and added-token list "
            "(as the tokenizers library writes them)"
        )
    pieces = {**vocab, **{a.get("content"): a.get("id") for a in added}}
    specials = [a.get("content") for a in added if a.get("special")]
    mask = config.get("mask_token", "<mask>")
    mask = mask.get("content") if isinstance(mask, dict) else mask  # older files: an AddedToken object
    languages = {token: token for token in specials if token not in {*FAIRSEQ_SPECIALS, mask}}
    _check_ids(pieces, size, hf_dir / "tokenizer.json")
    return Dictionary(pieces, specials, languages, unnamed=None, detokenizer="metaspace")


def _check_ids(pieces: dict[Any, Any], size: int, file: Path) -> None:
    """Every piece a string with an id of its own within the embedding table."""
    bad = [p for p, i in pieces.items() if not isinstance(p, str) or type(i) is not int or not 0 <= i < size]
    if bad:
        raise ConversionError(
            f"{file}: ids must be integers from 0 to {size - 1} (vocab_size); e.g. {bad[0]!r}"
        )
    if len(set(pieces.values())) < len(pieces):
        raise ConversionError(f"{file}: two pieces share an id")


# tokenizer_config.json's tokenizer_class -> the layout its files follow
LAYOUTS: dict[str, Callable[[Path, dict[str, Any], int], Dictionary]] = {
    "M2M100Tokenizer": _m2m100,
    "NllbTokenizer": _nllb,
    "NllbTokenizerFast": _nllb,
}


def read_tokenizer(hf_dir: Path, size: int) -> tuple[bytes, Dictionary, dict[str, Any]]:
    """The sentencepiece model, the dictionary and the carried files of a directory whose model
    has `size` embedding rows. Without tokenizer_config.json, a vocab.json means M2M100Tokenizer
    with its defaults, as transformers reads it."""
    config_file = hf_dir / "tokenizer_config.json"
    config = read_object(config_file) if config_file.exists() else {}
    name = config.get("tokenizer_class") or ("M2M100Tokenizer" if (hf_dir / "vocab.json").exists() else None)
    if name not in LAYOUTS:
        raise ConversionError(
            f"{config_file}: tokenizer_class {name!r} is not one of {sorted(LAYOUTS)} "
            "(and without tokenizer_config.json, no vocab.json for M2M100Tokenizer)"
        )
    dictionary = LAYOUTS[name](hf_dir, config, size)
    missing = [s for s in FAIRSEQ_SPECIALS if s not in dictionary.pieces]
    if missing:
        raise ConversionError(f"{hf_dir}: the tokenizer lacks fairseq's special token {missing[0]}")
    carried = {f: read_object(hf_dir / f) for f in CARRIED if (hf_dir / f).exists()}
    return read_spm(hf_dir / SPM_FILE), dictionary, carried


def fairseq_vocab(
    proto: bytes, dictionary: Dictionary, perm: list[int], carried: dict[str, Any]
) -> FairseqVocab:
    """The vocabulary of an imported checkpoint; ConversionError when sentencepiece cannot parse
    the model file."""
    table = FairseqTable(
        pieces=dictionary.pieces,
        perm=perm,
        specials=dictionary.specials,
        unnamed=dictionary.unnamed,
        detokenizer=dictionary.detokenizer,
        languages=LanguageTokens(tokens=dictionary.languages),
        tokenizer=carried,
    )
    try:
        return FairseqVocab(proto, table)
    except RuntimeError:
        raise ConversionError(
            f"{SPM_FILE}: not a sentencepiece model (sentencepiece cannot parse it)"
        ) from None


def write_tokenizer(folder: Path, vocab: FairseqVocab) -> None:
    """The tokenizer files an imported checkpoint was read from, as they were."""
    (folder / SPM_FILE).write_bytes(vocab.proto)
    for name, content in vocab.table.tokenizer.items():
        (folder / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
