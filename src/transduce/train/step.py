"""One optimizer update: forward and backward over a step's batches, the decision to skip it, the
learning rate of the step, and Adam's update.

One optimizer step consumes `train.accumulate` batches on each of the `world` ranks; the
summed loss is divided by the step's global target-token count, so one process
accumulating k batches computes the same update as k ranks with one batch each.
"""

from __future__ import annotations

import contextlib
import enum
import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

from ..config import Config
from ..data.batching import Batch
from ..model.ponder import ponder_loss
from .build import Distributed, Parts
from .loss import label_smoothed_loss
from .objective import IGNORE


@dataclass(frozen=True, slots=True)
class StepSettings:
    """What the step reads of the config, read once."""

    label_smoothing: float
    clip_norm: float | None
    precision: str  # fp32, bf16 or fp16 (autocast; fp16 with a loss scale)
    act_tau: float  # ACT's ponder-cost weight

    @classmethod
    def from_config(cls, cfg: Config) -> StepSettings:
        t = cfg.train
        return cls(t.label_smoothing, t.clip_norm, t.precision, cfg.model.act_tau)


@dataclass(frozen=True, slots=True)
class StepStats:
    loss: float
    nll: float
    tokens: int
    grad_norm: float


class Skipped(enum.Enum):
    """Why a step made no update."""

    NON_FINITE = "non-finite loss or gradient"
    OVERFLOW = "fp16 gradients overflowed at this loss scale"  # the scaler lowers it and goes on


class OptimizerStep:
    """One update of the model's parameters from a list of batches (gradient accumulation, DDP's
    gradient sync on the last batch only, clipping, fp16 loss scaling)."""

    def __init__(self, parts: Parts, env: Distributed, settings: StepSettings) -> None:
        self.net, self.model, self.objective = parts.net, parts.model, parts.objective
        self.optimizer, self.schedule, self.device = parts.optimizer, parts.schedule, parts.device
        self.env, self.settings = env, settings
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=settings.precision == "fp16")
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(settings.precision)

    def __call__(self, batches: list[Batch], step: int) -> StepStats | Skipped:
        """Update #`step` + 1 over `batches`, or why there was none: a non-finite loss or
        gradient, or (fp16) gradients that overflowed only because of the loss scale."""
        targets = [self.objective.targets(b) for b in batches]
        total = self._token_count(targets)
        self.optimizer.zero_grad(set_to_none=True)
        sums = self._backward(batches, targets, total)
        self.scaler.unscale_(self.optimizer)
        norm = float(
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.clip_norm or math.inf)
        )
        finite_loss = math.isfinite(float(sums[0]))
        if not (finite_loss and math.isfinite(norm)):
            overflow = finite_loss and self.scaler.is_enabled() and self.scaler.get_scale() >= 1.0
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.update()  # halves the loss scale after an overflow
            return Skipped.OVERFLOW if overflow else Skipped.NON_FINITE
        lr = self.schedule(step + 1)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return StepStats(float(sums[0]) / total, float(sums[1]) / total, int(total), norm)

    def _token_count(self, targets: list[Tensor]) -> float:
        """The step's scored target tokens over all ranks: every rank divides by it."""
        total = float(sum(int(t.ne(IGNORE).sum()) for t in targets))  # counted on the host
        if self.env.world > 1:
            tokens = torch.tensor([total], device=self.device)
            dist.all_reduce(tokens)
            total = float(tokens.item())
        return total

    def _backward(self, batches: list[Batch], targets: list[Tensor], total: float) -> Tensor:
        """Accumulate the gradients of the step's batches; the summed (smoothed loss, NLL) of all ranks."""
        sums = torch.zeros(2, device=self.device)
        for i, (b, target) in enumerate(zip(batches, targets, strict=True)):
            sync = self.env.world == 1 or i == len(batches) - 1
            with contextlib.nullcontext() if sync else self.net.no_sync():  # type: ignore[operator]
                with self._autocast():
                    out = self.objective.forward(self.net, b.to(self.device))
                    loss, nll = label_smoothed_loss(
                        out.logits, target.to(self.device), self.settings.label_smoothing, IGNORE
                    )
                objective = loss * (self.env.world / total)
                ponder = ponder_loss(out.ponder, self.settings.act_tau)
                if ponder is not None:  # ACT's ponder cost, averaged over the step's batches
                    objective = objective + ponder / len(batches)
                self.scaler.scale(objective).backward()
            sums += torch.stack([loss.detach(), nll])
        if self.env.world > 1:
            dist.all_reduce(sums)
        return sums

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)
