"""Everything training needs, built from the config in one place: the data, the model (wrapped
for DDP), the objective of its kind, Adam, the learning-rate schedule, the batch sampler, the
validation of the data's kind and the throughput accounting. The trainer only runs the
loop over these parts."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from ..config import Config, ConfigError, ModelConfig, check_positions
from ..data.batching import BatchSampler, round_up
from ..data.dataset import Dataset, DatasetError, Split, prepare_task
from ..data.kinds import data_kind
from ..data.mixing import PairMixing, check_temperature
from ..data.vocab import FIRST_SYMBOL, PAD
from ..model import build_model
from ..model.kinds import assembly_for
from ..model.universal import UniversalStack
from .log import Throughput
from .master import MasterWeights
from .objective import Objective, objective_for
from .run_dir import RunLayout
from .schedule import InverseSqrt
from .validation import Validator, check_best_metric, check_best_pair


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

    def agree(self, flag: bool, device: torch.device) -> bool:
        """True when any rank says so, so that all ranks stop or validate together (their clocks
        differ)."""
        if self.world == 1:
            return flag
        value = torch.tensor([float(flag)], device=device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def close(self) -> None:
        """Leave the process group while the interpreter is whole. Left to the process's exit,
        gloo's threads free tensors after Python has gone, and a rank can hang there or abort
        (seen on the guest of two nodes whose host had finished)."""
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()

    def lost_peer(self, exc: BaseException) -> bool:
        """Whether `exc` is the process group failing (another process died, or its machine, or
        the network between them): gloo raises a RuntimeError naming its transport, NCCL and the
        rendezvous store raise torch.distributed's own errors."""
        if self.world == 1:
            return False
        return isinstance(exc, dist.DistError) or (isinstance(exc, RuntimeError) and "gloo" in str(exc))


def setup_distributed() -> Distributed:
    """Join the process group torchrun describes (gloo on CPU, NCCL on GPUs)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return Distributed(int(os.environ.get("RANK", "0")), world)


def load_data(cfg: Config, run_dir: Path, env: Distributed) -> Dataset:
    """A prepared dataset directory, or the generated task written under the run directory."""
    if cfg.data.task is not None:
        generated = RunLayout(run_dir).data
        if env.main:
            prepare_task(cfg.data, generated)
        env.barrier()
        return Dataset(generated)
    if cfg.data.dataset is not None:
        return Dataset(Path(cfg.data.dataset))
    raise ConfigError("set data.dataset (a directory from `transduce prepare`) or data.task")


@dataclass
class Parts:
    """What the training loop works on."""

    data: Dataset
    model: nn.Module  # fp32: what is saved, resumed and validated, and what Adam updates
    # what the training passes run: the model, or its bf16 copy (master weights), in a
    # DistributedDataParallel wrapper with several ranks, compiled with train.compile
    net: nn.Module
    objective: Objective
    optimizer: torch.optim.Optimizer  # fused Adam
    schedule: InverseSqrt  # step (from 1) -> learning rate
    sampler: BatchSampler
    validator: Validator
    throughput: Throughput
    device: torch.device
    master: MasterWeights | None = None  # train.master_weights: the bf16 copy the passes run


def training_device(env: Distributed) -> torch.device:
    """This rank's GPU when there are GPUs, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", env.rank % torch.cuda.device_count())
    return torch.device("cpu")


def check_data(data: Dataset, cfg: Config, lengths: Callable[[Split], np.ndarray]) -> None:
    """Refuse data the run would fail on later: empty splits, sequences past learned positions
    (`lengths`: an example's padded length, rounded up to data.pad_to_multiple), a syntax-aware
    model without source trees, data that the model's kind cannot read."""
    for name in ("train", "dev"):
        if len(data.splits.get(name, ())) == 0:
            raise DatasetError(f"{data.dir}: the {name} split is empty; prepare the dataset again")
    if cfg.model.syntax_mask != "none" and data.splits["train"].omega is None:
        raise ConfigError(
            f"model.syntax_mask='{cfg.model.syntax_mask}' masks attention with source trees, but "
            f"{data.dir} has none; prepare it with --source-trees tree|conllu or set model.syntax_mask=none"
        )
    _check_kind(data, cfg.model)
    multiple = cfg.data.pad_to_multiple
    splits = {name: split for name, split in data.splits.items() if len(split)}
    longest = {name: int(round_up(lengths(split), multiple).max()) for name, split in splits.items()}
    padded = f" (padded to a multiple of data.pad_to_multiple={multiple})" if multiple > 1 else ""
    check_positions(cfg.model, max(longest.values()), f"{data.dir}{padded}", trained=longest["train"])


