"""Vocabularies: sentencepiece BPE for text, whitespace symbols for generated tasks.

Both reserve the same special ids: pad 0, unk 1, bos 2, eos 3.
Normalisation: BPE models are trained with sentencepiece's `identity` rule, extra
whitespace kept, and byte fallback, so any UTF-8 text round-trips exactly:
decode(encode(text)) == text. Symbol vocabularies split on single spaces and join with them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import sentencepiece as spm

from .fairseq_vocab import FairseqVocab
from .specials import BOS, EOS, PAD, UNK

SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]
FIRST_SYMBOL = len(SPECIALS)  # a symbol vocabulary's first symbol: class 0 of a label vocabulary
SPECIAL_IDS = {"pad_id": PAD, "unk_id": UNK, "bos_id": BOS, "eos_id": EOS}
# What every learned vocabulary shares: BPE with byte fallback over the text exactly as given
# (no normalisation, whitespace kept), digits split, trained quietly on a sample.
_SETTINGS = (
    "model_type=bpe character_coverage=1.0 byte_fallback=true normalization_rule_name=identity "
    "remove_extra_whitespaces=false split_digits=true shuffle_input_sentence=true "
    "hard_vocab_limit=false minloglevel=2 num_threads=2"
)
TRAINER_SETTINGS = dict(setting.split("=") for setting in _SETTINGS.split())
# Hugging Face's MarianTokenizer keeps these whole wherever they occur in the text (its special
# tokens), and a language code such as >>deu<< whole at the start of the text or after one of them.
MARIAN_SPECIAL_TEXT = re.compile("(</s>|<unk>|<pad>)")
MARIAN_LANGUAGE_CODE = re.compile(">>.*?<<", re.DOTALL)


class Vocab(Protocol):
    """What the rest of the package needs from a vocabulary."""

    def __len__(self) -> int: ...
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...
    def token(self, i: int) -> str: ...
    def save(self, prefix: Path) -> None: ...


class SentencePieceVocab:
    """BPE subwords learned with sentencepiece."""

    def __init__(self, model_proto: bytes) -> None:
        if not model_proto:  # sentencepiece would log to stderr and give a processor of 0 pieces
            raise ValueError("an empty file, not a sentencepiece model")
        self.proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)

    def __reduce__(self) -> tuple:
        """Pickled as its model (for worker processes); the processor is rebuilt from it."""
        return (SentencePieceVocab, (self.proto,))

    @classmethod
    def train(
        cls,
        lines: Iterable[str],
        size: int,
        seed_sentences: int = 2_000_000,
        symbols: list[str] | None = None,
    ) -> SentencePieceVocab:
        """`symbols` are kept as single pieces (e.g. the bracket tokens of linearised trees);
        sentencepiece samples `seed_sentences` of the lines if there are more."""
        import io

        buffer = io.BytesIO()
        try:
            cls._train(lines, size, seed_sentences, buffer, symbols or [])
        except RuntimeError as exc:
            if "smaller than required_chars" in str(exc):
                raise ValueError(
                    f"vocabulary size {size} is too small: byte fallback needs 256 byte pieces plus "
                    f"the corpus's distinct characters ({exc}); raise --vocab-size"
                ) from None
            raise ValueError(f"sentencepiece could not learn a vocabulary of {size}: {exc}") from None
        return cls(buffer.getvalue())

    @staticmethod
    def _train(
        lines: Iterable[str], size: int, seed_sentences: int, buffer: object, symbols: list[str]
    ) -> None:
        spm.SentencePieceTrainer.train(
            user_defined_symbols=symbols,
            sentence_iterator=iter(lines),
            model_writer=buffer,
            vocab_size=size,
            input_sentence_size=seed_sentences,
            **SPECIAL_IDS,
            **TRAINER_SETTINGS,
        )

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.sp.decode([i for i in ids if i > EOS])

    def token(self, i: int) -> str:
        return self.sp.id_to_piece(i)

    def save(self, prefix: Path) -> None:
        Path(f"{prefix}.spm").write_bytes(self.proto)


class SymbolVocab:
    """A fixed list of whitespace-separated symbols (digits, letters, operators)."""

    def __init__(self, symbols: list[str]) -> None:
        self.symbols = SPECIALS + [s for s in symbols if s not in SPECIALS]
        self.index = {s: i for i, s in enumerate(self.symbols)}

    def __len__(self) -> int:
        return len(self.symbols)

    def encode(self, text: str) -> list[int]:
        return [self.index.get(s, UNK) for s in text.split(" ") if s]

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.symbols[i] for i in ids if i > EOS)

    def token(self, i: int) -> str:
        return self.symbols[i]

    def save(self, prefix: Path) -> None:
        Path(f"{prefix}.symbols.json").write_text(json.dumps(self.symbols), encoding="utf-8")


class MarianVocab:
    """Marian's tokenizer files behind our ids: pieces -> vocab.json ids -> permuted ids, tokenised
    and detokenised as Hugging Face's MarianTokenizer does, so imported models see the same ids."""

    def __init__(self, spm_proto: bytes, pieces: dict[str, int], perm: list[int]) -> None:
        self.proto = spm_proto
        self.sp = spm.SentencePieceProcessor(model_proto=spm_proto)
        self.pieces = pieces
        self.perm = perm  # ours -> marian
        self.ours = {m: o for o, m in enumerate(perm) if o != BOS}  # marian -> ours
        self.names = {i: p for p, i in pieces.items()}
        self.unk = self.ours[perm[UNK]]

    def __reduce__(self) -> tuple:
        return (MarianVocab, (self.proto, self.pieces, self.perm))

    def __len__(self) -> int:
        return len(self.perm)

    def encode(self, text: str) -> list[int]:
        """Ids without EOS; a piece vocab.json lacks is unk, as in MarianTokenizer."""
        return [self.ours.get(self.pieces.get(p, -1), self.unk) for p in self._pieces(text)]

    def _pieces(self, text: str) -> list[str]:
        """Special tokens' text whole, every other stretch by `_stretch_pieces`."""
        pieces = []
        for i, stretch in enumerate(MARIAN_SPECIAL_TEXT.split(text)):
            pieces += [stretch] if i % 2 else self._stretch_pieces(stretch)
        return pieces

    def _stretch_pieces(self, text: str) -> list[str]:
        """A leading language code as one piece (vocab.json holds it; spm would split it), then spm's."""
        code = MARIAN_LANGUAGE_CODE.match(text)
        head, rest = ([code.group()], text[code.end() :]) if code else ([], text)
        return head + self.sp.encode(rest, out_type=str)

    def decode(self, ids: list[int]) -> str:
        """Specials dropped. Pieces this spm does not know (the other side's, language codes) come
        back verbatim from spm, so every ▁ left is a space, as MarianTokenizer makes it."""
        pieces = [self.names[self.perm[i]] for i in ids if i > EOS]
        return self.sp.decode_pieces(pieces).replace("\u2581", " ").strip()

    def token(self, i: int) -> str:
        return self.names.get(self.perm[i], "<unk>")

    def save(self, prefix: Path) -> None:
        Path(f"{prefix}.marian.spm").write_bytes(self.proto)
        Path(f"{prefix}.marian.json").write_text(
            json.dumps({"pieces": self.pieces, "perm": self.perm}), encoding="utf-8"
        )

    @classmethod
    def load(cls, prefix: Path) -> MarianVocab:
        data = json.loads(Path(f"{prefix}.marian.json").read_text(encoding="utf-8"))
        return cls(Path(f"{prefix}.marian.spm").read_bytes(), data["pieces"], data["perm"])


