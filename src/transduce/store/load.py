"""Load a trained model for decoding from a checkpoint or run directory; resolve what a user
names (preset, config file or checkpoint) into a config and vocabulary sizes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from pydantic import BaseModel, Field, ValidationError
from torch import nn

from ..choices import MAX_THREADS, QUANTIZE
from ..config import Config, build_config, load_config
from ..data.dataset import Dataset
from ..data.vocab import Vocab, load_vocab, vocab_exists
from ..data.vocab_size import PAPER_SIZE
from ..model import build_model
from .checkpoint import (
    BEST,
    CHECKPOINTS,
    Checkpoint,
    CheckpointError,
    checkpoint_name,
    load_checkpoint,
    load_weights,
    read_meta,
    save_checkpoint,
    step_checkpoints,
    verify_files,
    vocab_files,
)
from .meta import CheckpointMeta


@dataclass
class LoadedModel:
    """A checkpoint's model, config, vocabularies and metadata, and the engine that decodes it:
    set when it is opened for decoding (decode/engines.py: `open_model`, by the engine's name);
    None for a model loaded for its weights (`load_model`), which decodes with the torch engine.
    An engine other than ours holds its own copy of the weights: `model` is then built on the
    meta device (shapes only: it says what kind of model this is, and cannot compute)."""

    model: nn.Module
    config: Config
    src_vocab: Vocab
    tgt_vocab: Vocab
    path: Path
    meta: CheckpointMeta
    factor_vocabs: list[Vocab]
    engine: object | None = None  # a decode.engine.Engine (typed there: the store sits below decode)


class Best(BaseModel):
    """A run directory's best.json: the step of the checkpoint with the best dev score."""

    step: int = Field(ge=0)


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint directory as given, or a run directory's best (else, with no best.json, its
    newest) checkpoint. A best.json naming a checkpoint that is gone is refused, not replaced by
    the newest: that would decode with another model than the one the run chose."""
    path = Path(path)
    if (path / "config.json").exists():
        return path
    steps = step_checkpoints(path / CHECKPOINTS)
    if not steps:
        raise CheckpointError(f"{path}: neither a checkpoint nor a run directory with checkpoints")
    best = path / BEST
    if best.exists():
        try:
            step = Best.model_validate_json(best.read_text(encoding="utf-8")).step
        except (ValidationError, OSError) as exc:
            raise CheckpointError(
                f"{best}: unreadable ({type(exc).__name__}); delete it to use the newest"
            ) from None
        candidate = path / CHECKPOINTS / checkpoint_name(step)
        if not candidate.exists():
            raise CheckpointError(
                f"{best}: names step {step}, but {candidate} is missing; give a checkpoint directory "
                f"(the newest is {steps[-1]}), or delete best.json to use the newest"
            )
        return candidate
    return steps[-1]


def _vocab(prefix: Path) -> Vocab:
    """A checkpoint's vocabulary; a missing or damaged one is a CheckpointError naming it."""
    try:
        return load_vocab(prefix)
    except (OSError, ValueError, RuntimeError, TypeError, KeyError) as exc:
        raise CheckpointError(f"{prefix}.*: vocabulary missing or damaged ({exc})") from None


def _vocabularies(folder: Path, meta: CheckpointMeta) -> tuple[Vocab, Vocab, list[Vocab]]:
    """The source, target and factor vocabularies saved in `folder` (a checkpoint, or an export
    that carries them), each of the size `meta` records."""
    src_vocab = _vocab(folder / "src")
    tgt_vocab = _vocab(folder / "tgt") if vocab_exists(folder / "tgt") else src_vocab
    for side, vocab, size in (
        ("src", src_vocab, meta.src_vocab_size),
        ("tgt", tgt_vocab, meta.tgt_vocab_size),
    ):
        if len(vocab) != size:
            raise CheckpointError(
                f"{folder}: the {side} vocabulary has {len(vocab)} entries, the model {size}"
            )
    factor_vocabs = [_vocab(folder / f"src.factor{k}") for k in range(len(meta.factor_vocab_sizes))]
    return src_vocab, tgt_vocab, factor_vocabs


def _build(config: Config, meta: CheckpointMeta) -> nn.Module:
    return build_model(config.model, meta.src_vocab_size, meta.tgt_vocab_size, 0, meta.factor_vocab_sizes)


def load_model(path: Path, device: torch.device | None = None) -> LoadedModel:
    ck_path = resolve_checkpoint(path)
    ck = load_checkpoint(ck_path)
    src_vocab, tgt_vocab, factor_vocabs = _vocabularies(ck_path, ck.meta)
    model = _build(ck.config, ck.meta)
    load_weights(model, ck.weights)
    model.to(device or torch.device("cpu")).eval()
    return LoadedModel(
        model, ck.config, src_vocab, tgt_vocab, path=ck_path, meta=ck.meta, factor_vocabs=factor_vocabs
    )


def reader_from(folder: Path, meta: CheckpointMeta) -> LoadedModel:
    """What reads a model's inputs and renders its outputs, for an engine that runs an export of
    its weights: config, vocabularies (saved in `folder`) and metadata, with the model built on
    the meta device (shapes only: it says what kind of model this is, and cannot compute).
    Sampling's and the torch engine's own settings (static_cache) are not carried over."""
    try:
        config = build_config(meta.config)
    except ValueError as exc:
        raise CheckpointError(f"{folder}: unreadable checkpoint metadata: {exc}") from None
    config = config.model_copy(update={"decode": config.decode.model_copy(update={"static_cache": False})})
    src_vocab, tgt_vocab, factor_vocabs = _vocabularies(folder, meta)
    with torch.device("meta"):
        model = _build(config, meta).eval()
    return LoadedModel(
        model, config, src_vocab, tgt_vocab, path=folder, meta=meta, factor_vocabs=factor_vocabs
    )


