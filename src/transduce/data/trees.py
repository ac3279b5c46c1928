"""Penn-Treebank trees: reading, cleaning, linearisation to tokens and back, and repair.

Reading follows the treebank files EVALB is run on: a tree may span several lines, an outer
bracket without a label (or labelled TOP/ROOT) around a single tree is removed, `-NONE-`
traces are deleted together with constituents left empty, and function tags and indices are
stripped from labels (NP-SBJ-1 -> NP, NP=2 -> NP; -LRB- and friends are kept).

Linearisation writes an opening token `(X` per constituent and a closing token `)X`; leaves are
the words or a placeholder (`XX`) and preterminals (POS tags) are kept or dropped, so that
  (S (NP (DT the) (NN dog)) (VP (VBD barked)))  ->  (S (NP XX XX )NP (VP XX )VP )S
with placeholders and no tags, the form parsers emit (Vinyals et al., 2015).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PLACEHOLDER = "XX"
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_KEEP_DASH = re.compile(r"^-[A-Z]+-$")  # -LRB-, -RRB-, -NONE-: labels that are not tagged names


class TreeError(ValueError):
    """Text that is not a well-formed tree; the message says where."""


@dataclass
class Tree:
    """A constituent: a label and children, each a Tree or a word (str)."""

    label: str
    children: list[Tree | str] = field(default_factory=list)

    @property
    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def words(self) -> list[str]:
        return [leaf for leaf, _ in self.leaves()]

    def tags(self) -> list[str]:
        """The POS tag of each word (PLACEHOLDER for a word without a preterminal)."""
        return [tag for _, tag in self.leaves()]

    def leaves(self) -> Iterator[tuple[str, str]]:
        for child in self.children:
            if isinstance(child, str):
                yield child, self.label if self.is_preterminal else PLACEHOLDER
            else:
                yield from child.leaves()

    def subtrees(self) -> Iterator[Tree]:
        yield self
        for child in self.children:
            if isinstance(child, Tree):
                yield from child.subtrees()

    def __str__(self) -> str:
        """One-line bracketed form; bare words get a PLACEHOLDER preterminal."""
        if self.is_preterminal:
            return f"({self.label} {self.children[0]})"
        parts = [str(c) if isinstance(c, Tree) else f"({PLACEHOLDER} {c})" for c in self.children]
        return f"({self.label} {' '.join(parts)})"


def strip_label(label: str) -> str:
    """NP-SBJ-1 -> NP, NP=2 -> NP, PRP$ kept, -LRB- kept (EVALB's label comparison)."""
    if _KEEP_DASH.match(label):
        return label
    return re.split(r"[-=]", label, maxsplit=1)[0] or label


def _parse(tokens: list[str], where: str) -> list[Tree]:
    """Bracketed tokens -> trees; raises TreeError naming `where` on imbalance."""
    stack: list[Tree] = []
    out: list[Tree] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "(":
            label = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1] not in "()" else ""
            stack.append(Tree(label))
            i += 2 if label else 1
            continue
        if tok == ")":
            if not stack:
                raise TreeError(f"{where}: ')' without a matching '('")
            node = stack.pop()
            (stack[-1].children if stack else out).append(node)
        elif not stack:
            raise TreeError(f"{where}: word '{tok}' outside any bracket")
        else:
            stack[-1].children.append(tok)
        i += 1
    if stack:
        raise TreeError(f"{where}: {len(stack)} bracket(s) not closed")
    return out


def clean(tree: Tree) -> Tree | None:
    """Remove -NONE- elements and emptied constituents, strip function tags; None if empty."""
    if tree.label == "-NONE-":
        return None
    children: list[Tree | str] = []
    for child in tree.children:
        if isinstance(child, str):
            children.append(child)
        elif (kept := clean(child)) is not None:
            children.append(kept)
    if not children:
        return None
    return Tree(strip_label(tree.label), children)


def _unwrap(tree: Tree) -> Tree:
    while (
        tree.label in ("", "TOP", "ROOT") and len(tree.children) == 1 and isinstance(tree.children[0], Tree)
    ):
        tree = tree.children[0]
    return tree


def parse_trees(text: str, where: str = "<text>") -> list[Tree]:
    """All trees in `text` (one per line or spread over lines), cleaned and unwrapped."""
    trees = []
    for raw in _parse(_TOKEN.findall(text), where):
        kept = clean(_unwrap(raw))
        if kept is not None:
            trees.append(kept)
    return trees


