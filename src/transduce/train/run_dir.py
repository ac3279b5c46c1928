"""A training run's directory: its layout, the lock one training process holds on it, and the
checks of where a run may go. One place for them, so that no module spells a name of its own:

    <run>/checkpoints/ckpt-NNNNNNNN   the last train.keep_last checkpoints, and the best
    <run>/best.json                   the best one's step, by train.best_metric
    <run>/averaged                    train.average_last's mean of the last ones, when kept
    <run>/train.log, <run>/tb         the plain-text log and TensorBoard's event files
    <run>/data                        a generated task's dataset (data.task)
    <run>/.lock                       held by the process training into the run

Decoding finds the checkpoints and best.json by the names in store/checkpoint.py, a layer below.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from safetensors import SafetensorError

from ..fileio import OutputError, enclosing_output, within
from ..store.checkpoint import BEST, CHECKPOINTS, checkpoint_name
from .state import TrainingError


@dataclass(frozen=True, slots=True)
class RunLayout:
    """Where the files of the run at `root` lie."""

    root: Path

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / checkpoint_name(step)

    @property
    def best(self) -> Path:
        return self.root / BEST

    @property
    def averaged(self) -> Path:
        return self.root / "averaged"

    @property
    def log(self) -> Path:
        return self.root / "train.log"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tb"

    @property
    def data(self) -> Path:
        return self.root / "data"


class RunLock:
    """An exclusive lock on a run directory, held while one process trains into it.

    The kernel drops an `flock` when its process dies, so a lock left by a killed run is
    taken over at once; the lock file names the holder for the error message. A tool that
    does more with a run than train it (train, then evaluate) holds a lock of its own `name`
    around the whole, since training takes the directory's `.lock` itself."""

    def __init__(self, run_dir: Path, name: str = ".lock", holder: str = "transduce train") -> None:
        self.path = Path(run_dir) / name
        self.holder = holder
        self.file: IO[str] | None = None

    def __enter__(self) -> RunLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            file = self.path.open("a+", encoding="utf-8")
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot take the run directory's lock: {exc.strerror}") from None
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            holder = file.read().strip() or "another process"
            file.close()
            raise OutputError(
                f"{self.path.parent} is in use by {holder}; wait for it to finish or use another --run-dir"
            ) from None
        file.seek(0)
        file.truncate()
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        file.write(f"process {os.getpid()} on {socket.gethostname()} ({self.holder}, since {started})\n")
        file.flush()
        self.file = file
        return self

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            fcntl.flock(self.file, fcntl.LOCK_UN)
            self.file.close()
            self.file = None


def run_directory(
    config: str,
    given: Path | None,
    resume: bool,
    dataset: str | None = None,
    init_from: Path | None = None,
) -> Path:
    """Where a run's checkpoints and logs go: `given`, else runs/<config name>. Starting afresh
    (not `resume`) where checkpoints already are is an OutputError: they would be mixed. So is a
    run directory in the `dataset` or in any other command's output (a dataset, a checkpoint):
    the run would write among its files, and writing that output again would delete the run;
    and a fine-tuning run (`init_from`) inside the run it starts from, or in a run directory
    that already holds checkpoints (it would resume them and ignore `init_from`)."""
    run = given or Path("runs") / Path(config).stem
    layout = RunLayout(run)
    if init_from is not None and run.resolve() in (init_from.resolve(), *init_from.resolve().parents):
        raise OutputError(f"the run directory {run} holds --init-from {init_from}; give a new --run-dir")
    if dataset is not None and within(run, Path(dataset)):
        raise OutputError(
            f"{run} is or lies inside the dataset {dataset}; give --run-dir a folder outside it"
        )
    inside = enclosing_output(run)
    if inside is not None:
        raise OutputError(
            f"{run} is or lies inside {inside[0]}, which `transduce {inside[1]}` wrote; "
            "give --run-dir a folder outside it"
        )
    for folder in (run, layout.checkpoints):
        if folder.exists() and not folder.is_dir():
            raise OutputError(f"{folder} is not a directory; give --run-dir a folder")
    holds_checkpoints = layout.checkpoints.is_dir() and any(layout.checkpoints.iterdir())
    if holds_checkpoints and init_from is not None:
        raise OutputError(
            f"{run} already holds checkpoints, and --init-from starts a new run; give a new --run-dir "
            f"(or leave out --init-from to resume {run})"
        )
    if holds_checkpoints and not resume:
        raise OutputError(f"{run} already holds checkpoints; use --resume or another --run-dir")
    if not holds_checkpoints and layout.best.exists():  # a run writes it with a checkpoint
        raise OutputError(
            f"{layout.best} exists but {run} holds no checkpoints, so it is not this run's and "
            "training would replace it; move it away or give another --run-dir"
        )
    return run


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """A write of the run that fails (a full disk, a folder turned read-only) as one TrainingError
    naming `path`. Checkpoints are built in a temporary sibling, so the earlier ones are intact."""
    try:
        yield
    except (OSError, SafetensorError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TrainingError(
            f"cannot write {path}: {reason}; the run's earlier checkpoints are intact"
        ) from None
