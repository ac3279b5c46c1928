"""Everything training needs, built from the config in one place: the data, the model (wrapped
for DDP), Adam, the learning-rate schedule, the batch sampler, the validation metrics of the
data's kind and the throughput accounting. The trainer only runs the loop over these parts."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from ..config import Config, ConfigError, check_positions
from ..data.batching import BatchSampler, padded_lengths
from ..data.dataset import Dataset, DatasetError, prepare_task
from ..data.vocab import PAD
from ..fileio import OutputError, enclosing_output, within
from ..model import build_model
from .log import Throughput
from .schedule import inverse_sqrt_lr
from .validation import METRICS, Metrics, Predict


@dataclass
class Distributed:
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


def setup_distributed() -> Distributed:
    """Join the process group torchrun describes (gloo on CPU, NCCL on GPUs)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return Distributed(int(os.environ.get("RANK", "0")), world)


def run_directory(config: str, given: Path | None, resume: bool, dataset: str | None = None) -> Path:
    """Where a run's checkpoints and logs go: `given`, else runs/<config name>. Starting afresh
    (not `resume`) where checkpoints already are is an OutputError: they would be mixed. So is a
    run directory in the `dataset` or in any other command's output (a dataset, a checkpoint):
    the run would write among its files, and writing that output again would delete the run."""
    run = given or Path("runs") / Path(config).stem
    if dataset is not None and within(run, Path(dataset)):
        raise OutputError(
            f"{run} is or lies inside the dataset {dataset}; give --run-dir a folder outside it"
        )
    inside = enclosing_output(run)
    if inside is not None:
        raise OutputError(
            f"{run} is or lies inside {inside[0]}, which `transduce {inside[1]}` wrote; "
            "give --run-dir a folder outside it"
        )
    for folder in (run, run / "checkpoints"):
        if folder.exists() and not folder.is_dir():
            raise OutputError(f"{folder} is not a directory; give --run-dir a folder")
    if not resume and (run / "checkpoints").exists() and any((run / "checkpoints").iterdir()):
        raise OutputError(f"{run} already holds checkpoints; use --resume or another --run-dir")
    return run


def load_data(cfg: Config, run_dir: Path, env: Distributed) -> Dataset:
    """A prepared dataset directory, or the generated task written under the run directory."""
    if cfg.data.task is not None:
        if env.main:
            prepare_task(cfg.data, run_dir / "data")
        env.barrier()
        return Dataset(run_dir / "data")
    if cfg.data.dataset is not None:
        return Dataset(Path(cfg.data.dataset))
    raise ConfigError("set data.dataset (a directory from `transduce prepare`) or data.task")


@dataclass
class Parts:
    """What the training loop works on."""

    data: Dataset
    model: nn.Module
    net: nn.Module  # the model, or its DistributedDataParallel wrapper
    optimizer: torch.optim.Optimizer
    schedule: Callable[[int], float]  # step (from 1) -> learning rate
    sampler: BatchSampler
    metrics: Callable[[Dataset, Predict], Metrics]
    throughput: Throughput
    device: torch.device


def training_device(env: Distributed) -> torch.device:
    """This rank's GPU when there are GPUs, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", env.rank % torch.cuda.device_count())
    return torch.device("cpu")


def check_data(data: Dataset, cfg: Config) -> None:
    """Refuse data the run would fail on later: empty splits, sequences past learned positions,
    a syntax-aware model without source trees."""
    for name in ("train", "dev"):
        if len(data.splits.get(name, ())) == 0:
            raise DatasetError(f"{data.dir}: the {name} split is empty; prepare the dataset again")
    if cfg.model.syntax_mask != "none" and data.splits["train"].omega is None:
        raise ConfigError(
            f"model.syntax_mask='{cfg.model.syntax_mask}' masks attention with source trees, but "
            f"{data.dir} has none; prepare it with --source-trees tree|conllu or set model.syntax_mask=none"
        )
    longest = max(int(padded_lengths(split).max()) for split in data.splits.values() if len(split))
    check_positions(cfg.model, longest, str(data.dir))


def build_parts(cfg: Config, run_dir: Path, env: Distributed) -> Parts:
    """Read the config once and build the training parts (seeded by `train.seed`)."""
    if cfg.model.kind != "encoder_decoder":
        raise ConfigError(
            f"model.kind='{cfg.model.kind}': training encoder-only and decoder-only models is not "
            "available yet; allowed: encoder_decoder"
        )
    t = cfg.train
    if t.threads is not None:
        torch.set_num_threads(t.threads)
    torch.manual_seed(t.seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    data = load_data(cfg, run_dir, env)
    check_data(data, cfg)
    device = training_device(env)
    try:
        model = build_model(
            cfg.model, len(data.src_vocab), len(data.tgt_vocab), PAD, [len(v) for v in data.factor_vocabs]
        )
    except ValueError as exc:  # settings that do not fit the data, e.g. tying separate vocabularies
        raise ConfigError(str(exc)) from None
    model.to(device)
    net = nn.parallel.DistributedDataParallel(model) if env.world > 1 else model
    optimizer = torch.optim.Adam(
        model.parameters(), lr=0.0, betas=t.adam_betas, eps=t.adam_eps, weight_decay=t.weight_decay
    )
    train = data.splits["train"]
    sampler = BatchSampler(
        padded_lengths(train),
        cfg.data.max_tokens,
        cfg.data.seed,
        env.rank,
        env.world,
        accumulate=t.accumulate,
    )
    return Parts(
        data=data,
        model=model,
        net=net,
        optimizer=optimizer,
        schedule=partial(inverse_sqrt_lr, d_model=cfg.model.d_model, warmup=t.warmup, scale=t.lr_scale),
        sampler=sampler,
        metrics=METRICS[data.meta.data_kind],
        throughput=Throughput.for_training(cfg.model, train, len(data.tgt_vocab), device, t.precision),
        device=device,
    )
