"""The training progress display, apart from the loop that feeds it: a bar with the time elapsed
and an ETA that counts whichever limit ends the run first (`train.steps`, or the training minutes
of `train.max_minutes`), the latest training statistics, and validation lines. A console that is
not a terminal (a log file, a pipe) gets plain lines instead of the bar, with the same elapsed
time and ETA when the steps are the limit (the minutes limit counts its own)."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class Limit(enum.Enum):
    STEPS = "steps"
    MINUTES = "minutes"


def first_limit(step: int, steps: int, seconds: float, max_minutes: float | None) -> Limit:
    """The limit that ends the run first at the pace so far: the training minutes when a larger
    share of them than of the steps is spent."""
    if max_minutes is None:
        return Limit.STEPS
    return Limit.MINUTES if seconds / (60 * max_minutes) > step / steps else Limit.STEPS


def clock(seconds: float) -> str:
    """A duration as m:ss, or h:mm:ss from an hour."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class TrainingProgress:
    """What the loop tells the user as it trains; silent unless `show`. Elapsed time and the ETA
    are wall-clock time since the loop started in this process (validation and saving included),
    so a resumed run's ETA follows the pace of this machine and load, not of the earlier runs."""

    def __init__(
        self,
        console: Console,
        show: bool,
        steps: int,
        max_minutes: float | None,
        *,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console, self.show = console, show
        self.steps, self.max_minutes = steps, max_minutes
        self.limit = Limit.STEPS
        self.now = now
        self.start: tuple[float, int] | None = None  # (time, step) of the first update seen
        columns = (
            TextColumn("[bold]train"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
        )
        self.progress = Progress(*columns, console=console, disable=not show)
        self.task: TaskID | None = None

    def __enter__(self) -> TrainingProgress:
        self.progress.__enter__()
        self.task = self.progress.add_task("train", total=self.steps, count="", stats="")
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def advance(self, step: int, seconds: float) -> None:
        """After an update: `step` updates and `seconds` of training time so far (across resumes).
        The bar starts again (its ETA too) when the other limit turns out to come first."""
        assert self.task is not None
        if self.start is None:
            self.start = (self.now(), step)
        limit = first_limit(step, self.steps, seconds, self.max_minutes)
        total, done = (self.steps, step) if limit is Limit.STEPS else (self.max_minutes, seconds / 60)
        if limit is not self.limit:
            self.limit = limit
            self.progress.reset(self.task, total=total, completed=done)
        self.progress.update(self.task, total=total, completed=done, count=self.count(step, seconds))

    def count(self, step: int, seconds: float) -> str:
        """How far the run is towards the limit the bar counts."""
        if self.limit is Limit.STEPS:
            return f"{step}/{self.steps}"
        return f"step {step}, {seconds / 60:.3g}/{self.max_minutes:g} min"

    def stats(self, step: int, seconds: float, shown: str) -> None:
        """The latest training statistics (each `train.log_every` steps)."""
        assert self.task is not None
        self.progress.update(self.task, stats=shown)
        if self.show and not self.console.is_terminal:  # a log file gets plain lines
            where = self.timed(step) if self.limit is Limit.STEPS else self.count(step, seconds)
            self.console.print(f"{where}: {shown}", highlight=False, soft_wrap=True)  # one line each

    def timed(self, step: int) -> str:
        """'step 300/1200, 1:02 elapsed, ETA 3:05': the ETA at this process's pace so far."""
        assert self.start is not None
        began, first = self.start
        elapsed = self.now() - began
        eta = "?" if step <= first else clock(elapsed / (step - first) * max(self.steps - step, 0))
        return f"step {step}/{self.steps}, {clock(elapsed)} elapsed, ETA {eta}"

    def print(self, line: str) -> None:
        """A line above the bar (a validation's scores), unwrapped (a log keeps it on one line)."""
        self.progress.console.print(line, soft_wrap=True)