def load_reader(path: Path) -> LoadedModel:
    """`reader_from` a checkpoint or run directory, its weights verified against the checksum
    in config.json (an export of them is keyed by it) but not loaded."""
    ck_path = resolve_checkpoint(path)
    meta = read_meta(ck_path)
    verify_files(ck_path, meta, ["model.safetensors"])
    return reader_from(ck_path, meta)


def load_for_decoding(
    path: Path, quantize: str = "none", threads: int | None = None, device: str = "auto"
) -> LoadedModel:
    """`load_model` on `device` (`choose_device`: CUDA when present), then, on the CPU, int8
    quantisation or (float32) weights pre-packed for the CPU kernels; on the CPU a copy of the
    model is made either way, the loaded weights stay untouched. On CUDA the model is used as
    loaded (int8 is refused there: its kernels are the CPU's).
    `threads`: PyTorch's CPU threads for this process (default: its own choice). On the CPU the
    process also keeps freed memory for reuse (`retain_freed_memory`): decoding frees and
    reallocates the same large buffers at every step."""
    from ..cpu_memory import retain_freed_memory
    from ..device import choose_device
    from ..model.packed import pack_for_cpu
    from ..model.quantize import quantize_int8

    if threads is not None:
        if threads < 1:
            raise ValueError(f"--threads must be a positive integer, not {threads}")
        if threads > MAX_THREADS:
            raise ValueError(f"--threads {threads}: at most {MAX_THREADS}")
        torch.set_num_threads(threads)
    if quantize not in QUANTIZE:
        raise ValueError(f"--quantize {quantize!r}: allowed: {', '.join(QUANTIZE)}")
    on = choose_device(device, cpu_only=quantize == "int8")
    loaded = load_model(path, on)
    if on.type == "cpu":
        retain_freed_memory()
        loaded.model = quantize_int8(loaded.model) if quantize == "int8" else pack_for_cpu(loaded.model)
    return loaded


def write_model_checkpoint(
    out: Path, ck: Checkpoint, command: str, inputs: tuple[Path, ...] = (), force: bool = False
) -> None:
    """Write a decoding-only checkpoint (weights, config, vocabularies) from loaded parts."""
    save_checkpoint(
        out, ck.weights, ck.config, ck.meta, vocab_files(ck.path), command=command, inputs=inputs, force=force
    )


VOCAB_MAX = 10_000_000  # far beyond any subword vocabulary; bounds what `inspect` builds


def vocab_source(path: Path) -> Path:
    """The directory whose vocabulary files another dataset should reuse: a checkpoint (or a run
    directory's best checkpoint), or a prepared dataset."""
    path = Path(path)
    if (path / "config.json").exists() or (path / CHECKPOINTS).is_dir():
        return resolve_checkpoint(path)
    if vocab_exists(path / "src"):
        return path
    raise CheckpointError(f"{path}: neither a checkpoint, a run directory nor a dataset with a vocabulary")


def config_from(source: str, overrides: list[str]) -> Config:
    """The config a user names: a checkpoint or run directory's own, or a preset or file; with
    the overrides applied."""
    path = Path(source)
    if (path / "config.json").is_file() or (path / CHECKPOINTS).is_dir():
        return build_config(read_meta(resolve_checkpoint(path)).config, overrides)
    return load_config(source, overrides)  # any other directory: refused there


def resolve_model_source(
    source: str, overrides: list[str], src_vocab: int | None, tgt_vocab: int | None
) -> tuple[Config, int, int]:
    """The config and vocabulary sizes `inspect` accounts for: a checkpoint directory's own; else
    the preset or file's, with the sizes of its data.dataset (what training would build) or
    those given (source 37,000 by default, target the source's)."""
    path = Path(source)
    if path.is_dir():
        meta = read_meta(resolve_checkpoint(path))
        return build_config(meta.config, overrides), meta.src_vocab_size, meta.tgt_vocab_size
    cfg = load_config(source, overrides)
    if cfg.data.dataset is not None:
        return cfg, *_dataset_vocab_sizes(cfg.data.dataset, src_vocab, tgt_vocab)
    src = src_vocab if src_vocab is not None else PAPER_SIZE
    tgt = tgt_vocab if tgt_vocab is not None else src
    for option, size in (("--src-vocab", src), ("--tgt-vocab", tgt)):
        if not 1 <= size <= VOCAB_MAX:
            raise ValueError(f"{option} must be 1..{VOCAB_MAX}, not {size}")
    return cfg, src, tgt


def _dataset_vocab_sizes(dataset: str, src_vocab: int | None, tgt_vocab: int | None) -> tuple[int, int]:
    """A prepared dataset's source and target vocabulary sizes; sizes given beside it would
    describe another model than the one trained on it, so they are refused."""
    if src_vocab is not None or tgt_vocab is not None:
        raise ValueError(
            f"data.dataset={dataset} gives the vocabulary sizes; leave out --src-vocab and --tgt-vocab"
        )
    data = Dataset(Path(dataset))
    return len(data.src_vocab), len(data.tgt_vocab)
