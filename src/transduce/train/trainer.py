"""The training loop: updates, validation, checkpoints and the limits that end a run, over the
parts it is given (train/build.py): the optimizer step (step.py), the run directory
(run_dir.py) and the progress display (progress.py). The loop reads no config: what it needs is
copied into typed settings when it is set up, as torchtune's recipes do."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from rich.console import Console
from torch import Tensor

from ..config import Config
from ..data.batching import Batch
from ..data.dataset import Split
from ..device import attention_kernels
from ..fileio import RunLock
from ..metrics import perplexity
from ..store.checkpoint import load_weights, step_checkpoints
from ..store.meta import InitSource
from .batches import BatchStream, Prepared, steps_ahead
from .build import Distributed, Parts, build_parts
from .counters import APPLIED, OVERFLOW, Tally
from .log import RunLogger
from .progress import TrainingProgress
from .run_dir import RunDirectory
from .state import TrainingError, TrainState, peer_lost
from .step import OptimizerStep, Skipped, StepSettings, StepStats
from .validation import DevPass, dev_loss, greedy_outputs

# The counters are read back at least this often (steps), however far apart the logging is.
READ_BACK_AT_LEAST = 1000


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """What the loop reads of `train.*`, read once."""

    steps: int
    accumulate: int
    log_every: int
    validate_every: int
    validate_every_minutes: float | None
    save_every: int
    save_every_minutes: float | None
    max_minutes: float | None
    patience: int | None
    best_metric: str
    max_bad_steps: int
    average_last: int | None
    prefetch: int | None
    attention_kernel: str
    pad_to_multiple: int  # data.pad_to_multiple

    @classmethod
    def from_config(cls, cfg: Config) -> LoopSettings:
        t = cfg.train
        return cls(
            **{f.name: getattr(t, f.name) for f in fields(cls) if f.name != "pad_to_multiple"},
            pad_to_multiple=cfg.data.pad_to_multiple,
        )


@dataclass(slots=True)
class Clock:
    """The loop's marks in time: the last save (wall clock), the last validation (training
    time) and the window of the throughput in the log."""

    last_save: float
    last_validation: float
    window_start: float
    window_tokens: int = 0


@dataclass(slots=True)
class Outcome:
    """How `fit` ended: at which step and why, whether the run had ended before (nothing was
    trained), and what train.average_last did."""

    step: int
    reason: str
    already: bool = False
    average: str | None = None


class Trainer:
    """The training loop over the parts it is given (data, model, optimizer, schedule, sampler,
    metrics), with checkpoints, resume and logging in one run directory."""

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
        self.run_dir = Path(run_dir)
        self.env = env or Distributed()
        self.show = show_progress and self.env.main
        self.console = console or Console(quiet=not self.show)
        parts = parts or build_parts(cfg, self.run_dir, self.env)
        self.data, self.model, self.objective = parts.data, parts.model, parts.objective
        self.optimizer, self.sampler, self.device = parts.optimizer, parts.sampler, parts.device
        self.metrics, self.throughput = parts.metrics, parts.throughput
        self.train_split = self.data.splits["train"]
        self.settings = LoopSettings.from_config(cfg)
        self.decode_options, self.dev_tokens = cfg.decode, cfg.data.max_tokens
        self.label_smoothing = cfg.train.label_smoothing
        self.optimizer_step = OptimizerStep(parts, self.env, StepSettings.from_config(cfg))
        self.run = RunDirectory(self.run_dir, cfg, parts, self.warn)
        self.state = TrainState()
        self.saved_step = 0  # the newest step a checkpoint holds
        self.save_failed = False  # a failed save is not tried again on the way out
        self.logger: RunLogger | None = None
        self.origin: InitSource | None = None  # set by init_from, kept across resumes
        self.outcome: Outcome | None = None
        self.position = self.sampler.state_dict()  # the sampler's, after the last batch trained on
        self.deferred = False  # within the loop: steps are not read back one by one
        self.pending: list[dict[str, int]] = []  # steps not read back yet: the position after each
        self.shapes_epoch: int | None = None  # the last epoch whose batch shapes were logged

    @property
    def scaler(self) -> torch.amp.GradScaler:
        """fp16's loss scaler (disabled otherwise): the step's, saved with each checkpoint."""
        return self.optimizer_step.scaler

    @scaler.setter
    def scaler(self, scaler: torch.amp.GradScaler) -> None:
        self.optimizer_step.scaler = scaler

    # ----------------------------------------------------------------- state
    def resume(self) -> bool:
        """Load the newest intact checkpoint, skipping damaged ones; False if none."""
        resumed = self.run.resume(self.scaler)
        if resumed is None:
            return False
        self.state, self.origin = resumed.state, resumed.origin
        self.position = self.sampler.state_dict()
        self._start_counters()
        self.run.forget_missing_best(self.state)
        self.console.print(f"resumed from {resumed.path} at step {self.state.step}")
        return True

    def init_from(self, path: Path, keep_optimizer: bool = False, keep_step: bool = False) -> None:
        """Start a new run from another run's (or an imported model's) weights: fine-tuning.

        The optimizer, schedule and data position start afresh unless `keep_optimizer` (Adam's
        moments, when the checkpoint has them) or `keep_step` (the step count, so the learning
        rate goes on from there; refused where it leaves nothing to train)."""
        origin = self.run.initialise_from(path, keep_optimizer, keep_step)
        if keep_step:
            if origin.step >= self.settings.steps:
                raise TrainingError(
                    f"--keep-step: {origin.checkpoint} is at step {origin.step}, not below "
                    f"train.steps={self.settings.steps}, so nothing would be trained; set train.steps "
                    f"above {origin.step} (it counts from the checkpoint's step) or leave out --keep-step"
                )
            self.state.step = origin.step
        self.origin = origin
        self._start_counters()
        self.console.print(f"initialised from {origin.checkpoint} (step {origin.step})")

    def save(self) -> Path:
        """Write a checkpoint of this step (the best one when its validation was the best)."""
        try:
            path = self.run.save(self.state, self.origin, self.scaler, self.position)
        except Exception:
            self.save_failed = True
            raise
        self.saved_step = self.state.step
        return path

    # ----------------------------------------------------------------- steps
    def train_step(self, batches: list[Batch]) -> StepStats | Skipped | None:
        """One optimizer update over `batches`, or none where the loss or gradient is not finite.
        Within `fit` the outcome stays on the device (None): the loop reads the counters back every
        train.log_every steps and where it waits anyway. Called on its own, the step is read back
        at once (counted in the state): its statistics, or why it made no update."""
        self.optimizer_step(batches)
        if self.deferred:
            return None
        self.pending.append(self.position)
        tally = self._read_back()
        if tally.outcome == APPLIED:
            return StepStats(tally.loss, tally.nll, tally.step_tokens, tally.grad_norm)
        return Skipped.OVERFLOW if tally.outcome == OVERFLOW else Skipped.NON_FINITE

    def _read_back(self) -> Tally:
        """The device's counters into the state (one synchronisation), and the sampler's position
        after the last step they counted."""
        tally = self.optimizer_step.counters.read()
        state = self.state
        counted = tally.step - state.step + tally.skipped - state.skipped
        if counted:
            self.position = self.pending[counted - 1]
        self.pending.clear()
        state.step, state.skipped, state.bad_in_row = tally.step, tally.skipped, tally.bad_in_row
        state.tokens += tally.tokens
        return tally

    # ------------------------------------------------------------ validation
    def dev_loss(self, split: Split) -> DevPass:
        """The teacher-forced pass over a split: loss, NLL, ACT step statistics, argmax accuracy."""
        return dev_loss(self.model, self.objective, split, self.dev_tokens, self.label_smoothing, self.device)

    def predict(self, split: Split, limit: int | None = None) -> tuple[list[list[int]], list[list[int]]]:
        """Greedy outputs and references for the first `limit` examples of a split."""
        return greedy_outputs(self.model, split, self.decode_options, limit)

    def samples(self, count: int) -> list[tuple[str, str, str]]:
        """The first `count` dev examples as (source, reference, greedy output) text."""
        split = self.data.splits["dev"]
        preds, refs = self.predict(split, limit=count)
        src, tgt = self.data.src_vocab, self.data.tgt_vocab
        return [
            (src.decode(split.pair(i)[0].tolist()), tgt.decode(ref), tgt.decode(pred))
            for i, (pred, ref) in enumerate(zip(preds, refs, strict=True))
        ]

    def validate(self) -> dict[str, Any]:
        """Dev loss and perplexity, ACT statistics, and the metrics of the data's kind."""
        dev = self.dev_loss(self.data.splits["dev"])
        return {
            "step": self.state.step,
            "train_minutes": self.state.train_seconds / 60,
            "train_tokens": self.state.tokens,
            "dev_loss": dev.loss,
            "dev_ppl": perplexity(dev.nll, 1),
            "dev_forced_acc": dev.forced.char,  # teacher-forced token accuracy, as OpenNMT-py logs it
            **dev.ponder,
            **self.metrics(self.data, self.predict),
        }

    # ------------------------------------------------------------------ run
    def fit(self, resume: bool = False, init: Callable[[], None] | None = None) -> dict[str, Any]:
        """Train until a limit ends the run (`train.steps`, `train.max_minutes`, early stopping),
        validating and checkpointing on the way, then average (train.average_last). `init` (e.g.
        a call of `init_from`) starts a run that has no checkpoint to resume from. `outcome`
        says how it ended; a run that had ended before trains nothing and averages nothing.

        The run directory is locked for the whole run; if anything fails or interrupts training
        after a step that no checkpoint holds yet, that step is saved before the error goes on."""
        with RunLock(self.run_dir) if self.env.main else contextlib.nullcontext():
            self.logger = RunLogger(self.run_dir, self.env.main)
            try:
                self._start(resume, init)
                ended = self._ended_before()
                if ended is not None:
                    self._log(ended)
                    self.outcome = Outcome(self.state.step, ended, already=True)
                    return self._last_metrics()
                try:
                    reason = self._loop()
                except BaseException as exc:
                    self._save_on_the_way_out(exc)
                    if self.env.lost_peer(exc):
                        raise self._peer_lost(exc) from exc
                    raise
                self.outcome = Outcome(self.state.step, reason)
                if self.env.main and self.settings.average_last is not None:
                    average = self.run.average_at_end(
                        self.state, self.settings.best_metric, self._validate_weights
                    )
                    self._log(average)
                    self.outcome.average = average
                return self._last_metrics()
            finally:
                self.logger.close()
                self.logger = None

    def _start(self, resume: bool, init: Callable[[], None] | None) -> None:
        if self.env.main:
            self.run.remove_leftovers()
            if self.settings.average_last is not None:
                self.run.check_average_output()  # refused now, not after the training
        resumed = resume and self.resume()
        if init is not None:
            if resumed:
                raise TrainingError(
                    f"{self.run_dir} already holds checkpoints; a run starts from other weights only "
                    "in a new --run-dir (resuming this one continues its own)"
                )
            init()
        self.saved_step = self.state.step

    def _ended_before(self) -> str | None:
        """Why a run that is resumed has nothing left to train, if it has not."""
        s, state = self.settings, self.state
        if s.max_minutes is not None and state.train_seconds >= 60 * s.max_minutes:
            return f"train.max_minutes={s.max_minutes} already spent; nothing to train (raise it to go on)"
        if s.patience is not None and state.stale >= s.patience:
            return (
                f"stopped early: {state.stale} validations without a better dev {s.best_metric}; "
                "nothing to train (raise train.patience to go on)"
            )
        if state.step >= s.steps:
            return f"train.steps={s.steps} already reached; nothing to train (raise it to go on)"
        return None

    def _last_metrics(self) -> dict[str, Any]:
        return self.state.history[-1] if self.state.history else {}

    def batch_stream(self) -> BatchStream:
        """The training batches from the sampler's position, built ahead (`train.prefetch`) and on
        the device, `train.accumulate` to a step."""
        s = self.settings
        collate = partial(self.objective.collate, self.train_split, multiple=s.pad_to_multiple)
        return BatchStream(
            self.sampler, collate, s.accumulate, self.device, steps_ahead(s.prefetch, self.device)
        )

    def _loop(self) -> str:
        """Update until a limit ends the run; why it ended. The steps' outcomes are read back from
        the device only where something is due (`_read_due`), so between read-backs the host
        queues each step without waiting for the last."""
        s = self.settings
        now = time.monotonic()
        clock = Clock(last_save=now, last_validation=self.state.train_seconds, window_start=now)
        self._start_counters()
        stream = self.batch_stream()
        progress = TrainingProgress(self.console, self.show, s.steps, s.max_minutes)
        kernels = attention_kernels(self.device, s.attention_kernel)
        with progress, stream, kernels, self._deferring():
            progress.advance(self.state.step, self.state.train_seconds)
            while True:
                self._attempt(next(stream))
                progress.advance(self.state.step + len(self.pending), self.state.train_seconds)
                if not self._read_due(clock):
                    continue
                tally = self._read(clock)
                if tally.outcome != APPLIED:
                    continue  # as after any skipped step: nothing is due until an update
                if self.state.step % s.log_every == 0 or self.state.step == s.steps:
                    self._log_stats(tally, clock, progress)
                reason = self._validate_save_or_stop(clock, progress)
                if reason is not None:
                    self._log(f"step {self.state.step}: {reason}")
                    return reason

    @contextlib.contextmanager
    def _deferring(self) -> Iterator[None]:
        self.deferred = True
        try:
            yield
        finally:
            self.deferred = False

    def _start_counters(self) -> None:
        self.optimizer_step.start(self.state.step, self.state.skipped, self.state.bad_in_row)

    def _attempt(self, step: Prepared) -> None:
        """One update from a prepared step's batches, its (host) time counted."""
        if step.position["epoch"] != self.shapes_epoch:
            self._report_shapes(step.position["epoch"])
        began = time.monotonic()
        self.pending.append(step.position)
        self.train_step(step.batches)
        self.state.train_seconds += time.monotonic() - began

    def _read_due(self, clock: Clock) -> bool:
        """Whether to read the counters back now: when the step, if the steps since the last
        read-back all made updates, is one at which something is due (logging, validation, a
        checkpoint, the end); a single process also reads back when a time limit is due (ranks
        measure time apart, so with several the limits are checked at those read-backs)."""
        s, ahead = self.settings, self.state.step + len(self.pending)
        if ahead >= s.steps or len(self.pending) >= READ_BACK_AT_LEAST:
            return True
        if any(ahead % every == 0 for every in (s.log_every, s.validate_every, s.save_every)):
            return True
        return self.env.world == 1 and self._time_due(clock)

    def _time_due(self, clock: Clock) -> bool:
        """Whether a limit in minutes is due by this process's clock."""
        s, seconds = self.settings, self.state.train_seconds
        due = s.max_minutes is not None and seconds >= 60 * s.max_minutes
        every = s.validate_every_minutes
        due = due or (every is not None and seconds - clock.last_validation >= 60 * every)
        every = s.save_every_minutes
        return due or (every is not None and time.monotonic() - clock.last_save >= 60 * every)

    def _read(self, clock: Clock) -> Tally:
        """Read the counters back (the wait for the device counts as training time); log the
        skipped updates since the last read-back, and end the run after train.max_bad_steps
        non-finite ones in a row."""
        began, skipped = time.monotonic(), self.state.skipped
        tally = self._read_back()
        self.state.train_seconds += time.monotonic() - began
        clock.window_tokens += tally.tokens
        state = self.state
        if state.skipped > skipped:
            scale = f"; loss scale now {self.scaler.get_scale():g}" if self.scaler.is_enabled() else ""
            self._log(
                f"step {state.step}: {state.skipped - skipped} update(s) skipped since the last read-back "
                f"(non-finite loss or gradient, or an fp16 overflow){scale}; "
                f"{state.bad_in_row} non-finite in a row"
            )
        if state.bad_in_row >= self.settings.max_bad_steps:
            raise TrainingError(
                f"{state.bad_in_row} non-finite losses in a row at step {state.step} (seen when the step "
                "counters were read back, every train.log_every steps; the steps after them changed "
                "nothing); lower train.lr_scale, set train.clip_norm, or check the data"
            )
        return tally

    def _report_shapes(self, epoch: int) -> None:
        """Log how many distinct batch shapes `epoch` has, as its first step comes (data.pad_to_multiple
        makes them few, for the plans cuDNN and cuBLAS keep per shape)."""
        s, self.shapes_epoch = self.settings, epoch
        batches = self.sampler.epoch_batches(epoch)
        shapes = set(self.objective.shapes(self.train_split, batches, s.pad_to_multiple))
        self._log(
            f"epoch {epoch}: {len(batches)} batches of {len(shapes)} distinct shapes (rows, source, "
            f"target positions; data.pad_to_multiple={s.pad_to_multiple})"
        )

    def _log_stats(self, stats: Tally, clock: Clock, progress: TrainingProgress) -> None:
        """The training statistics of the steps since the last ones (train.log_every)."""
        now = time.monotonic()
        lr = float(self.optimizer.param_groups[0]["lr"])  # a device tensor: read back with the rest
        row = {
            "loss": stats.loss,
            "nll": stats.nll,
            "ppl": perplexity(stats.nll, 1),
            "lr": lr,
            "grad_norm": stats.grad_norm,
            **self.throughput.row(clock.window_tokens, max(now - clock.window_start, 1e-9)),
        }
        assert self.logger is not None
        self.logger.scalars(self.state.step, {f"train/{k}": v for k, v in row.items()})
        shown = f"loss {stats.loss:.3f} lr {lr:.2e} " + self.throughput.shown(row)
        progress.stats(self.state.step, self.state.train_seconds, shown)
        clock.window_tokens, clock.window_start = 0, now

    def _validate_save_or_stop(self, clock: Clock, progress: TrainingProgress) -> str | None:
        """Validate and save when due (a better validation is saved at once: the best checkpoint
        is always kept); why the run ends here, if it does."""
        s, step, seconds = self.settings, self.state.step, self.state.train_seconds
        out_of_time = self._agree(s.max_minutes is not None and seconds >= 60 * s.max_minutes)
        every_minutes = s.validate_every_minutes
        validate_due = self._agree(
            every_minutes is not None and seconds - clock.last_validation >= 60 * every_minutes
        )
        improved = stop_early = False
        if step % s.validate_every == 0 or step == s.steps or validate_due or out_of_time:
            improved = self._agree(self._validate_and_record(progress))
            stop_early = self._agree(s.patience is not None and self.state.stale >= s.patience)
            clock.last_validation = seconds
        minutes = s.save_every_minutes
        due_time = minutes is not None and time.monotonic() - clock.last_save >= 60 * minutes
        if step % s.save_every == 0 or step == s.steps or due_time or out_of_time or improved or stop_early:
            if self.env.main:
                self.save()
            self.env.barrier()
            clock.last_save = time.monotonic()
        if out_of_time:
            return f"train.max_minutes={s.max_minutes} of training time reached"
        if stop_early:
            return (
                f"stopped early after {self.state.stale} validations without a better dev {s.best_metric} "
                f"(the best at step {self.state.best_step})"
            )
        return f"train.steps={s.steps} reached" if step >= s.steps else None

    def _agree(self, flag: bool) -> bool:
        """True when any rank says so, so all ranks stop or validate together (time differs)."""
        if self.env.world == 1:
            return flag
        value = torch.tensor([float(flag)], device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def _validate_and_record(self, progress: TrainingProgress) -> bool:
        """Validate (on the main rank) and track the best step; True if this one is the best."""
        improved = False
        if self.env.main:
            metrics = self.validate()
            self.state.history.append(metrics)
            assert self.logger is not None
            self.logger.scalars(self.state.step, {f"valid/{k}": v for k, v in metrics.items() if k != "step"})
            shown = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items() if k != "step")
            progress.print(f"step {self.state.step}: {shown}")
            metric = self.settings.best_metric
            improved = self.state.track_best(metric, float(metrics[f"dev_{metric}"]))
        self.env.barrier()
        return improved

    # -------------------------------------------------------------- the end
    def _validate_weights(self, weights: dict[str, Tensor]) -> dict[str, Any]:
        """Validate other weights in the model's place, then put the trained ones back."""
        trained = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        load_weights(self.model, weights)
        try:
            return self.validate()
        finally:
            self.model.load_state_dict(trained)

    def _save_on_the_way_out(self, exc: BaseException) -> None:
        """Save the steps no checkpoint holds yet before `exc` ends the run; not when saving is
        what failed (a full disk would refuse it again, with a second error after the first), nor
        when the device cannot say which steps the weights hold."""
        if not self.env.main or self.save_failed:
            return
        try:
            if self.pending:
                self._read_back()  # the steps the weights hold, and the data position after them
        except Exception:  # the device itself failed
            return
        if self.state.step <= self.saved_step:
            return
        try:
            path = self.save()
        except Exception as again:  # the original error matters more than this one
            self.warn(f"could not save step {self.state.step} after {type(exc).__name__}: {again}")
            return
        self.warn(f"training stopped by {type(exc).__name__}; steps so far saved in {path}")

    def _peer_lost(self, exc: BaseException) -> TrainingError:
        saved = step_checkpoints(self.run.checkpoints)
        return peer_lost(exc, self.env.rank, self.env.world, saved[-1] if saved else None)

    def _log(self, line: str) -> None:
        if self.logger is not None:
            self.logger.text(line)

    def warn(self, message: str) -> None:
        """A warning on stderr and in train.log, whether or not the progress display is on."""
        Console(stderr=True).print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)
        self._log(f"warning: {message}")
