"""What a run reports: TensorBoard scalars and a plain-text log (the training statistics every
train.log_every steps, each validation, each epoch's batch shapes), and its throughput in tokens,
FLOP/s and model FLOPs utilisation (MFU, nanoGPT's `estimate_mfu`: achieved FLOP/s over the
device's peak), with FLOPs per token from `cost.py`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.markup import escape

from ..config import ModelConfig
from ..cost import flops_per_token
from ..data.batching import BatchSampler
from ..data.dataset import Split
from ..metrics import perplexity
from .counters import Tally
from .objective import Objective, objective_for
from .progress import TrainingProgress
from .run_dir import RunLayout
from .state import TrainState

# Dense peak FLOP/s by device name fragment and precision (vendor data sheets, no sparsity).
PEAK_FLOPS = {
    "H200": {"bf16": 989e12, "fp16": 989e12, "fp32": 494e12},  # fp32 through TF32
    "H100": {"bf16": 989e12, "fp16": 989e12, "fp32": 494e12},
    "A100": {"bf16": 312e12, "fp16": 312e12, "fp32": 156e12},
}


def peak_flops(device: torch.device, precision: str) -> float | None:
    """The device's peak for `precision`, where known (CUDA devices in PEAK_FLOPS); else None."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peaks[precision] for key, peaks in PEAK_FLOPS.items() if key in name), None)


@dataclass
class Throughput:
    """Turns tokens per window into tokens/s, achieved TFLOP/s and MFU (when the peak is known)."""

    flops_per_token: float  # training FLOPs (3 x forward) per target token
    peak: float | None

    @classmethod
    def for_training(
        cls, model: ModelConfig, split: Split, tgt_vocab: int, device: torch.device, precision: str
    ) -> Throughput:
        """FLOPs per scored target at the training data's mean source and target lengths (a
        language model's sequence is both; a sequence classifier scores one label per source)."""
        src_len = max(1, round(float(np.mean(split.src_lengths))) + 1)
        objective = objective_for(model)
        tgt = split.tgt_lengths + (split.src_lengths if objective.joined else 0)
        tgt_len = max(1, round(float(np.mean(tgt))) + 1)
        flops = flops_per_token(model, tgt_vocab, src_len, tgt_len, training=True)
        if objective.per_sequence:
            flops *= src_len
        return cls(flops, peak_flops(device, precision))

    def row(self, tokens: int, seconds: float) -> dict[str, float]:
        rate = tokens / max(seconds, 1e-9)
        out = {"tokens_per_s": rate, "tflops": rate * self.flops_per_token / 1e12}
        if self.peak is not None:
            out["mfu"] = rate * self.flops_per_token / self.peak
        return out

    @staticmethod
    def shown(row: dict[str, float]) -> str:
        text = f"{row['tokens_per_s']:.0f} tok/s {row['tflops']:.3g} TFLOP/s"
        return text + (f" MFU {100 * row['mfu']:.1f}%" if "mfu" in row else "")


class RunLogger:
    """TensorBoard event files plus a plain-text log, written by the main process."""

    def __init__(self, run_dir: Path, active: bool) -> None:
        self.active = active
        layout = RunLayout(run_dir)
        self.path, self.tb = layout.log, layout.tensorboard
        self.writer = None
        self.file = None
        if active:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.tb))
            self.file = self.path.open("a", encoding="utf-8")

    def scalars(self, step: int, values: dict[str, float]) -> None:
        if not self.active:
            return
        if self.writer is not None:
            try:
                for key, value in values.items():
                    if isinstance(value, (int, float, np.floating)):
                        self.writer.add_scalar(key, float(value), step)
            except OSError as exc:  # a full disk: as for train.log, one warning and no more files
                self.writer = None
                _warn(
                    f"cannot write the TensorBoard files in {self.tb}: {exc.strerror or exc}; they stop here"
                )
        self.text(f"step {step}: " + " ".join(f"{k}={v:.6g}" for k, v in values.items()))

    def text(self, line: str) -> None:
        """A line of train.log. A log that cannot be written (a full disk) is closed with one
        warning: training, and the error that may follow, matter more than its log."""
        if self.file is None:
            return
        try:
            self.file.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")
            self.file.flush()
        except OSError as exc:
            self.close_file()
            _warn(f"cannot write {self.path}: {exc.strerror or exc}; train.log stops here")

    def close_file(self) -> None:
        file, self.file = self.file, None
        if file is not None:
            with contextlib.suppress(OSError):  # what it could not flush is lost either way
                file.close()

    def close(self) -> None:
        """Close both logs; one that cannot be flushed is a warning, not an error that would hide
        the one the run may be ending with."""
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close()
            except OSError as exc:
                _warn(f"cannot write the TensorBoard files in {self.tb}: {exc.strerror or exc}")
        self.close_file()


