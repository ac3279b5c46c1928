"""Tree distances omega(i, j) between the words of a sentence, and their subword expansion.

omega is the number of edges on the path between two words: in a dependency tree, the arcs
between them; in a constituency tree, the path between the two leaves (word -> its POS node ->
... -> common ancestor -> ... -> the other word), so two words under one preterminal pair are
4 apart and a word is 0 from itself. Subwords of one word share its distances (0 among
themselves). Computed from depths and lowest common ancestors, without a search per word.

Dependency trees come from CoNLL-U files (column 7, HEAD; comment lines, multiword-token
ranges 1-2 and empty nodes 1.1 are skipped).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .trees import Tree, TreeError

UNRELATED = 1000  # distance given to pairs with the end-of-sentence token


def distances(parents: list[int], nodes: list[int]) -> np.ndarray:
    """Path lengths between `nodes` of a forest given each node's parent (-1 for a root).

    Nodes in different trees of a forest are UNRELATED apart.
    """
    size = len(parents)
    depth = np.full(size, -1, dtype=np.int64)
    ancestors = np.zeros((size, size), dtype=bool)  # ancestors[i, a]: a is i or above i
    for start in range(size):
        chain, node = [], start
        while node != -1 and depth[node] < 0:
            if len(chain) > size:
                raise TreeError(f"the parent links contain a cycle through node {start}")
            chain.append(node)
            node = parents[node]
        base = depth[node] if node != -1 else -1
        for offset, n in enumerate(reversed(chain)):
            depth[n] = base + 1 + offset
            ancestors[n] = ancestors[node] if node != -1 else False
            ancestors[n, n] = True
            node = n
    sel = np.asarray(nodes, dtype=np.int64)
    anc = ancestors[sel]  # (n, size)
    common = anc[:, None, :] & anc[None, :, :]  # (n, n, size)
    lca_depth = np.where(common, depth[None, None, :], -1).max(-1)
    d = depth[sel]
    omega = d[:, None] + d[None, :] - 2 * lca_depth
    return np.where(lca_depth < 0, UNRELATED, omega)


def constituency_omega(tree: Tree) -> np.ndarray:
    """(words, words) leaf-to-leaf path lengths of a constituency tree."""
    parents: list[int] = []
    leaves: list[int] = []

    def walk(node: Tree, parent: int) -> None:
        me = len(parents)
        parents.append(parent)
        for child in node.children:
            if isinstance(child, str):
                leaves.append(len(parents))
                parents.append(me)
            else:
                walk(child, me)

    walk(tree, -1)
    return distances(parents, leaves)


def dependency_omega(heads: list[int]) -> np.ndarray:
    """(words, words) arc counts from 1-based heads (0 = the root), as in CoNLL-U."""
    for i, h in enumerate(heads, 1):
        if not 0 <= h <= len(heads) or h == i:
            raise TreeError(f"word {i}: head {h} is not 0..{len(heads)} or points to itself")
    return distances([h - 1 for h in heads], list(range(len(heads))))


def read_conllu(path: Path) -> list[tuple[list[str], list[int]]]:
    """(words, heads) per sentence; errors name the file and line."""
    sentences: list[tuple[list[str], list[int]]] = []
    words: list[str] = []
    heads: list[int] = []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate([*lines, ""], 1):
        if not line.strip():
            if words:
                sentences.append((words, heads))
            words, heads = [], []
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise TreeError(f"{path}:{number}: expected 10 tab-separated CoNLL-U columns, found {len(cols)}")
        if "-" in cols[0] or "." in cols[0]:
            continue
        try:
            heads.append(int(cols[6]))
        except ValueError:
            raise TreeError(f"{path}:{number}: HEAD '{cols[6]}' is not an integer") from None
        words.append(cols[1])
    return sentences


def expand_to_pieces(omega: np.ndarray, word_of_piece: list[int] | np.ndarray) -> np.ndarray:
    """Word-level distances -> subword level: pieces inherit their word's distances."""
    index = np.asarray(word_of_piece, dtype=np.int64)
    return omega[index[:, None], index[None, :]]


def with_eos(omega: np.ndarray) -> np.ndarray:
    """Append the end-of-sentence token: 0 from itself, UNRELATED to every word."""
    n = omega.shape[0]
    out = np.full((n + 1, n + 1), UNRELATED, dtype=np.int64)
    out[:n, :n] = omega
    out[n, n] = 0
    return out
