"""Load a trained model for decoding: a checkpoint directory or a run directory."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .config import Config
from .data.source import (
    SourceAnnotation,
    SourceFormat,
    check_tree_words,
    encode_source,
    read_word_trees,
    split_line,
)
from .data.vocab import SymbolVocab, Vocab, load_vocab
from .model import build_model
from .train.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    load_weights,
    save_checkpoint,
    step_checkpoints,
    vocab_files,
)


@dataclass
class LoadedModel:
    model: nn.Module
    config: Config
    src_vocab: Vocab
    tgt_vocab: Vocab
    path: Path
    meta: dict
    factor_vocabs: list[Vocab]


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint directory as given, or a run directory's best (else newest) checkpoint."""
    path = Path(path)
    if (path / "config.json").exists():
        return path
    steps = step_checkpoints(path / "checkpoints")
    if not steps:
        raise CheckpointError(f"{path}: neither a checkpoint nor a run directory with checkpoints")
    best = path / "best.json"
    if best.exists():
        candidate = path / "checkpoints" / f"ckpt-{json.loads(best.read_text())['step']:08d}"
        if candidate.exists():
            return candidate
    return steps[-1]


def load_model(path: Path, device: torch.device | None = None) -> LoadedModel:
    ck_path = resolve_checkpoint(path)
    ck = load_checkpoint(ck_path)
    src_vocab = load_vocab(ck_path / "src")
    tgt_vocab = src_vocab if ck.meta.get("shared_vocab", True) else load_vocab(ck_path / "tgt")
    factor_sizes = [int(n) for n in ck.meta.get("factor_vocab_sizes") or []]
    model = build_model(
        ck.config.model, int(ck.meta["src_vocab_size"]), int(ck.meta["tgt_vocab_size"]), 0, factor_sizes
    )
    load_weights(model, ck.weights)
    model.to(device or torch.device("cpu")).eval()
    factor_vocabs = [load_vocab(ck_path / f"src.factor{k}") for k in range(len(factor_sizes))]
    return LoadedModel(model, ck.config, src_vocab, tgt_vocab, ck_path, ck.meta, factor_vocabs)


def write_model_checkpoint(
    out: Path, ck: Checkpoint, command: str, inputs: tuple[Path, ...] = (), force: bool = False
) -> None:
    """Write a decoding-only checkpoint (weights, config, vocabularies) from loaded parts."""
    save_checkpoint(
        out, ck.weights, ck.config, ck.meta, vocab_files(ck.path), command=command, inputs=inputs, force=force
    )


def encode_inputs(
    loaded: LoadedModel, lines: list[str], trees: Path | None = None
) -> tuple[list[list[int]], list[SourceAnnotation] | None]:
    """Source ids (empty for empty lines) in the model's input format, with annotations for
    factored or syntax-aware models; `trees` holds one syntax tree per non-empty line."""
    fmt = SourceFormat(**loaded.meta["source"]) if loaded.meta.get("source") else SourceFormat()
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
