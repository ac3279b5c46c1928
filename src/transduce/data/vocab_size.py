"""The vocabulary size `prepare` learns when --vocab-size is not given: scaled to the corpus.

The paper's 37,000 shared pieces suit its 4.5M pairs. A corpus of 20,000 pairs holds about as
many distinct words, so 37,000 pieces would be whole words, most too rare to learn, rather than
subwords. A piece per 5 training pairs gives 4,000 there (the size the CPU-hour recipe uses) and
the paper's size from 185,000 pairs on; never fewer than 1,000, nor fewer than byte fallback
needs (256 byte pieces, the specials, the symbols and a piece per distinct character).
"""

from __future__ import annotations

from collections.abc import Iterable

from .vocab import SPECIALS

PAPER_SIZE = 37_000  # the paper's shared En-De vocabulary: the most a default gives
PAIRS_PER_PIECE = 5
SMALLEST = 1_000
BYTE_PIECES = 256


def default_vocab_size(pairs: int, sample: Iterable[bytes], symbols: int) -> int:
    """The size for `pairs` training pairs; `sample` (the pairs the vocabulary is learned from,
    UTF-8) is read for its characters only when the size is below the paper's, which no corpus
    needs for its characters (and reading a sample of a million pairs would cost seconds)."""
    size = min(PAPER_SIZE, max(SMALLEST, pairs // PAIRS_PER_PIECE))
    if size == PAPER_SIZE:
        return size
    characters: set[str] = set()
    for pair in sample:
        characters.update(pair.decode())
    characters.discard("\n")  # between a pair's source and target
    characters.add(" ")  # sentencepiece's ▁, the space it puts before every sentence
    return max(size, BYTE_PIECES + len(SPECIALS) + symbols + len(characters))


def why(size: int, pairs: int) -> str:
    """What `prepare` says of a size it chose."""
    return (
        f"vocabulary size {size:,} for {pairs:,} training pairs (--vocab-size not given: a piece "
        f"per {PAIRS_PER_PIECE} pairs, from {SMALLEST:,} to the paper's {PAPER_SIZE:,}, and a "
        "piece for every character)"
    )