def piece_id(vocab: Vocab, piece: str) -> int:
    """The id of a piece the vocabulary holds whole (a target-language tag, learned as a symbol of
    its own); ValueError when it holds none."""
    found = next((i for i in range(len(vocab)) if vocab.token(i) == piece), None)
    if found is None:
        raise ValueError(f"the vocabulary has no piece {piece!r}")
    return found


class VocabFilesError(ValueError):
    """A directory's vocabulary files include a link or a device."""


def vocab_files(directory: Path) -> list[Path]:
    """The vocabulary files (`src.*`, `tgt.*`) of a dataset or checkpoint directory; links and
    other non-regular files are refused (they could point outside the directory)."""
    files = sorted(p for p in Path(directory).iterdir() if p.name.startswith(("src.", "tgt.")))
    for path in files:
        if path.is_symlink() or not path.is_file():
            raise VocabFilesError(f"{path}: not a regular file (links and devices are refused)")
    return files


def vocab_exists(prefix: Path) -> bool:
    """Whether a vocabulary of any kind was saved under `prefix`."""
    return any(
        Path(f"{prefix}{ext}").exists() for ext in (".spm", ".symbols.json", ".marian.json", ".fairseq.json")
    )


def load_vocab(prefix: Path) -> Vocab:
    """Load whichever vocabulary was saved under `prefix`."""
    spm_file, sym_file = Path(f"{prefix}.spm"), Path(f"{prefix}.symbols.json")
    if Path(f"{prefix}.marian.json").exists():
        return MarianVocab.load(prefix)
    if Path(f"{prefix}.fairseq.json").exists():
        return FairseqVocab.load(prefix)
    if spm_file.exists():
        return SentencePieceVocab(spm_file.read_bytes())
    if sym_file.exists():
        return SymbolVocab(json.loads(sym_file.read_text(encoding="utf-8"))[len(SPECIALS) :])
    raise FileNotFoundError(f"no vocabulary at {prefix} (expected {spm_file.name} or {sym_file.name})")
