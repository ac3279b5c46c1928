"""The training loop's clock: what is due when (a read-back of the device's step counters, the
statistics in the log, validation, a checkpoint) and why a run ends, by steps and by minutes of
training time. Ranks measure time apart, so a limit in minutes is agreed by all of them (`agree`)
where it decides what every rank does."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from ..config import TrainConfig
from .state import TrainState

# The counters are read back at least this often (steps), however far apart the logging is.
READ_BACK_AT_LEAST = 1000


@dataclass(frozen=True, slots=True)
class Cadence:
    """What the clock reads of `train.*`, read once."""

    steps: int
    log_every: int
    validate_every: int
    validate_every_minutes: float | None
    save_every: int
    save_every_minutes: float | None
    max_minutes: float | None
    patience: int | None
    best_metric: str

    @classmethod
    def from_config(cls, t: TrainConfig) -> Cadence:
        """`best_metric` as validation names it: with train.best_pair, that pair's (bleu_en-de)."""
        read = {f.name: getattr(t, f.name) for f in fields(cls) if f.name != "best_metric"}
        return cls(**read, best_metric=t.best_key)

    def out_of_time(self, seconds: float) -> bool:
        return self.max_minutes is not None and seconds >= 60 * self.max_minutes

    def out_of_patience(self, state: TrainState) -> bool:
        return self.patience is not None and state.stale >= self.patience

    def ended_before(self, state: TrainState) -> str | None:
        """Why a run that is resumed has nothing left to train, if it has not."""
        if self.out_of_time(state.train_seconds):
            return f"train.max_minutes={self.max_minutes} already spent; nothing to train (raise it to go on)"
        if self.out_of_patience(state):
            return (
                f"stopped early: {state.stale} validations without a better dev {self.best_metric}; "
                "nothing to train (raise train.patience to go on)"
            )
        if state.step >= self.steps:
            return f"train.steps={self.steps} already reached; nothing to train (raise it to go on)"
        return None


@dataclass(slots=True)
class Outcome:
    """How `fit` ended: at which step and why, whether the run had ended before (nothing was
    trained), and what train.average_last did."""

    step: int
    reason: str
    already: bool = False
    average: str | None = None


@dataclass(frozen=True, slots=True)
class Due:
    """What a step that was read back calls for, agreed by every rank."""

    validate: bool
    out_of_time: bool


class Clock:
    """The loop's marks in time: the last save (wall clock), the last validation (training time)
    and the window of the throughput in the log (wall clock, and the tokens trained in it)."""

    def __init__(self, cadence: Cadence, train_seconds: float) -> None:
        now = time.monotonic()
        self.cadence = cadence
        self.last_save, self.last_validation = now, train_seconds
        self.window_start, self.window_tokens = now, 0

    def read_due(self, ahead: int, queued: int, seconds: float, single: bool) -> bool:
        """Whether to read the counters back now, `queued` steps after the last read-back: when
        step `ahead` (the step, if those all made updates) is one at which something is due
        (logging, validation, a checkpoint, the end); a `single` process also reads back when a
        time limit is due (with several, the limits are checked at those read-backs)."""
        c = self.cadence
        if ahead >= c.steps or queued >= READ_BACK_AT_LEAST:
            return True
        if any(ahead % every == 0 for every in (c.log_every, c.validate_every, c.save_every)):
            return True
        return single and self._time_due(seconds)

    def _time_due(self, seconds: float) -> bool:
        """Whether a limit in minutes is due by this process's clock."""
        c = self.cadence
        every = c.validate_every_minutes
        due = c.out_of_time(seconds) or (every is not None and seconds - self.last_validation >= 60 * every)
        return due or self._save_time_due()

    def _save_time_due(self) -> bool:
        every = self.cadence.save_every_minutes
        return every is not None and time.monotonic() - self.last_save >= 60 * every

    def log_due(self, step: int) -> bool:
        return step % self.cadence.log_every == 0 or step == self.cadence.steps

    def due(self, step: int, seconds: float, agree: Callable[[bool], bool]) -> Due:
        """Whether to validate at `step`, `seconds` into training, and whether time is up."""
        c = self.cadence
        out_of_time = agree(c.out_of_time(seconds))
        every = c.validate_every_minutes
        by_minutes = agree(every is not None and seconds - self.last_validation >= 60 * every)
        validate = step % c.validate_every == 0 or step == c.steps or by_minutes or out_of_time
        return Due(validate, out_of_time)

    def save_due(self, step: int, due: Due, *, improved: bool, stop_early: bool) -> bool:
        """Whether to save at `step`: by the step or the minutes since the last save, at the end,
        and at once after a better validation (the best checkpoint is always kept)."""
        c = self.cadence
        by_step = step % c.save_every == 0 or step == c.steps
        return by_step or self._save_time_due() or due.out_of_time or improved or stop_early

    def validated(self, seconds: float) -> None:
        self.last_validation = seconds

    def saved(self) -> None:
        self.last_save = time.monotonic()

    def window(self) -> tuple[int, float]:
        """The tokens trained since the last call, and the wall-clock seconds they took."""
        now = time.monotonic()
        tokens, seconds = self.window_tokens, max(now - self.window_start, 1e-9)
        self.window_tokens, self.window_start = 0, now
        return tokens, seconds

    def end_reason(self, state: TrainState, due: Due, *, stop_early: bool) -> str | None:
        """Why the run ends at this step, if it does."""
        c = self.cadence
        if due.out_of_time:
            return f"train.max_minutes={c.max_minutes} of training time reached"
        if stop_early:
            return (
                f"stopped early after {state.stale} validations without a better dev {c.best_metric} "
                f"(the best at step {state.best_step})"
            )
        return f"train.steps={c.steps} reached" if state.step >= c.steps else None
