"""Load a trained model for decoding: a checkpoint directory or a run directory."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .config import Config
from .data.vocab import Vocab, load_vocab
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
    model = build_model(ck.config.model, int(ck.meta["src_vocab_size"]), int(ck.meta["tgt_vocab_size"]))
    load_weights(model, ck.weights)
    model.to(device or torch.device("cpu")).eval()
    return LoadedModel(model, ck.config, src_vocab, tgt_vocab, ck_path, ck.meta)


def write_model_checkpoint(out: Path, ck: Checkpoint) -> None:
    """Write a decoding-only checkpoint (weights, config, vocabularies) from loaded parts."""
    save_checkpoint(out, ck.weights, ck.config, ck.meta, vocab_files(ck.path))
