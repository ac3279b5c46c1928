"""How much of a corpus a reused vocabulary can read (`prepare --vocab-from`): a word it cannot
spell becomes <unk>, and a model's vocabulary for another language, or a generated task's
symbols, turns German text into a dataset of <unk> that trains nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .corpus import CorpusError
from .dataset import Split
from .vocab import UNK

REFUSED_SHARE = 0.5  # most of the text unknown: not a vocabulary for this text
WARNED_SHARE = 0.05  # enough unknown to cost a fine-tuned model visibly


@dataclass
class Coverage:
    """The tokens of a split's kept pairs and those of them that are <unk>, per side."""

    tokens: list[int] = field(default_factory=lambda: [0, 0])
    unknown: list[int] = field(default_factory=lambda: [0, 0])

    def count(self, split: Split) -> None:
        for side, ids in enumerate((split.src_tokens, split.tgt_tokens)):
            self.tokens[side] += len(ids)
            self.unknown[side] += int(np.count_nonzero(ids == UNK))

    def warnings(self, files: tuple[Path, Path], vocab_from: str) -> list[str]:
        """A warning per side of which over 5% is <unk>; a CorpusError when over half of a side is."""
        found = []
        for path, tokens, unknown in zip(files, self.tokens, self.unknown, strict=True):
            share = unknown / max(tokens, 1)
            said = (
                f"--vocab-from {vocab_from}: {share:.1%} of the tokens of {path} are <unk> in the "
                f"model's vocabulary ({unknown:,} of {tokens:,}: words it cannot spell)"
            )
            if share > REFUSED_SHARE:
                raise CorpusError(
                    f"{said}; it is no vocabulary for this text (to learn one, leave out --vocab-from)"
                )
            if share > WARNED_SHARE:
                found.append(said)
        return found
