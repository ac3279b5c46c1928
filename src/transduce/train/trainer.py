"""The training loop: updates until a limit ends the run, over the parts it is given: those
train/build.py makes of the config (data, model, optimizer, sampler, validator), the optimizer step
(step.py) and its counters (counters.py), the clock of what is due when (clock.py), the run's
checkpoints (checkpointing.py) and final average (averaging.py), its report (log.py) and progress
display (progress.py). The loop reads no config: what it needs is copied into typed settings when
it is set up, as torchtune's recipes do."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from ..config import Config
from ..data.batching import Batch
from ..device import attention_kernels
from ..store.meta import InitSource
from .averaging import EndAverage, Keeping
from .batches import BatchStream, Prepared, steps_ahead
from .build import Distributed, Parts, build_parts
from .checkpointing import Checkpointing
from .clock import Cadence, Clock, Outcome
from .counters import APPLIED, OVERFLOW, ReadBack, Tally
from .log import RunReport, ShapeReport
from .progress import TrainingProgress
from .run_dir import RunLayout, RunLock
from .state import TrainingError, TrainState, peer_lost
from .step import OptimizerStep, Skipped, StepSettings, StepStats


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """What the loop reads of `train.*` besides its clock's (and data.pad_to_multiple), read once."""

    accumulate: int
    average_last: int | None
    prefetch: int | None
    attention_kernel: str
    pad_to_multiple: int

    @classmethod
    def from_config(cls, cfg: Config) -> LoopSettings:
        t, multiple = cfg.train, cfg.data.pad_to_multiple
        return cls(t.accumulate, t.average_last, t.prefetch, t.attention_kernel, multiple)


