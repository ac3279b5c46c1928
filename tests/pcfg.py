"""Sampling trees from a probabilistic context-free grammar: treebanks without a download.

Grammar text, one rule per line, `#` starts a comment:
    S@top -> NP VP PU   0.8
    NN -> 'dog' | 'cat'
A quoted symbol is a word. A rule's probability follows its right-hand side (default 1); the
alternatives of a `|` line share it equally; a symbol's rules are normalised to sum to 1. A
symbol's label in the tree is its name up to '@', so S@top and S are both S but may have
different rules. The first left-hand side is the start symbol.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from transduce.data.trees import Tree


class GrammarError(ValueError):
    """A grammar that cannot be used; the message names the line."""


@dataclass
class Grammar:
    start: str
    rules: dict[str, list[tuple[list[str], float]]]

    @classmethod
    def parse(cls, text: str) -> Grammar:
        rules: dict[str, list[tuple[list[str], float]]] = {}
        start = None
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if "->" not in line:
                raise GrammarError(f"line {number}: expected 'LHS -> RHS [probability]'")
            lhs, rhs = (part.strip() for part in line.split("->", 1))
            start = start or lhs
            for alternative in rhs.split("|"):
                symbols = alternative.split()
                weight = 1.0
                if symbols and _is_number(symbols[-1]):
                    weight = float(symbols.pop())
                if not symbols:
                    raise GrammarError(f"line {number}: empty right-hand side")
                rules.setdefault(lhs, []).append((symbols, weight))
        if start is None:
            raise GrammarError("the grammar has no rules")
        for lhs, alternatives in rules.items():
            for symbols, _ in alternatives:
                for s in symbols:
                    if not _is_word(s) and s not in rules:
                        raise GrammarError(f"symbol '{s}' (in a rule of {lhs}) has no rules")
        return cls(start, rules)

    def sample(self, rng: random.Random, max_depth: int = 12) -> Tree | None:
        """One tree, or None when it grows deeper than `max_depth`."""
        return self._expand(self.start, rng, max_depth)

    def _expand(self, symbol: str, rng: random.Random, depth: int) -> Tree | None:
        if depth == 0:
            return None
        alternatives = self.rules[symbol]
        symbols = rng.choices([a for a, _ in alternatives], weights=[w for _, w in alternatives])[0]
        children: list[Tree | str] = []
        for s in symbols:
            if _is_word(s):
                children.append(s[1:-1])
            elif (child := self._expand(s, rng, depth - 1)) is None:
                return None
            else:
                children.append(child)
        return Tree(symbol.split("@", 1)[0], children)


def _is_word(symbol: str) -> bool:
    return len(symbol) >= 2 and symbol[0] == symbol[-1] == "'"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def generate_treebank(grammar: Grammar, size: int, seed: int, max_words: int = 30) -> list[Tree]:
    """`size` seeded samples with at most `max_words` words (deeper or longer ones are redrawn)."""
    rng = random.Random(seed)
    trees: list[Tree] = []
    while len(trees) < size:
        tree = grammar.sample(rng)
        if tree is not None and len(tree.words()) <= max_words:
            trees.append(tree)
    return trees