class ShapeReport:
    """How many distinct batch shapes an epoch has, said as its first step comes: data.pad_to_multiple
    makes them few, for the plans cuDNN and cuBLAS keep per shape."""

    def __init__(self, sampler: BatchSampler, objective: Objective, split: Split, multiple: int) -> None:
        self.sampler, self.objective, self.split, self.multiple = sampler, objective, split, multiple
        self.epoch: int | None = None  # the last epoch reported

    def line(self, epoch: int) -> str | None:
        """The line for `epoch` the first time it comes; None after."""
        if epoch == self.epoch:
            return None
        self.epoch = epoch
        batches = self.sampler.epoch_batches(epoch)
        shapes = set(self.objective.shapes(self.split, batches, self.multiple))
        return (
            f"epoch {epoch}: {len(batches)} batches of {len(shapes)} distinct shapes (rows, source, "
            f"target positions; data.pad_to_multiple={self.multiple})"
        )


class RunReport:
    """What a run says as it trains: lines and scalars in train.log and TensorBoard (on the main
    rank, while `open`), warnings on stderr, the statistics every train.log_every steps, each
    validation, each epoch's batch shapes."""

    def __init__(self, run_dir: Path, *, main: bool, throughput: Throughput, shapes: ShapeReport) -> None:
        self.run_dir, self.main, self.throughput, self.shapes = run_dir, main, throughput, shapes
        self.logger: RunLogger | None = None

    @contextlib.contextmanager
    def open(self) -> Iterator[None]:
        """The log files, open for the block."""
        self.logger = RunLogger(self.run_dir, self.main)
        try:
            yield
        finally:
            self.logger.close()
            self.logger = None

    def text(self, line: str) -> None:
        """A line of train.log, if it is open."""
        if self.logger is not None:
            self.logger.text(line)

    def warn(self, message: str) -> None:
        """A warning on stderr and in train.log, whether or not the progress display is on."""
        Console(stderr=True).print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)
        self.text(f"warning: {message}")

    def epoch(self, epoch: int) -> None:
        """Say how many batch shapes `epoch` has, the first time it comes."""
        line = self.shapes.line(epoch)
        if line is not None:
            self.text(line)

    def stats(
        self,
        progress: TrainingProgress,
        state: TrainState,
        stats: Tally,
        lr: float,
        window: tuple[int, float],
    ) -> None:
        """The training statistics of the steps since the last ones; `window`: the tokens trained
        since then and the seconds they took."""
        rates = self.throughput.row(*window)
        row = {
            "loss": stats.loss,
            "nll": stats.nll,
            "ppl": perplexity(stats.nll, 1),
            "lr": lr,
            "grad_norm": stats.grad_norm,
            **rates,
        }
        assert self.logger is not None
        self.logger.scalars(state.step, {f"train/{k}": v for k, v in row.items()})
        shown = f"loss {stats.loss:.3f} lr {lr:.2e} " + self.throughput.shown(rates)
        progress.stats(state.step, state.train_seconds, shown)

    def validation(self, progress: TrainingProgress, step: int, metrics: dict[str, Any]) -> None:
        """A validation's scores as scalars, in train.log and above the progress bar."""
        assert self.logger is not None
        self.logger.scalars(step, {f"valid/{k}": v for k, v in metrics.items() if k != "step"})
        shown = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items() if k != "step")
        progress.print(f"step {step}: {shown}")


def _warn(message: str) -> None:
    Console(stderr=True).print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)
