"""Target-side text that the user gives (forced prefixes, targets to score) as target ids.

Such text must be read as it is: a word the target vocabulary cannot spell would become <unk>,
and the model would then force or score another text than the one given (an output that does
not start with its prefix, a score of something else). A vocabulary with byte fallback spells
every word, so only ids that actually come out as <unk> are refused."""

from __future__ import annotations

from collections.abc import Sequence

from ..data.vocab import UNK, Vocab


class UnknownWordError(ValueError):
    """A line of target text holds a word that the target vocabulary encodes as <unk>."""

    def __init__(self, line: int, word: str) -> None:
        self.line = line
        self.word = word
        self.reason = f"{word!r} is not in the model's target vocabulary (it would be read as <unk>)"
        super().__init__(f"line {line}: {self.reason}")


def encode_targets(vocab: Vocab, lines: Sequence[str], first: int = 1) -> list[list[int]]:
    """Each line's ids (none for an empty line); UnknownWordError naming the first line (numbered
    from `first`) whose ids hold <unk>, and its first word that does."""
    encoded = []
    for number, line in enumerate(lines, first):
        ids = vocab.encode(line) if line.strip() else []
        if UNK in ids:
            word = next((w for w in line.split() if UNK in vocab.encode(w)), line.strip())
            raise UnknownWordError(number, word)
        encoded.append(ids)
    return encoded
