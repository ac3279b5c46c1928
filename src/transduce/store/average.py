"""Parameter averaging of checkpoints (the paper averages the last 5 or 20)."""

from __future__ import annotations

from pathlib import Path

import torch

from ..fileio import check_output_dir
from .checkpoint import (
    CHECKPOINTS,
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    step_checkpoints,
    vocab_digest,
)
from .load import write_model_checkpoint
from .meta import Averaged


def last_checkpoints(run_dir: Path, k: int) -> list[Path]:
    """The newest `k` checkpoints of a run (fewer if it has fewer: the caller says so)."""
    if k < 1:
        raise CheckpointError(f"--last {k}: give a number of checkpoints >= 1")
    paths = step_checkpoints(Path(run_dir) / CHECKPOINTS)
    if not paths:
        raise CheckpointError(f"{run_dir}: no checkpoints under {Path(run_dir) / CHECKPOINTS}")
    return paths[-k:]


def average_checkpoints(paths: list[Path]) -> Checkpoint:
    """Mean of the checkpoints' parameters.

    Refuses checkpoints of different architectures or vocabularies (equal shapes with other token
    ids would average unrelated rows). The result's metadata names the averaged checkpoints and
    their steps, takes the newest step and carries no dev metrics (none were measured on it)."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    first = load_checkpoint(paths[0])
    vocab = vocab_digest(paths[0])
    sums = {k: v.to(torch.float64) for k, v in first.weights.items()}
    steps = [first.meta.step]
    for path in paths[1:]:
        ck = load_checkpoint(path)
        if ck.config.model != first.config.model:
            diff = {
                k: (v, getattr(ck.config.model, k))
                for k, v in first.config.model.model_dump().items()
                if getattr(ck.config.model, k) != v
            }
            raise CheckpointError(f"cannot average {paths[0]} and {path}: different architectures {diff}")
        if vocab_digest(path) != vocab:
            raise CheckpointError(f"cannot average {paths[0]} and {path}: their vocabularies differ")
        if ck.weights.keys() != sums.keys() or any(ck.weights[k].shape != sums[k].shape for k in sums):
            raise CheckpointError(f"cannot average {paths[0]} and {path}: parameter names or shapes differ")
        for k, v in ck.weights.items():
            sums[k] += v.to(torch.float64)
        steps.append(ck.meta.step)
    averaged = {k: (v / len(paths)).to(first.weights[k].dtype) for k, v in sums.items()}
    what = [Averaged(checkpoint=Path(p).name, step=s) for p, s in zip(paths, steps, strict=True)]
    meta = first.meta.model_copy(update={"step": max(steps), "metrics": {}, "averaged_from": what})
    return Checkpoint(first.path, first.config, meta, averaged)


def summary(averaged: Checkpoint, out: Path) -> str:
    """One line saying what an average holds and where it went (`average` and the trainer)."""
    steps = ", ".join(str(a.step) for a in averaged.meta.averaged_from)
    return f"averaged {len(averaged.meta.averaged_from)} checkpoints (steps {steps}) into {out}"


def write_average(paths: list[Path], out: Path, force: bool = False) -> Checkpoint:
    """Average `paths` into the checkpoint directory `out` and return the average. `out` is
    checked before anything is loaded (fileio.check_output_dir: only an earlier `average`
    output is replaced without `force`, never one of the inputs)."""
    check_output_dir(out, "average", paths, force)
    averaged = average_checkpoints(paths)
    write_model_checkpoint(out, averaged, "average", tuple(paths), force)
    return averaged
