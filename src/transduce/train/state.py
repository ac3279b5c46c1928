"""What a run carries from step to step and across resumes (saved in every checkpoint's
trainer.json), and the error that ends a run."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..store.checkpoint import CheckpointError
from .validation import improves


class TrainingError(RuntimeError):
    """Training cannot go on (repeated non-finite losses, a checkpoint of another model)."""


def peer_lost(exc: BaseException, rank: int, world: int, saved: Path | None) -> TrainingError:
    """The error a surviving process of a multi-process run ends with when another one is gone."""
    text = re.sub(r"^\[[^\]]*\]\s*", "", str(exc).strip())  # gloo's source location
    cause = text.split(". ")[0].splitlines()[0] if text else type(exc).__name__
    where = f"the steps so far are in {saved}" if saved is not None else "no checkpoint was written yet"
    return TrainingError(
        f"process {rank} of {world}: another process of the run stopped or cannot be reached ({cause}); "
        f"{where}: start the same command with --resume on every node to go on"
    )


@dataclass(slots=True)
class TrainState:
    """Counters saved with every checkpoint (slots: a misspelt field is an error, not a new one)."""

    step: int = 0
    bad_in_row: int = 0
    skipped: int = 0
    best_value: float | None = None  # of train.best_metric
    best_step: int | None = None
    stale: int = 0  # validations since the best one
    train_seconds: float = 0.0  # time spent in training steps, across resumes (not validation)
    tokens: int = 0  # target tokens trained on (padding excluded, all ranks), across resumes
    history: list[dict[str, Any]] = field(default_factory=list)
    # The training seconds at which each kept checkpoint was written (by directory name): the
    # automatic average takes only checkpoints of the last save intervals of training time.
    saved_at: dict[str, float] = field(default_factory=dict)

    def saved(self) -> dict[str, Any]:
        """The state as trainer.json holds it."""
        return asdict(self)

    @classmethod
    def restored(cls, saved: dict[str, Any], where: Path) -> TrainState:
        """The state a checkpoint saved; older checkpoints name the best value `best_loss`."""
        state = dict(saved)
        if "best_loss" in state:  # checkpoints written before train.best_metric
            state["best_value"] = state.pop("best_loss")
        unknown = state.keys() - {f.name for f in fields(cls)}
        if unknown:
            raise CheckpointError(f"{where}: damaged training state (unknown {', '.join(sorted(unknown))})")
        return cls(**state)

    def track_best(self, metric: str, value: float) -> bool:
        """Count a validation's `value` of `metric` (train.best_metric): True if it is the best so
        far (the step is then the best one), else one more validation since the best."""
        if math.isfinite(value) and improves(metric, value, self.best_value):
            self.best_value, self.best_step, self.stale = value, self.step, 0
            return True
        self.stale += 1
        return False

    def forget_best(self) -> None:
        """No best yet: the next validation chooses one, whatever its value."""
        self.best_value = self.best_step = None
