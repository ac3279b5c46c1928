"""Labelled bracket precision, recall and F1 with EVALB's conventions (COLLINS.prm).

- A bracket is (label, first word, last word + 1); preterminals (POS tags) are not brackets.
- The root constituent counts; an unlabelled outer bracket or TOP/ROOT is removed when read.
- Punctuation words (gold POS tag in PUNCTUATION) are deleted from both trees before spans
  are computed, so a bracket that differs only by punctuation still matches; a bracket left
  without words disappears.
- ADVP and PRT are the same label; function tags are stripped when trees are read.
- Brackets are a multiset (a unary chain X -> X counts twice); scores are micro-averaged over
  the corpus, as EVALB's summary "Bracketing FMeasure".
Gold and test trees must have the same words; the punctuation positions come from the gold
tags, because a parser's output may carry placeholder tags.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .data.trees import Tree

PUNCTUATION = frozenset({"''", "``", ".", ":", ","})
EQUIVALENT = {"PRT": "ADVP"}

Bracket = tuple[str, int, int]


def brackets(tree: Tree, skip: set[int] | frozenset[int] = frozenset()) -> Counter[Bracket]:
    """Labelled brackets over word positions, positions in `skip` deleted first."""
    out: Counter[Bracket] = Counter()

    def walk(node: Tree, position: int, kept: int) -> tuple[int, int]:
        """Returns (words seen, kept words seen) after `node`."""
        start = kept
        for child in node.children:
            if isinstance(child, str):
                kept += position not in skip
                position += 1
            else:
                position, kept = walk(child, position, kept)
        if not node.is_preterminal and kept > start:
            out[(EQUIVALENT.get(node.label, node.label), start, kept)] += 1
        return position, kept

    walk(tree, 0, 0)
    return out


@dataclass
class BracketScore:
    matched: int
    gold: int
    test: int

    @property
    def precision(self) -> float:
        return self.matched / self.test if self.test else 0.0

    @property
    def recall(self) -> float:
        return self.matched / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def __add__(self, other: BracketScore) -> BracketScore:
        return BracketScore(self.matched + other.matched, self.gold + other.gold, self.test + other.test)


def score_tree(gold: Tree, test: Tree) -> BracketScore:
    words = gold.words()
    if test.words() != words:
        raise ValueError(f"test tree words {test.words()} differ from gold words {words}")
    skip = {i for i, tag in enumerate(gold.tags()) if tag in PUNCTUATION}
    g, t = brackets(gold, skip), brackets(test, skip)
    return BracketScore(sum((g & t).values()), sum(g.values()), sum(t.values()))


def corpus_score(golds: list[Tree], tests: list[Tree]) -> BracketScore:
    """Micro-averaged bracket counts over sentence pairs."""
    if len(golds) != len(tests):
        raise ValueError(f"{len(golds)} gold trees but {len(tests)} test trees")
    total = BracketScore(0, 0, 0)
    for gold, test in zip(golds, tests, strict=True):
        total = total + score_tree(gold, test)
    return total
