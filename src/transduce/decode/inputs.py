"""Input lines -> source ids in the model's input format (text, trees, factors, syntax)."""

from __future__ import annotations

from pathlib import Path

from ..data.source import (
    SourceAnnotation,
    check_tree_words,
    encode_source,
    read_word_trees,
    split_line,
)
from ..data.vocab import SymbolVocab
from ..store.load import LoadedModel


def encode_inputs(
    loaded: LoadedModel, lines: list[str], trees: Path | None = None
) -> tuple[list[list[int]], list[SourceAnnotation] | None]:
    """Source ids (empty for empty lines) in the model's input format, with annotations for
    factored or syntax-aware models; `trees` holds one syntax tree per non-empty line."""
    fmt = loaded.meta.source
    if trees is not None and fmt.trees is None:  # it would be ignored, whether it exists or not
        raise ValueError(f"--src-trees {trees}: this model takes no source trees; leave the option out")
    if fmt.format == "text" and not fmt.by_word:
        return [loaded.src_vocab.encode(line) if line.strip() else [] for line in lines], None
    if fmt.trees is not None and trees is None:
        raise ValueError(f"this model reads source syntax trees: give a .{fmt.trees} file (--src-trees)")
    word_trees = read_word_trees(trees, fmt.trees) if fmt.trees is not None and trees is not None else []
    tag_vocabs = [v for v in loaded.factor_vocabs if isinstance(v, SymbolVocab)]
    sources: list[list[int]] = []
    annotations: list[SourceAnnotation] = []
    used = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            sources.append([])
            annotations.append(SourceAnnotation())
            continue
        words, tags = split_line(line, fmt, f"input line {number}")
        omega = None
        if fmt.trees is not None:
            if used >= len(word_trees):
                raise ValueError(f"{trees}: {len(word_trees)} trees for more non-empty input lines")
            tree_words, omega = word_trees[used]
            check_tree_words(words, tree_words, f"{trees}: tree {used + 1}")
            used += 1
        if fmt.by_word:
            ids, ann = encode_source(loaded.src_vocab, words, tags, tag_vocabs, omega)
        else:
            ids, ann = loaded.src_vocab.encode(" ".join(words)), SourceAnnotation()
        sources.append(ids)
        annotations.append(ann)
    return sources, annotations
