"""Checkpoints: safetensors weights + JSON, with trainer state in separate files.

A checkpoint is a directory:
  model.safetensors      parameters (no pickle anywhere)
  config.json            the full config, vocabulary sizes, step, metrics, file checksums
  src.* / tgt.*          the vocabularies, so a checkpoint translates on its own
  trainer.safetensors    optimizer tensors and RNG states   (training checkpoints only)
  trainer.json           optimizer scalars, step, data position, counters
It is written to a temporary directory and renamed, so a crash never leaves half of one.

A training run keeps its checkpoints in <run>/checkpoints/ckpt-NNNNNNNN and names its best one in
<run>/best.json (train/run_dir.py holds the rest of a run's layout); the names are here, where
decoding resolves a run directory (store/load.py), below the training that writes them.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor, nn

from ..config import Config, build_config
from ..data.meta import MetaError, read_model
from ..data.vocab import VocabFilesError
from ..data.vocab import vocab_files as data_vocab_files
from ..fileio import atomic_directory, write_safetensors
from .meta import CheckpointMeta

STEP_DIR = re.compile(r"^ckpt-(\d{8})$")
CHECKPOINTS = "checkpoints"  # <run>/checkpoints: a run's step checkpoints
BEST = "best.json"  # <run>/best.json: the step of the best one


def checkpoint_name(step: int) -> str:
    """The directory name of step `step`'s checkpoint (STEP_DIR)."""
    return f"ckpt-{step:08d}"


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated, corrupt or of another architecture."""


def file_sha256(path: Path) -> str:
    """The file's sha256, read in blocks (weights may not fit twice in memory)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def state_tensors(model: nn.Module) -> dict[str, Tensor]:
    """Parameters and persistent buffers; tied weights stored once under their first name."""
    seen: dict[int, str] = {}
    out: dict[str, Tensor] = {}
    for name, tensor in model.state_dict().items():
        key = tensor.data_ptr()
        if key in seen and tensor.numel():
            continue
        seen[key] = name
        out[name] = tensor.detach().contiguous().cpu()
    return out


@dataclass
class Checkpoint:
    """What a loaded checkpoint holds."""

    path: Path
    config: Config
    meta: CheckpointMeta
    weights: dict[str, Tensor]
    trainer: dict[str, Any] | None = None
    trainer_tensors: dict[str, Tensor] = field(default_factory=dict)


def save_checkpoint(
    path: Path,
    weights: dict[str, Tensor],
    config: Config,
    meta: CheckpointMeta,
    vocab_files: list[Path],
    *,
    trainer: dict[str, Any] | None = None,
    trainer_tensors: dict[str, Tensor] | None = None,
    command: str = "train",
    inputs: tuple[Path, ...] = (),
    force: bool = False,
) -> None:
    """Write a checkpoint directory atomically; an existing `path` is replaced only if `command`
    wrote it (or `force`), and never where it overlaps an input. A write the system refuses (a
    full disk) is a fileio.WriteError naming `path`, which is left as it was."""
    with atomic_directory(path, command, inputs, force) as tmp:
        write_safetensors(tmp / "model.safetensors", {k: v.contiguous() for k, v in weights.items()})
        for f in vocab_files:
            shutil.copyfile(f, tmp / f.name)
        files = ["model.safetensors"]
        if trainer is not None:
            write_safetensors(tmp / "trainer.safetensors", trainer_tensors or {})
            (tmp / "trainer.json").write_text(json.dumps(trainer), encoding="utf-8")
            files += ["trainer.safetensors", "trainer.json"]
        full = meta.model_copy(
            update={
                "config": config.model_dump(mode="json"),
                "checksums": {name: file_sha256(tmp / name) for name in files},
            }
        )
        (tmp / "config.json").write_text(full.model_dump_json(indent=2), encoding="utf-8")


def _regular(file: Path) -> None:
    """Refuse a link or device where a checkpoint keeps a file: a link could take it from another
    checkpoint or from outside, which its checksums and config do not describe."""
    if file.is_symlink() or (file.exists() and not file.is_file()):
        raise CheckpointError(f"{file}: not a regular file (links and devices are refused)")


def read_meta(path: Path) -> CheckpointMeta:
    """A checkpoint's config.json (config, data facts, checksums), validated, without the weights."""
    config_file = Path(path) / "config.json"
    _regular(config_file)
    if not config_file.exists():
        raise CheckpointError(f"{path}: not a checkpoint (no config.json)")
    try:
        meta = read_model(config_file, CheckpointMeta)
    except MetaError as exc:
        raise CheckpointError(foreign_model(Path(path)) or str(exc)) from None
    if not meta.config:
        raise CheckpointError(f"{config_file}: invalid metadata: no 'config' section")
    return meta


IMPORTS = {"marian": "import marian", "m2m_100": "import m2m100"}  # model_type -> the command
EXPORT_INFO = "transduce.json"  # beside a CTranslate2 export's files: where it came from, how to tokenise