class Trainer:
    """The training loop over the parts it is given, with checkpoints and logs in one run directory."""

    def __init__(
        self,
        cfg: Config,
        run_dir: Path,
        env: Distributed | None = None,
        show_progress: bool = True,
        console: Console | None = None,
        parts: Parts | None = None,
    ) -> None:
        """`parts` default to what `build_parts` makes of the config."""
        self.run_dir, self.env = Path(run_dir), env or Distributed()
        self.show = show_progress and self.env.main
        self.console = console or Console(quiet=not self.show)
        parts = parts or build_parts(cfg, self.run_dir, self.env)
        self.data, self.model, self.objective = parts.data, parts.model, parts.objective
        self.optimizer, self.sampler, self.device = parts.optimizer, parts.sampler, parts.device
        self.validator, self.train_split = parts.validator, self.data.splits["train"]
        self.settings, self.cadence = LoopSettings.from_config(cfg), Cadence.from_config(cfg.train)
        self.optimizer_step = OptimizerStep(parts, self.env, StepSettings.from_config(cfg))
        shapes = ShapeReport(self.sampler, self.objective, self.train_split, cfg.data.pad_to_multiple)
        self.report = RunReport(self.run_dir, main=self.env.main, throughput=parts.throughput, shapes=shapes)
        layout = RunLayout(self.run_dir)
        self.checkpoints = Checkpointing(layout, cfg, parts, self.report.warn)
        self.average = EndAverage(layout, Keeping.from_config(cfg.train))
        self.state = TrainState()
        self.reads = ReadBack(self.optimizer_step.counters, self.sampler.state_dict())
        self.origin: InitSource | None = None  # set by init_from, kept across resumes
        self.outcome: Outcome | None = None

    @property
    def scaler(self) -> torch.amp.GradScaler:
        """fp16's loss scaler (disabled otherwise): the step's, saved with each checkpoint."""
        return self.optimizer_step.scaler

    @scaler.setter
    def scaler(self, scaler: torch.amp.GradScaler) -> None:
        self.optimizer_step.scaler = scaler

    @property
    def position(self) -> dict[str, int]:
        """The sampler's position after the last batch trained on (not after those prepared ahead)."""
        return self.reads.position

    def resume(self) -> bool:
        """Load the newest intact checkpoint, skipping damaged ones; False if none."""
        resumed = self.checkpoints.resume(self.scaler)
        if resumed is None:
            return False
        self.state, self.origin = resumed.state, resumed.origin
        self.reads.position = self.sampler.state_dict()
        self._start_counters()
        self.checkpoints.forget_missing_best(self.state)
        self.console.print(f"resumed from {resumed.path} at step {self.state.step}")
        return True

    def init_from(self, path: Path, keep_optimizer: bool = False, keep_step: bool = False) -> None:
        """Start a new run from another run's (or an imported model's) weights: fine-tuning.

        The optimizer, schedule and data position start afresh unless `keep_optimizer` (Adam's
        moments, when the checkpoint has them) or `keep_step` (the step count, so the learning
        rate goes on from there; refused where it leaves nothing to train)."""
        origin = self.checkpoints.initialise_from(path, keep_optimizer, keep_step)
        if keep_step:
            self.state.step = origin.step
        self.origin = origin
        self._start_counters()
        self.console.print(f"initialised from {origin.checkpoint} (step {origin.step})")

    def save(self) -> Path:
        """Write a checkpoint of this step (the best one when its validation was the best)."""
        return self.checkpoints.save(
            self.state, origin=self.origin, scaler=self.scaler, position=self.reads.position
        )

    def train_step(self, batches: list[Batch]) -> StepStats | Skipped | None:
        """One optimizer update over `batches`, or none where the loss or gradient is not finite.
        Within `fit` the outcome stays on the device (None): the loop reads the counters back every
        train.log_every steps and where it waits anyway. Called on its own, the step is read back
        at once (counted in the state): its statistics, or why it made no update."""
        self.optimizer_step(batches)
        if self.reads.deferred:
            return None
        self.reads.queue(self.reads.position)
        tally = self.reads.read(self.state)
        if tally.outcome == APPLIED:
            return StepStats(tally.loss, tally.nll, tally.step_tokens, tally.grad_norm)
        return Skipped.OVERFLOW if tally.outcome == OVERFLOW else Skipped.NON_FINITE

    def validate(self) -> dict[str, Any]:
        """This step's validation: the run's counts and the validator's scores."""
        return {
            "step": self.state.step,
            "train_minutes": self.state.train_seconds / 60,
            "train_tokens": self.state.tokens,
            **self.validator.scores(),
        }

    def fit(self, resume: bool = False, init: Callable[[], None] | None = None) -> dict[str, Any]:
        """Train until a limit ends the run (`train.steps`, `train.max_minutes`, early stopping),
        validating and checkpointing on the way, then average (train.average_last). `init` (e.g.
        a call of `init_from`) starts a run that has no checkpoint to resume from. `outcome`
        says how it ended; a run that had ended before trains nothing and averages nothing.

        The run directory is locked for the whole run; if anything fails or interrupts training
        after a step that no checkpoint holds yet, that step is saved before the error goes on."""
        with RunLock(self.run_dir) if self.env.main else contextlib.nullcontext(), self.report.open():
            self._start(resume, init)
            ended = self.cadence.ended_before(self.state)
            if ended is not None:
                self.report.text(ended)
                self.outcome = Outcome(self.state.step, ended, already=True)
            else:
                reason = self._train()
                self.outcome = Outcome(self.state.step, reason)
                self.outcome.average = self._average()
            return self.state.history[-1] if self.state.history else {}

    def _start(self, resume: bool, init: Callable[[], None] | None) -> None:
        if self.env.main:
            self.checkpoints.remove_leftovers()
            if self.settings.average_last is not None:
                self.average.check_output()  # refused now, not after the training
        resumed = resume and self.resume()
        if init is not None:
            if resumed:
                raise TrainingError(
                    f"{self.run_dir} already holds checkpoints; a run starts from other weights only "
                    "in a new --run-dir (resuming this one continues its own)"
                )
            init()
        self.checkpoints.saved_step = self.state.step

    def _train(self) -> str:
        """The loop; the steps no checkpoint holds are saved if anything ends it early."""
        try:
            return self._loop()
        except BaseException as exc:
            if self.env.main:
                catch_up = partial(self.reads.read, self.state) if len(self.reads) else lambda: None
                self.checkpoints.save_on_the_way_out(exc, self.state, catch_up=catch_up, save=self.save)
            if self.env.lost_peer(exc):
                where = self.checkpoints.newest()
                raise peer_lost(exc, self.env.rank, self.env.world, where) from exc
            raise

    def _average(self) -> str | None:
        """train.average_last, on the main rank: what it did."""
        if not self.env.main or self.settings.average_last is None:
            return None
        done = self.average(self.state, self.cadence.best_metric, self._validate_weights)
        self.report.text(done)
        return done

    def _validate_weights(self, weights: dict[str, torch.Tensor]) -> dict[str, Any]:
        """Validate other weights (the average) in the model's place."""
        with self.validator.weights_in_place(weights):
            return self.validate()

    def batch_stream(self) -> BatchStream:
        """The training batches from the sampler's position, built ahead (`train.prefetch`) and on
        the device, `train.accumulate` to a step."""
        s = self.settings
        collate = partial(self.objective.collate, self.train_split, multiple=s.pad_to_multiple)
        ahead = steps_ahead(s.prefetch, self.device)
        return BatchStream(self.sampler, collate, s.accumulate, self.device, ahead)

    def _loop(self) -> str:
        """Update until a limit ends the run; why it ended. The steps' outcomes are read back from
        the device only where something is due (`Clock.read_due`), so between read-backs the host
        queues each step without waiting for the last."""
        state = self.state
        clock = Clock(self.cadence, state.train_seconds)
        self._start_counters()
        stream = self.batch_stream()
        progress = TrainingProgress(self.console, self.show, self.cadence.steps, self.cadence.max_minutes)
        kernels = attention_kernels(self.device, self.settings.attention_kernel)
        with progress, stream, kernels, self.reads.deferring():
            progress.advance(state.step, state.train_seconds)
            while True:
                self._attempt(next(stream))
                ahead = state.step + len(self.reads)
                progress.advance(ahead, state.train_seconds)
                if not clock.read_due(ahead, len(self.reads), state.train_seconds, self.env.world == 1):
                    continue
                tally = self._read(clock)
                if tally.outcome != APPLIED:
                    continue  # as after any skipped step: nothing is due until an update
                if clock.log_due(state.step):
                    lr = float(self.optimizer.param_groups[0]["lr"])  # a device tensor: read back now
                    self.report.stats(progress, state, stats=tally, lr=lr, window=clock.window())
                reason = self._validate_save_or_stop(clock, progress)
                if reason is not None:
                    self.report.text(f"step {state.step}: {reason}")
                    return reason

    def _start_counters(self) -> None:
        self.optimizer_step.start(self.state.step, self.state.skipped, self.state.bad_in_row)

    def _attempt(self, step: Prepared) -> None:
        """One update from a prepared step's batches, its (host) time counted."""
        self.report.epoch(step.position["epoch"])
        began = time.monotonic()
        self.reads.queue(step.position)
        self.train_step(step.batches)
        self.state.train_seconds += time.monotonic() - began

    def _read(self, clock: Clock) -> Tally:
        """Read the counters back (the wait for the device counts as training time) and check them."""
        state, began, skipped = self.state, time.monotonic(), self.state.skipped
        tally = self.reads.read(state)
        state.train_seconds += time.monotonic() - began
        clock.window_tokens += tally.tokens
        self.reads.check(state, skipped, self.scaler, self.report.text)
        return tally

    def _validate_save_or_stop(self, clock: Clock, progress: TrainingProgress) -> str | None:
        """Validate and save when due (a better validation is saved at once: the best checkpoint
        is always kept); why the run ends here, if it does."""
        agree = partial(self.env.agree, device=self.device)
        due = clock.due(self.state.step, self.state.train_seconds, agree)
        improved = stop_early = False
        if due.validate:
            improved = agree(self._validate_and_record(progress))
            stop_early = agree(self.cadence.out_of_patience(self.state))
            clock.validated(self.state.train_seconds)
        if clock.save_due(self.state.step, due, improved=improved, stop_early=stop_early):
            if self.env.main:
                self.save()
            self.env.barrier()
            clock.saved()
        return clock.end_reason(self.state, due, stop_early=stop_early)

    def _validate_and_record(self, progress: TrainingProgress) -> bool:
        """Validate (on the main rank) and track the best step; True if this one is the best."""
        improved = False
        if self.env.main:
            metrics = self.validate()
            self.state.history.append(metrics)
            self.report.validation(progress, self.state.step, metrics)
            metric = self.cadence.best_metric
            improved = self.state.track_best(metric, float(metrics[f"dev_{metric}"]))
        self.env.barrier()
        return improved