def read_treebank(path: Path) -> list[Tree]:
    """Read a bracketed treebank file; errors name the file and the line of the bad tree."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TreeError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    trees: list[Tree] = []
    depth, start, chunk = 0, 1, []
    for number, line in enumerate(text.splitlines(), 1):
        if depth == 0:
            start, chunk = number, []
        chunk.append(line)
        depth += line.count("(") - line.count(")")
        if depth < 0:
            raise TreeError(f"{path}:{number}: ')' without a matching '('")
        if depth == 0 and any(s.strip() for s in chunk):
            trees += parse_trees("\n".join(chunk), f"{path}:{start}")
    if depth:
        raise TreeError(f"{path}:{start}: tree not closed at the end of the file")
    return trees


def linearise(tree: Tree, words: bool = True, tags: bool = True) -> list[str]:
    """Tokens `(X ... )X`; leaves are words (or PLACEHOLDER); preterminals kept if `tags`."""
    if tree.is_preterminal and not tags:
        return [tree.children[0] if words else PLACEHOLDER]  # type: ignore[list-item]
    out = [f"({tree.label}"]
    for child in tree.children:
        if isinstance(child, str):
            out.append(child if words else PLACEHOLDER)
        else:
            out += linearise(child, words, tags)
    out.append(f"){tree.label}")
    return out


def _leaf(word: str, tags: bool) -> Tree | str:
    """Without tags in the tokens, each word gets a PLACEHOLDER preterminal, so that a phrase
    over one word, (NP XX )NP, stays a phrase and is not mistaken for a preterminal."""
    return word if tags else Tree(PLACEHOLDER, [word])


def delinearise(tokens: list[str], words: list[str] | None = None, tags: bool = True) -> Tree:
    """The inverse of `linearise` with the same `tags`; leaves become `words` when given.

    Raises TreeError when the tokens are not one well-formed tree (use `repair` for model output).
    """
    stack: list[Tree] = []
    root: Tree | None = None
    used = 0
    for tok in tokens:
        if root is not None:
            raise TreeError(f"token '{tok}' after the tree was closed")
        if len(tok) > 1 and tok[0] == "(":
            stack.append(Tree(tok[1:]))
        elif len(tok) > 1 and tok[0] == ")":
            if not stack or stack[-1].label != tok[1:]:
                raise TreeError(f"'{tok}' does not close {'(' + stack[-1].label if stack else 'anything'}")
            node = stack.pop()
            if stack:
                stack[-1].children.append(node)
            else:
                root = node
        elif not stack:
            raise TreeError(f"leaf '{tok}' outside any constituent")
        else:
            if words is not None and used >= len(words):
                raise TreeError(f"more leaves than the {len(words)} words")
            stack[-1].children.append(_leaf(words[used] if words is not None else tok, tags))
            used += 1
    if root is None:
        raise TreeError("the tokens do not close a tree")
    if words is not None and used != len(words):
        raise TreeError(f"{used} leaves for {len(words)} words")
    return root


def repair(tokens: list[str], words: list[str], root: str = "S", tags: bool = False) -> Tree:
    """A valid tree over exactly `words` from possibly ill-formed model output.

    Closing tokens close the innermost open constituent whatever their label (extra ones are
    ignored); leaves take the next word (leaves beyond the words are dropped); unclosed
    constituents are closed at the end; words never emitted attach to the top; constituents
    without words are removed; several top-level pieces are joined under `root`.
    """
    top = Tree(root)
    stack = [top]
    used = 0
    for tok in tokens:
        if len(tok) > 1 and tok[0] == "(":
            node = Tree(tok[1:])
            stack[-1].children.append(node)
            stack.append(node)
        elif len(tok) > 1 and tok[0] == ")":
            if len(stack) > 1:
                stack.pop()
        elif used < len(words):
            stack[-1].children.append(_leaf(words[used], tags))
            used += 1
    top.children += [_leaf(w, tags) for w in words[used:]]
    tree = clean(top)  # drops constituents without words
    if tree is None:
        return Tree(root, [_leaf(w, tags) for w in words])
    if len(tree.children) == 1 and isinstance(tree.children[0], Tree):
        return tree.children[0]
    return tree
