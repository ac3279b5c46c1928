"""One optimizer update: forward and backward over a step's batches, the decision to skip it, the
learning rate of the step, and Adam's update, all without waiting for the device.

One optimizer step consumes `train.accumulate` batches on each of the `world` ranks; the
summed loss is divided by the step's global target-token count, so one process
accumulating k batches computes the same update as k ranks with one batch each.

Nothing here reads a device value on the host: the token count, the finite check, the learning
rate and the skip are device tensors. Adam is fused (one kernel for all parameters, on the CPU and
on CUDA) and skips a step as `GradScaler` makes it: given `found_inf` = 1 it leaves the weights and
moments as they were and rolls its step count back. The outcome is counted in `counters.py`.
"""

from __future__ import annotations

import contextlib
import enum
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

from ..config import Config
from ..data.batching import Batch
from ..model.ponder import PonderWeights
from .build import Distributed, Parts
from .counters import APPLIED, StepCounters
from .loss import label_smoothed_loss
from .objective import IGNORE


@dataclass(frozen=True, slots=True)
class StepSettings:
    """What the step reads of the config, read once."""

    label_smoothing: float
    clip_norm: float | None
    precision: str  # fp32, bf16 or fp16 (autocast; fp16 with a loss scale)
    master_weights: bool  # bf16 weights for the passes, fp32 ones in Adam (no autocast)
    ponder: PonderWeights  # ACT's ponder cost weight per stack, along training
    max_bad_steps: int

    @classmethod
    def from_config(cls, cfg: Config) -> StepSettings:
        t, m = cfg.train, cfg.model
        ponder = PonderWeights(
            encoder=m.act_tau if m.act_tau_encoder is None else m.act_tau_encoder,
            decoder=m.act_tau if m.act_tau_decoder is None else m.act_tau_decoder,
            start=m.act_tau_start,
            ramp=m.act_tau_ramp,
        )
        return cls(t.label_smoothing, t.clip_norm, t.precision, t.master_weights, ponder, t.max_bad_steps)


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
    gradient sync on the last batch only, clipping, fp16 loss scaling, bf16 master weights)."""

    def __init__(self, parts: Parts, env: Distributed, settings: StepSettings) -> None:
        self.net, self.model, self.objective = parts.net, parts.model, parts.objective
        self.optimizer, self.schedule, self.device = parts.optimizer, parts.schedule, parts.device
        self.master = parts.master
        self.env, self.settings = env, settings
        self.params = [p for group in self.optimizer.param_groups for p in group["params"]]
        self.counters = StepCounters(self.device, settings.max_bad_steps)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=settings.precision == "fp16")
        autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(settings.precision)
        self.dtype = None if settings.master_weights else autocast
        # fused Adam reads a CPU rate as a double; on CUDA it takes float32
        self.lr_dtype = torch.float64 if self.device.type == "cpu" else torch.float32

    def start(self, step: int, skipped: int, bad_in_row: int) -> None:
        """Before the first step of a run (fresh, resumed or fine-tuned): the counters take the
        run's state, and bf16 master weights copy the model's (which a resume may have loaded)."""
        self.counters.start(step, skipped, bad_in_row)
        if self.master is not None:
            self.master.refresh()

    def __call__(self, batches: list[Batch]) -> None:
        """The next update over `batches`, applied where the loss and gradient are finite (else
        the weights and Adam stay as they were); the outcome is counted on the device."""
        targets = [self.objective.targets(b).to(self.device, non_blocking=True) for b in batches]
        total = self._token_count(targets)
        self.optimizer.zero_grad(set_to_none=True)
        if self.master is not None:
            self.master.zero_grad()
        sums = self._backward(batches, targets, total)
        if self.master is not None:
            self.master.grads_to_master()
        self.scaler.unscale_(self.optimizer)
        norm = self._grad_norm()
        outcome = self.counters.decide(sums[0], norm, self._overflow_possible())
        self._update(outcome)
        self.scaler.update()  # halves the loss scale after an overflow
        self.counters.record(outcome, sums, total, norm)

    def _token_count(self, targets: list[Tensor]) -> Tensor:
        """The step's scored target tokens over all ranks, on the device: every rank divides by it."""
        total = torch.stack([t.ne(IGNORE).sum() for t in targets]).sum().double()
        if self.env.world > 1:
            dist.all_reduce(total)
        return total

    def _backward(self, batches: list[Batch], targets: list[Tensor], total: Tensor) -> Tensor:
        """Accumulate the gradients of the step's batches; the summed (smoothed loss, NLL) of all ranks."""
        sums = torch.zeros(2, device=self.device)
        scale = (self.env.world / total).float()  # rounded as a Python float was
        for i, (b, target) in enumerate(zip(batches, targets, strict=True)):
            sync = self.env.world == 1 or i == len(batches) - 1
            with contextlib.nullcontext() if sync else self.net.no_sync():  # type: ignore[operator]
                with self._autocast():
                    out = self.objective.forward(self.net, b.to(self.device))
                    loss, nll = label_smoothed_loss(out.logits, target, self.settings.label_smoothing, IGNORE)
                objective = loss * scale
                ponder = self.settings.ponder.loss(out.ponder, self.counters.step + 1)
                if ponder is not None:  # ACT's ponder cost, averaged over the step's batches
                    objective = objective + ponder / len(batches)
                self.scaler.scale(objective).backward()
            sums += torch.stack([loss.detach(), nll])
        if self.env.world > 1:
            dist.all_reduce(sums)
        return sums

    def _grad_norm(self) -> Tensor:
        """The gradients' global L2 norm, clipped to train.clip_norm when it is set."""
        if self.settings.clip_norm is not None:
            return torch.nn.utils.clip_grad_norm_(self.params, self.settings.clip_norm)
        grads = [p.grad for p in self.params if p.grad is not None]
        return torch.nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=self.device)

    def _overflow_possible(self) -> Tensor | None:
        """fp16: whether the loss scale is at least 1 (a device value; None when not scaling)."""
        if not self.scaler.is_enabled():
            return None
        return self.scaler._get_scale_async() >= 1.0  # the scale tensor, read without a sync

    def _update(self, outcome: Tensor) -> None:
        """Adam at the schedule's rate for the next applied step, masked by `outcome`."""
        lr = self.schedule.on_device(self.counters.step + 1, self.lr_dtype)
        for group in self.optimizer.param_groups:  # ACT's halting units may have a multiple of it
            group["lr"] = lr * group["lr_scale"] if "lr_scale" in group else lr
        # GradScaler's protocol for fused optimizers: found_inf = 1 skips the update
        self.optimizer.found_inf = (outcome != APPLIED).float()  # type: ignore[attr-defined]
        self.optimizer.grad_scale = None  # type: ignore[attr-defined]  # unscaled already
        try:
            self.optimizer.step()
        finally:
            del self.optimizer.found_inf, self.optimizer.grad_scale  # type: ignore[attr-defined]
        if self.master is not None:
            self.master.weights_to_compute()

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)