def _check_kind(data: Dataset, model: ModelConfig) -> None:
    """An encoder-only classifier needs labels of its kind and number; a decoder-only model reads
    source and target with one vocabulary; only encoder-decoders read factored input."""
    kind = f"model.kind='{model.kind}'"
    assembly = assembly_for(model.kind)
    if data.factor_vocabs and not assembly.factors:
        raise ConfigError(f"{kind}: {data.dir} has factored input, which only encoder_decoder models read")
    if objective_for(model).joined and data.tgt_vocab is not data.src_vocab:
        raise ConfigError(
            f"{kind} reads source and target as one sequence, but {data.dir} has separate source and "
            "target vocabularies; prepare it with one shared vocabulary"
        )
    if not assembly.classifier:
        return
    meta = data.meta
    if not data_kind(meta.data_kind).labels:
        raise ConfigError(
            f"{kind} is a classifier: it needs labelled data (data.task=majority or updown), not "
            f"the {meta.data_kind} data in {data.dir}"
        )
    if meta.label_unit != model.classifier:
        raise ConfigError(
            f"{data.dir} has one label per {meta.label_unit}; set model.classifier={meta.label_unit} "
            f"(not {model.classifier})"
        )
    labels = [data.tgt_vocab.token(i) for i in range(FIRST_SYMBOL, len(data.tgt_vocab))]
    if model.num_classes != len(labels):
        raise ConfigError(
            f"model.num_classes={model.num_classes}, but {data.dir} has {len(labels)} labels "
            f"({', '.join(labels)}); set model.num_classes={len(labels)}"
        )
    for name, split in data.splits.items():
        wanted = split.src_lengths if model.classifier == "token" else 1
        if np.any(split.tgt_lengths != wanted):
            raise DatasetError(f"{data.dir}: {name} has examples without one label per {model.classifier}")


def mixing(data: Dataset, cfg: Config) -> Callable[[int], np.ndarray] | None:
    """A multilingual dataset's draw of each epoch's examples by data.pair_temperature."""
    if "train" not in data.pair_ids:
        return None
    return PairMixing(data.pair_ids["train"], cfg.data.pair_temperature, cfg.data.seed).epoch


def build_parts(cfg: Config, run_dir: Path, env: Distributed) -> Parts:
    """Read the config once and build the training parts (seeded by `train.seed`)."""
    t = cfg.train
    if t.threads is not None:
        torch.set_num_threads(t.threads)
    torch.manual_seed(t.seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    data = load_data(cfg, run_dir, env)
    objective = objective_for(cfg.model)
    check_data(data, cfg, objective.lengths)
    try:
        check_best_metric(t.best_metric, data.meta.data_kind)
        check_best_pair(t.best_pair, data.meta.languages)
        check_temperature(cfg.data.pair_temperature, len(data.meta.languages))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    device = training_device(env)
    try:
        model = build_model(
            cfg.model, len(data.src_vocab), len(data.tgt_vocab), PAD, [len(v) for v in data.factor_vocabs]
        )
    except ValueError as exc:  # settings that do not fit the data, e.g. tying separate vocabularies
        raise ConfigError(str(exc)) from None
    model.to(device)
    master = MasterWeights(model) if t.master_weights else None
    net = training_net(master.compute if master is not None else model, env, t.compile)
    # fused: one kernel for all parameters (CUDA: not one launch per list op), and the skip of a
    # non-finite step on the device (step.py)
    optimizer = torch.optim.Adam(
        parameter_groups(model, cfg.model.act_halt_lr),
        lr=0.0,
        betas=t.adam_betas,
        eps=t.adam_eps,
        weight_decay=t.weight_decay,
        fused=True,
    )
    train = data.splits["train"]
    sampler = BatchSampler(
        round_up(objective.lengths(train), cfg.data.pad_to_multiple),
        cfg.data.max_tokens,
        cfg.data.seed,
        env.rank,
        env.world,
        accumulate=t.accumulate,
        draw=mixing(data, cfg),
    )
    return Parts(
        data=data,
        model=model,
        net=net,
        objective=objective,
        optimizer=optimizer,
        schedule=InverseSqrt(cfg.model.d_model, t.warmup, t.lr_scale),
        sampler=sampler,
        validator=Validator(
            data=data,
            model=model,
            objective=objective,
            device=device,
            decode=cfg.decode,
            max_tokens=cfg.data.max_tokens,
            label_smoothing=t.label_smoothing,
        ),
        throughput=Throughput.for_training(cfg.model, train, len(data.tgt_vocab), device, t.precision),
        device=device,
        master=master,
    )


def parameter_groups(model: nn.Module, halt_lr: float) -> list[dict[str, Any]]:
    """Adam's parameter groups: one, or with model.act_halt_lr != 1 the halting units of ACT
    apart, their rate that multiple of the schedule's (`lr_scale`, which the step reads). The
    model's group comes first: its rate is the one logged."""
    halting = [
        p
        for m in model.modules()
        if isinstance(m, UniversalStack) and m.halt is not None
        for p in m.halt.parameters()
    ]
    if halt_lr == 1.0 or not halting:
        return [{"params": list(model.parameters())}]
    apart = {id(p) for p in halting}
    rest = [p for p in model.parameters() if id(p) not in apart]
    return [{"params": rest}, {"params": halting, "lr_scale": halt_lr}]


def training_net(module: nn.Module, env: Distributed, compile: bool) -> nn.Module:
    """What the training passes call: `module`, wrapped for DDP with several ranks, compiled with
    train.compile. torch.compile's default dynamic shapes: the first batch shape is compiled as it
    is, the second once more with its varying sizes symbolic, which serves the rest; compiling each
    of an epoch's shapes apart (dynamic=False) would take tens of compilations of tens of seconds
    each, even with data.pad_to_multiple."""
    net = nn.parallel.DistributedDataParallel(module) if env.world > 1 else module
    return torch.compile(net) if compile else net
