"""fairseq dictionaries behind our ids: the vocabularies of M2M100 and NLLB, read as Hugging Face's
M2M100Tokenizer and NllbTokenizer read them (interop/fairseq_tokenizers.py), with their language
tokens.

Text is cut at the tokenizer's special tokens (`<s>`, `</s>`, `<pad>`, `<unk>`, NLLB's `<mask>`
and every language token, `__de__` or `deu_Latn`), each one token wherever it stands; sentencepiece
splits the rest, and each piece takes its id in the model's dictionary, then ours (`perm`, as for
Marian: our PAD, UNK, BOS, EOS first, BOS a second copy of the model's decoder start). Decoded text
leaves the special tokens out, the language tokens among them, as `skip_special_tokens` does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import sentencepiece as spm
from pydantic import BaseModel, ConfigDict, Field

from .specials import BOS, EOS

START_NAME = "<start>"  # our BOS: the model's decoder start again, under a name of its own


class LanguageTokens(BaseModel):
    """The language tokens of a multilingual model and where they go: a source starts with its
    language's token, and the first token the decoder outputs (after its start) is forced to be
    the target language's, as Hugging Face's `forced_bos_token_id` does."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tokens: dict[str, str]  # language code -> its token's text: en -> __en__, deu_Latn -> deu_Latn

    def token(self, language: str) -> str:
        """The token of a language, named by its code or by the token itself."""
        if language in self.tokens:
            return self.tokens[language]
        if language in self.tokens.values():
            return language
        known = ", ".join(sorted(self.tokens)[:12]) + (", ..." if len(self.tokens) > 12 else "")
        raise ValueError(f"language {language!r} is not one of this model's {len(self.tokens)}: {known}")


class FairseqTable(BaseModel):
    """What a FairseqVocab knows besides its sentencepiece model; saved beside it as JSON."""

    model_config = ConfigDict(extra="forbid")
    pieces: dict[str, int]  # piece or special token -> the model's id
    perm: list[int]  # our id -> the model's id
    specials: list[str]  # texts kept whole in input and left out of output; all in `pieces`
    # Text of an id no piece names: M2M100Tokenizer writes '<unk>' (its madeup words), NllbTokenizer
    # (the tokenizers library) nothing (None: the id is left out, the pieces around it joined).
    unnamed: str | None
    # How pieces become text: `sentencepiece` decodes each run of pieces and strips the text
    # (M2M100Tokenizer); `metaspace` joins them, every ▁ a space, the first one dropped (the
    # tokenizers library's Metaspace decoder, NllbTokenizer's in transformers 5).
    detokenizer: Literal["sentencepiece", "metaspace"] = "sentencepiece"
    languages: LanguageTokens
    tokenizer: dict[str, Any] = Field(default_factory=dict)  # the tokenizer's JSON files, for export


class FairseqVocab:
    """A fairseq dictionary behind our ids (see the module's docstring)."""

    def __init__(self, spm_proto: bytes, table: FairseqTable) -> None:
        self.proto, self.table = spm_proto, table
        self.sp = spm.SentencePieceProcessor(model_proto=spm_proto)
        self.pieces, self.perm = table.pieces, table.perm
        self.ours = {m: o for o, m in enumerate(table.perm) if o != BOS}  # theirs -> ours
        self.names = {i: p for p, i in table.pieces.items()}
        self.special_ids = {table.pieces[s] for s in table.specials}
        self.unk = self.ours[table.pieces["<unk>"]]
        by_length = sorted(table.specials, key=len, reverse=True)
        self.split = re.compile("(" + "|".join(re.escape(s) for s in by_length) + ")")

    @property
    def languages(self) -> LanguageTokens:
        return self.table.languages

    def __reduce__(self) -> tuple:
        """Pickled as its model and table (for worker processes)."""
        return (FairseqVocab, (self.proto, self.table))

    def __len__(self) -> int:
        return len(self.perm)

    def encode(self, text: str) -> list[int]:
        """Ids without EOS; a piece the dictionary lacks is <unk>, as in the tokenizers."""
        ids = []
        for i, stretch in enumerate(self.split.split(text)):
            if i % 2:
                ids.append(self.ours[self.pieces[stretch]])
            elif stretch:
                ids += [
                    self.ours.get(self.pieces.get(p, -1), self.unk)
                    for p in self.sp.encode(stretch, out_type=str)
                ]
        return ids

    def decode(self, ids: list[int]) -> str:
        """Special tokens left out; an id no piece names is `unnamed`'s text (or left out), each run
        of pieces between such ids detokenised as `detokenizer` says."""
        runs: list[list[str]] = [[]]
        for i in ids:
            theirs = self.perm[i]
            if i <= EOS or theirs in self.special_ids:
                continue
            if theirs in self.names:
                runs[-1].append(self.names[theirs])
            elif self.table.unnamed is not None:
                runs.append([])
        if self.table.detokenizer == "metaspace":
            text = "".join(piece for run in runs for piece in run).replace("\u2581", " ")
            return text[1:] if text.startswith(" ") else text
        return (self.table.unnamed or "").join(self.sp.decode_pieces(run) for run in runs).strip()

    def token(self, i: int) -> str:
        if i == BOS:
            return START_NAME
        return self.names.get(self.perm[i], f"<unused{self.perm[i]}>")

    def save(self, prefix: Path) -> None:
        Path(f"{prefix}.fairseq.spm").write_bytes(self.proto)
        Path(f"{prefix}.fairseq.json").write_text(self.table.model_dump_json(), encoding="utf-8")

    @classmethod
    def load(cls, prefix: Path) -> FairseqVocab:
        text = Path(f"{prefix}.fairseq.json").read_text(encoding="utf-8")
        table = FairseqTable.model_validate_json(text)
        return cls(Path(f"{prefix}.fairseq.spm").read_bytes(), table)
