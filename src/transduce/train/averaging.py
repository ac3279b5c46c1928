"""train.average_last at the end of a run: the mean of its last checkpoints from the stable part
of training, validated and kept in <run>/averaged only where it is at least as good as the best
checkpoint, so that decoding with <run>/averaged never gets a worse model than the run's best,
nor a stale one."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import TrainConfig
from ..fileio import OutputError, check_output_dir
from ..store.average import average_checkpoints
from ..store.checkpoint import Checkpoint, step_checkpoints
from ..store.load import write_model_checkpoint
from .run_dir import RunLayout, writing
from .state import TrainingError, TrainState
from .validation import improves


@dataclass(frozen=True, slots=True)
class Keeping:
    """What the run directory reads of the config, read once: what it keeps and averages."""

    keep_last: int
    average_last: int | None
    warmup: int
    save_every: int
    save_every_minutes: float | None

    @classmethod
    def from_config(cls, t: TrainConfig) -> Keeping:
        return cls(t.keep_last, t.average_last, t.warmup, t.save_every, t.save_every_minutes)


@dataclass(frozen=True, slots=True)
class Kept:
    """A checkpoint of the run as the average sees it."""

    path: Path
    step: int
    seconds: float | None  # training seconds when it was written (None: not recorded)


@dataclass(frozen=True, slots=True)
class Window:
    """What the automatic average takes of the run's last `asked` checkpoints, and why it leaves
    out each other one."""

    asked: int
    available: int  # checkpoints the run has (fewer than asked for: said so)
    chosen: list[Kept]
    left_out: list[str]


def stable_window(kept: list[Kept], keeping: Keeping) -> Window:
    """Of the newest train.average_last checkpoints, those from the stable part of training: past
    the warmup (its learning rates move the weights far, so averaging across them mixes unrelated
    points) and within the last train.average_last save intervals before the newest (in steps,
    and in training minutes when saving by time)."""
    n = keeping.average_last
    assert n is not None
    newest = kept[-n:]
    last = newest[-1]
    chosen, left_out = [], []
    for k in newest:
        if k.step <= keeping.warmup:
            left_out.append(f"step {k.step} (within the warmup of {keeping.warmup} steps)")
        elif last.step - k.step >= n * keeping.save_every:
            left_out.append(
                f"step {k.step} (over {n} x train.save_every={keeping.save_every} steps before the last)"
            )
        elif _minutes_before(k, last) >= n * (keeping.save_every_minutes or float("inf")):
            left_out.append(
                f"step {k.step} (over {n} x train.save_every_minutes={keeping.save_every_minutes:g} "
                "training minutes before the last)"
            )
        else:
            chosen.append(k)
    return Window(n, len(kept), chosen, left_out)


def _minutes_before(k: Kept, last: Kept) -> float:
    """Training minutes from `k` to `last`; 0 where either was not recorded (older checkpoints)."""
    if k.seconds is None or last.seconds is None:
        return 0.0
    return (last.seconds - k.seconds) / 60


def steps_phrase(kept: list[Kept]) -> str:
    """'1 checkpoint (step 4)' or '2 checkpoints (steps 4, 6)'."""
    steps = ", ".join(str(k.step) for k in kept)
    plural = "s" if len(kept) != 1 else ""
    return f"{len(kept)} checkpoint{plural} (step{plural} {steps})"


class EndAverage:
    """The automatic average of one run (train.average_last)."""

    def __init__(self, layout: RunLayout, keeping: Keeping) -> None:
        self.layout, self.keeping = layout, keeping
        self.averaged = layout.averaged

    def check_output(self) -> None:
        """Refuse, before training, an <run>/averaged that train.average_last would replace but
        that `transduce average` did not write."""
        try:
            check_output_dir(self.averaged, "average")
        except OutputError:
            raise TrainingError(
                f"train.average_last would replace {self.averaged}, which `transduce average` did not "
                "write; move it away or set train.average_last=null"
            ) from None

    def __call__(
        self, state: TrainState, metric: str, validate: Callable[[dict[str, Tensor]], dict[str, Any]]
    ) -> str:
        """train.average_last: average the last checkpoints of the stable part of training
        (`stable_window`), validate the average (`validate` scores weights in the model's place)
        and keep it in <run>/averaged only if it is at least as good by `metric`
        (train.best_metric) as the best checkpoint, so that decoding with <run>/averaged never
        gets a worse model than the run's best, nor a stale one. What was done, in one line."""
        kept = [
            Kept(p, int(p.name[5:]), state.saved_at.get(p.name))
            for p in step_checkpoints(self.layout.checkpoints)
        ]
        window = stable_window(kept, self.keeping)
        if not window.chosen:
            return self._no_average(window, "no checkpoint to average")
        averaged = average_checkpoints([k.path for k in window.chosen])
        metrics = validate(averaged.weights)
        value = float(metrics[f"dev_{metric}"])
        scores = f"dev {metric} {value:.4g} against {_best_score(state)}"
        if math.isfinite(value) and (
            state.best_value is None or not improves(metric, state.best_value, value)
        ):
            self._keep_average(averaged, window, metrics)
            return (
                f"averaged {steps_phrase(window.chosen)} into {self.averaged}: {scores}; "
                f"translate with {self.averaged}{_left_out(window)}"
            )
        what = f"the average of {steps_phrase(window.chosen)} scores {scores}, so it is not kept"
        return self._no_average(window, what)

    def _keep_average(self, averaged: Checkpoint, window: Window, metrics: dict[str, Any]) -> None:
        """Write the average, with its own dev scores, to <run>/averaged (replacing an earlier one)."""
        measured = averaged.meta.model_copy(update={"metrics": metrics})
        ck = Checkpoint(averaged.path, averaged.config, measured, averaged.weights)
        with writing(self.averaged):
            write_model_checkpoint(self.averaged, ck, "average", tuple(k.path for k in window.chosen))

    def _no_average(self, window: Window, what: str) -> str:
        """No average kept: an earlier one (of this run, at an earlier end of training) is
        removed, so <run>/averaged is never stale."""
        removed = ""
        if self.averaged.exists():
            check_output_dir(self.averaged, "average")  # only `average`'s output, as check_output
            shutil.rmtree(self.averaged)
            removed = f" (the earlier {self.averaged} removed)"
        return f"{what}{removed}; translate with {self.layout.root} (its best checkpoint){_left_out(window)}"


def _best_score(state: TrainState) -> str:
    if state.best_value is None:
        return "no best checkpoint (no validation since the best was lost)"
    return f"{state.best_value:.4g} for the best checkpoint (step {state.best_step})"


def _left_out(window: Window) -> str:
    """Why fewer checkpoints than train.average_last were averaged, if they were."""
    parts = []
    if window.available < window.asked:
        parts.append(f"train.average_last={window.asked}, but the run has {window.available}")
    if window.left_out:
        parts.append(f"left out: {'; '.join(window.left_out)}")
    return f" ({'; '.join(parts)})" if parts else ""