def foreign_model(path: Path) -> str | None:
    """What another toolkit's model directory is, and what to do with it, where its config.json
    is taken for a checkpoint's: a CTranslate2 model (an export whose transduce.json is gone) or a
    Hugging Face model (its config.json names a model_type); None for anything else."""
    record, config = path / EXPORT_INFO, path / "config.json"
    if (path / "model.bin").is_file() and record.is_file():
        return f"{path}: a CTranslate2 export (`transduce export`), not a checkpoint; give the checkpoint"
    if (path / "model.bin").is_file() and (record.exists() or record.is_symlink()):
        return f"{record}: not a regular file (a directory, pipe or device); export the checkpoint again"
    if (path / "model.bin").is_file():
        return (
            f"{path}: a CTranslate2 model directory without transduce.json (the record `transduce export` "
            "writes beside model.bin): not an export of a transduce checkpoint, or its record is gone; "
            "export the checkpoint again"
        )
    if not config.is_file():  # a pipe would block reading
        return None
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kind = data.get("model_type") if isinstance(data, dict) else None
    if not isinstance(kind, str):
        return None
    how = f"; convert it with `transduce {IMPORTS[kind]} {path} -o DIR`" if kind in IMPORTS else ""
    return f"{path}: a Hugging Face model directory (model_type {kind!r}), not a transduce checkpoint{how}"


TRAINER_KEYS = {"optimizer", "sampler", "state"}  # what resuming reads from trainer.json


def verify_files(path: Path, meta: CheckpointMeta, names: list[str]) -> None:
    """CheckpointError naming the first of the checkpoint's files `names` that is missing, not a
    regular file, or not what config.json's checksum says; links and devices among the
    vocabularies are refused too."""
    for name in names:
        file = path / name
        if not file.exists():
            raise CheckpointError(f"{file}: missing from the checkpoint")
        _regular(file)
        expected = meta.checksums.get(name)
        if expected is None:
            raise CheckpointError(
                f"{file}: no checksum in {path / 'config.json'}; the checkpoint is incomplete"
            )
        if file_sha256(file) != expected:
            raise CheckpointError(f"{file}: corrupt or truncated (checksum mismatch)")
    vocab_files(path)


def load_checkpoint(path: Path, with_trainer: bool = False) -> Checkpoint:
    """Load and verify a checkpoint; any damage raises CheckpointError naming the file."""
    path = Path(path)
    meta = read_meta(path)
    try:
        config = build_config(meta.config)
    except ValueError as exc:
        raise CheckpointError(f"{path / 'config.json'}: unreadable checkpoint metadata: {exc}") from None
    names = ["model.safetensors"] + (["trainer.safetensors", "trainer.json"] if with_trainer else [])
    verify_files(path, meta, names)
    try:
        weights = load_file(str(path / "model.safetensors"))
        trainer, tensors = None, {}
        if with_trainer:
            tensors = load_file(str(path / "trainer.safetensors"))
            trainer = json.loads((path / "trainer.json").read_text(encoding="utf-8"))
    except (SafetensorError, ValueError, OSError) as exc:
        raise CheckpointError(f"{path}: cannot read checkpoint: {exc}") from None
    if with_trainer and not (isinstance(trainer, dict) and trainer.keys() >= TRAINER_KEYS):
        raise CheckpointError(f"{path / 'trainer.json'}: damaged (needs {', '.join(sorted(TRAINER_KEYS))})")
    return Checkpoint(path, config, meta, weights, trainer, tensors)


def load_weights(model: nn.Module, weights: dict[str, Tensor]) -> None:
    """Load weights saved by `save_checkpoint` (tied tensors stored once)."""
    try:
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except RuntimeError as exc:  # shapes that differ from the architecture in config.json
        first = next((line.strip() for line in str(exc).splitlines() if "size mismatch" in line), str(exc))
        raise CheckpointError(f"weights do not fit the model of config.json: {first}") from None
    tied = {name for name in missing if _is_tied(model, name, weights)}
    really_missing = [m for m in missing if m not in tied]
    if really_missing or unexpected:
        raise CheckpointError(
            f"weights do not fit the model: missing {really_missing[:5]}, unexpected {list(unexpected)[:5]}"
        )


def _is_tied(model: nn.Module, name: str, weights: dict[str, Tensor]) -> bool:
    state = model.state_dict()
    ptr = state[name].data_ptr()
    return any(state[other].data_ptr() == ptr for other in weights if other in state and other != name)


def step_checkpoints(directory: Path) -> list[Path]:
    """Checkpoint directories `ckpt-NNNNNNNN` under `directory`, oldest first."""
    if not directory.exists():
        return []
    return sorted(p for p in directory.iterdir() if p.is_dir() and STEP_DIR.match(p.name))


def vocab_files(directory: Path) -> list[Path]:
    """data.vocab.vocab_files, failing with CheckpointError (links and devices are refused)."""
    try:
        return data_vocab_files(directory)
    except VocabFilesError as exc:
        raise CheckpointError(str(exc)) from None


def vocab_digest(directory: Path) -> str:
    """One hash over a directory's vocabulary files: equal digests mean equal token ids."""
    h = hashlib.sha256()
    for path in vocab_files(directory):
        h.update(path.name.encode())
        h.update(file_sha256(path).encode())
    return h.hexdigest()
