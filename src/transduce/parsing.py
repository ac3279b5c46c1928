"""Parsing as sequence-to-sequence: model output tokens -> repaired trees -> bracket scores."""

from __future__ import annotations

from .data.trees import Tree, parse_trees, repair
from .data.vocab import Vocab
from .evalb import BracketScore, corpus_score


def output_trees(vocab: Vocab, outputs: list[list[int]], sentences: list[list[str]], root: str) -> list[Tree]:
    """A valid tree over each sentence's words from the model's linearised output ids."""
    return [
        repair([t for t in vocab.decode(ids).split(" ") if t], words, root)
        for ids, words in zip(outputs, sentences, strict=True)
    ]


def gold_tree(line: str) -> Tree:
    """The single tree of a one-line bracketed string."""
    trees = parse_trees(line)
    if len(trees) != 1:
        raise ValueError(f"expected one tree, found {len(trees)} in: {line[:80]}")
    return trees[0]


def score_outputs(
    vocab: Vocab, outputs: list[list[int]], golds: list[Tree], root: str
) -> tuple[BracketScore, list[Tree]]:
    """Corpus bracket score of the model outputs against gold trees, and the repaired trees."""
    tests = output_trees(vocab, outputs, [g.words() for g in golds], root)
    return corpus_score(golds, tests), tests
