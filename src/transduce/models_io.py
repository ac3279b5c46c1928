"""Resolve what a user names on the command line into a config and vocabulary sizes."""

from __future__ import annotations

from pathlib import Path

from .config import Config, build_config, load_config
from .train.checkpoint import read_meta


def resolve_model_source(
    source: str, overrides: list[str], src_vocab: int, tgt_vocab: int | None
) -> tuple[Config, int, int]:
    """A checkpoint directory gives its own config and vocabulary sizes; else preset/file."""
    path = Path(source)
    if path.is_dir():
        meta = read_meta(path)
        cfg = build_config(meta["config"], overrides)
        return cfg, int(meta["src_vocab_size"]), int(meta["tgt_vocab_size"])
    cfg = load_config(source, overrides)
    return cfg, src_vocab, tgt_vocab if tgt_vocab is not None else src_vocab
