"""Parameter averaging of checkpoints (the paper averages the last 5 or 20)."""

from __future__ import annotations

from pathlib import Path

import torch

from .checkpoint import Checkpoint, CheckpointError, load_checkpoint, step_checkpoints


def last_checkpoints(run_dir: Path, k: int) -> list[Path]:
    paths = step_checkpoints(Path(run_dir) / "checkpoints")
    if not paths:
        raise CheckpointError(f"{run_dir}: no checkpoints under {run_dir}/checkpoints")
    return paths[-k:]


def average_checkpoints(paths: list[Path]) -> Checkpoint:
    """Mean of the checkpoints' parameters; refuses checkpoints of different architectures."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    first = load_checkpoint(paths[0])
    sums = {k: v.to(torch.float64) for k, v in first.weights.items()}
    for path in paths[1:]:
        ck = load_checkpoint(path)
        if ck.config.model != first.config.model:
            diff = {
                k: (v, getattr(ck.config.model, k))
                for k, v in first.config.model.model_dump().items()
                if getattr(ck.config.model, k) != v
            }
            raise CheckpointError(f"cannot average {paths[0]} and {path}: different architectures {diff}")
        if ck.weights.keys() != sums.keys() or any(ck.weights[k].shape != sums[k].shape for k in sums):
            raise CheckpointError(f"cannot average {paths[0]} and {path}: parameter names or shapes differ")
        for k, v in ck.weights.items():
            sums[k] += v.to(torch.float64)
    averaged = {k: (v / len(paths)).to(first.weights[k].dtype) for k, v in sums.items()}
    meta = {**first.meta, "averaged_from": [str(p) for p in paths]}
    return Checkpoint(first.path, first.config, meta, averaged)
