"""Source-side input formats beyond plain text, shared by `prepare` and `translate`.

- format "tree" (tree-to-string): each source line is a bracketed tree, fed to the encoder
  linearised with its words (and POS tags unless tree_tags is off).
- factors k > 0: each token is `word|tag1|...|tagk` (separator configurable); words go through
  the subword vocabulary, and every subword piece carries its word's tags.
- trees "tree" or "conllu": a syntax tree per source line in `{split}.{src}.tree` (bracketed,
  one per line) or `{split}.{src}.conllu`; its words must be the line's words. The encoder's
  syntax masks use the tree distances omega, expanded to the pieces of each word.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..choices import SOURCE_FORMATS, SOURCE_TREES
from .corpus import CorpusError
from .syntax import constituency_omega, dependency_omega, expand_to_pieces, read_conllu
from .trees import linearise, parse_trees, read_treebank
from .vocab import SentencePieceVocab, SymbolVocab, Vocab


@dataclass
class SourceFormat:
    format: str = "text"  # text | tree
    tree_tags: bool = True
    factors: int = 0
    factor_sep: str = "|"
    trees: str | None = None  # None | tree | conllu

    def __post_init__(self) -> None:
        if self.format not in SOURCE_FORMATS:
            raise ValueError(f"source format '{self.format}' is not one of: {', '.join(SOURCE_FORMATS)}")
        if self.trees is not None and self.trees not in SOURCE_TREES:
            raise ValueError(f"source trees '{self.trees}' are not one of: {', '.join(SOURCE_TREES)}")
        if self.factors < 0 or (self.factors and not self.factor_sep):
            raise ValueError("factors must be >= 0 and need a non-empty separator")

    @property
    def by_word(self) -> bool:
        """Whether pieces must stay aligned to words (tags or trees ride on them)."""
        return self.factors > 0 or self.trees is not None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class SourceAnnotation:
    """What travels beside one source's ids: tag ids per factor and tree distances."""

    factors: np.ndarray | None = None  # (k, n) int
    omega: np.ndarray | None = None  # (n, n) int, between the n source pieces

    def truncate(self, n: int) -> SourceAnnotation:
        """The annotation of the first n pieces."""
        return SourceAnnotation(
            self.factors[:, :n] if self.factors is not None else None,
            self.omega[:n, :n] if self.omega is not None else None,
        )


def split_line(line: str, fmt: SourceFormat, where: str) -> tuple[list[str], list[list[str]]]:
    """The words of a source line, and per factor the tags of those words."""
    if fmt.format == "tree":
        trees = parse_trees(line, where)
        if len(trees) != 1:
            raise CorpusError(f"{where}: expected one bracketed tree, found {len(trees)}")
        tokens = linearise(trees[0], words=True, tags=fmt.tree_tags)
    else:
        tokens = line.split()
    if not fmt.factors:
        return tokens, []
    words, tags = [], [[] for _ in range(fmt.factors)]
    for token in tokens:
        parts = token.split(fmt.factor_sep)
        if len(parts) != fmt.factors + 1:
            raise CorpusError(
                f"{where}: token '{token}' has {len(parts) - 1} tag(s) after '{fmt.factor_sep}', "
                f"expected {fmt.factors}"
            )
        words.append(parts[0])
        for k, tag in enumerate(parts[1:]):
            tags[k].append(tag)
    return words, tags


def read_word_trees(path: Path, kind: str) -> list[tuple[list[str], np.ndarray]]:
    """(words, word-level omega) per line of a tree file."""
    if not path.exists():
        raise CorpusError(f"{path}: file not found (syntax trees for the source)")
    if kind == "conllu":
        return [(words, dependency_omega(heads)) for words, heads in read_conllu(path)]
    return [(tree.words(), constituency_omega(tree)) for tree in read_treebank(path)]


def encode_source(
    vocab: Vocab,
    words: list[str],
    tags: list[list[str]],
    tag_vocabs: list[SymbolVocab],
    omega: np.ndarray | None,
) -> tuple[list[int], SourceAnnotation]:
    """Ids of the words' pieces, with each piece's tags and the piece-level omega."""
    if isinstance(vocab, SentencePieceVocab):
        pieces = vocab.sp.encode(words) if words else []
    else:
        pieces = [vocab.encode(w) for w in words]
    ids = [i for p in pieces for i in p]
    word_of = np.asarray([w for w, p in enumerate(pieces) for _ in p], dtype=np.int64)
    factors = None
    if tag_vocabs:
        factors = np.asarray(
            [[tv.index.get(t, 1) for t in seq] for tv, seq in zip(tag_vocabs, tags, strict=True)],
            dtype=np.int64,
        ).reshape(len(tag_vocabs), len(words))[:, word_of]
    piece_omega = expand_to_pieces(omega, word_of) if omega is not None else None
    return ids, SourceAnnotation(factors, piece_omega)


def check_tree_words(line_words: list[str], tree_words: list[str], where: str) -> None:
    if line_words != tree_words:
        raise CorpusError(
            f"{where}: the syntax tree's words ({' '.join(tree_words)[:80]}) differ from the source "
            f"line's words ({' '.join(line_words)[:80]})"
        )
