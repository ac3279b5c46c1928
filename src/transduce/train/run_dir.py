"""A run directory's housekeeping: resuming from its newest intact checkpoint on the same data,
starting from another run's weights, saving and pruning checkpoints, the best one (best.json),
and the automatic average of the last ones (<run>/averaged).

    <run>/checkpoints/ckpt-NNNNNNNN   the last train.keep_last checkpoints, and the best
    <run>/best.json                   the best one's step, by train.best_metric
    <run>/averaged                    train.average_last's mean of the last ones, when kept
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from torch import Tensor

from ..config import Config, TrainConfig, architecture_differences
from ..data.meta import DataFacts
from ..fileio import OutputError, check_output_dir, remove_stale_temporaries, write_text_atomic
from ..store.average import average_checkpoints
from ..store.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    load_weights,
    save_checkpoint,
    state_tensors,
    step_checkpoints,
    vocab_digest,
    vocab_files,
)
from ..store.load import resolve_checkpoint, write_model_checkpoint
from ..store.meta import CheckpointMeta, DataIdentity, InitSource
from .build import Parts
from .optimizer_state import optimizer_state, restore_optimizer
from .state import TrainingError, TrainState
from .validation import improves


def checkpoint_name(step: int) -> str:
    return f"ckpt-{step:08d}"


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
class Resumed:
    path: Path
    state: TrainState
    origin: InitSource | None  # where the run's first weights came from (--init-from)


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


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A write of the run that fails (a full disk, a folder turned read-only) as one TrainingError
    naming `path`. Checkpoints are built in a temporary sibling, so the earlier ones are intact."""
    try:
        yield
    except (OSError, SafetensorError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TrainingError(
            f"cannot write {path}: {reason}; the run's earlier checkpoints are intact"
        ) from None


class RunDirectory:
    """The files of one run; the training parts it saves and restores are given once."""

    def __init__(self, root: Path, cfg: Config, parts: Parts, warn: Callable[[str], None]) -> None:
        self.root, self.checkpoints, self.averaged = root, root / "checkpoints", root / "averaged"
        self.config, self.keeping, self.warn = cfg, Keeping.from_config(cfg.train), warn
        self.data, self.model, self.optimizer = parts.data, parts.model, parts.optimizer
        self.sampler, self.device = parts.sampler, parts.device

    # ------------------------------------------------------------------ start
    def remove_leftovers(self) -> None:
        for leftover in remove_stale_temporaries(self.checkpoints):
            self.warn(f"removed {leftover.name}, left by an interrupted checkpoint write")

    def check_average_output(self) -> None:
        """Refuse, before training, an <run>/averaged that train.average_last would replace but
        that `transduce average` did not write."""
        try:
            check_output_dir(self.averaged, "average")
        except OutputError:
            raise TrainingError(
                f"train.average_last would replace {self.averaged}, which `transduce average` did not "
                "write; move it away or set train.average_last=null"
            ) from None

    def resume(self, scaler: torch.amp.GradScaler) -> Resumed | None:
        """Restore the newest intact checkpoint, skipping damaged ones; None if there is no
        checkpoint. When every one is damaged, an error: starting afresh would prune them."""
        found, damaged = step_checkpoints(self.checkpoints), []
        for path in reversed(found):
            try:
                ck = load_checkpoint(path, with_trainer=True)
                assert ck.trainer is not None
                state = TrainState.restored(ck.trainer["state"], path / "trainer.json")
            except CheckpointError as exc:
                damaged.append(exc)
                continue
            for exc in damaged:
                self.warn(f"skipping damaged checkpoint: {exc}")
            if ck.config.model != self.config.model:
                raise TrainingError(
                    f"{path} holds a different model architecture than the config; "
                    "use a new run directory or the same model settings"
                )
            self._check_same_data(path, ck.meta)
            self._restore(ck, scaler)
            return Resumed(path, state, ck.meta.initialised_from)
        if damaged:
            raise TrainingError(
                f"every checkpoint in {self.checkpoints} is damaged ({len(found)}; the newest: "
                f"{damaged[0]}); there is nothing to resume from: move them away to start afresh"
            )
        return None

    def _restore(self, ck: Checkpoint, scaler: torch.amp.GradScaler) -> None:
        """Weights, Adam, the data position, the random generators and fp16's loss scale."""
        assert ck.trainer is not None
        load_weights(self.model, ck.weights)
        restore_optimizer(self.optimizer, ck.trainer["optimizer"], ck.trainer_tensors)
        self.sampler.load_state_dict(ck.trainer["sampler"])
        torch.set_rng_state(ck.trainer_tensors["rng.torch"])
        if self.device.type == "cuda" and "rng.cuda" in ck.trainer_tensors:
            torch.cuda.set_rng_state(ck.trainer_tensors["rng.cuda"], self.device)
        if scaler.is_enabled() and ck.trainer.get("scaler"):
            scaler.load_state_dict(ck.trainer["scaler"])

    def initialise_from(self, path: Path, keep_optimizer: bool, keep_step: bool) -> InitSource:
        """Load another run's (or an imported model's) weights, and Adam's state if
        `keep_optimizer` (`keep_step` is only recorded: the caller takes the step). The
        architecture (training-only settings such as dropout may differ) and the vocabularies
        must be the checkpoint's."""
        ck_path = resolve_checkpoint(path)
        if self.root.resolve() in (ck_path.resolve(), *ck_path.resolve().parents):
            raise TrainingError(
                f"--init-from {path} lies in the run directory {self.root}; give another --run-dir"
            )
        ck = load_checkpoint(ck_path, with_trainer=keep_optimizer)
        differences = architecture_differences(ck.config.model, self.config.model)
        if differences:
            raise TrainingError(
                f"--init-from {ck_path} has another architecture than the config ({'; '.join(differences)}, "
                "checkpoint vs config); give the checkpoint as the config to take its model settings"
            )
        if vocab_digest(ck_path) != vocab_digest(self.data.dir):
            raise TrainingError(
                f"--init-from {ck_path} reads other vocabularies than the data in {self.data.dir}; "
                f"prepare the data with `transduce prepare ... --vocab-from {ck_path}`"
            )
        load_weights(self.model, ck.weights)
        if keep_optimizer:
            assert ck.trainer is not None
            restore_optimizer(self.optimizer, ck.trainer["optimizer"], ck.trainer_tensors)
        return InitSource(
            checkpoint=str(ck_path), step=ck.meta.step, kept_optimizer=keep_optimizer, kept_step=keep_step
        )

    # --------------------------------------------------------- data identity
    def data_identity(self) -> DataIdentity:
        """What a resumed run must find unchanged: the token ids and the examples."""
        return DataIdentity(
            vocab_sha256=vocab_digest(self.data.dir),
            dataset_hash=self.data.meta.hash,
            arrays_sha256=self.data.arrays_sha256,
        )

    def _check_same_data(self, path: Path, meta: CheckpointMeta) -> None:
        """Resuming on other data would feed old weights new token ids from an old data position.
        What the checkpoint does not record (older ones lack the arrays' hash) is not compared."""
        saved = meta.data_identity
        if saved is None:
            self.warn(f"{path} does not record its dataset; cannot check that it is unchanged")
            return
        now = self.data_identity()
        changed = [name for name, value in saved if value is not None and value != getattr(now, name)]
        if "vocab_sha256" in changed or "dataset_hash" in changed:
            what = "vocabulary" if "vocab_sha256" in changed else "dataset"
            raise TrainingError(
                f"{path} was trained on another {what} than {self.data.dir}; resuming only continues the "
                f"same run on the same data: to fine-tune on it, use a new --run-dir with --init-from {path}"
            )
        if changed:
            raise TrainingError(
                f"{self.data.dir}: its arrays changed after {path} was trained on them (edited since it "
                f"was written); resuming only continues the same run on the same data: {self._restore_hint()}"
            )

    def _restore_hint(self) -> str:
        """How to get unchanged data back: a generated task's is written again by the run itself."""
        if self.config.data.task is not None:
            return f"delete {self.data.dir} to have it generated again as it was, or use a new --run-dir"
        return "restore the dataset as it was, or use a new --run-dir"

    # ------------------------------------------------------------- checkpoints
    def save(
        self,
        state: TrainState,
        origin: InitSource | None,
        scaler: torch.amp.GradScaler,
        position: dict[str, int],
    ) -> Path:
        """Write a checkpoint of `state`'s step, then keep the last train.keep_last and the best.
        `position`: the sampler's after the last batch trained on (not after batches prepared ahead)."""
        path = self.checkpoints / checkpoint_name(state.step)
        state.saved_at[path.name] = state.train_seconds
        opt_scalars, opt_tensors = optimizer_state(self.optimizer)
        meta = CheckpointMeta(
            **self.data.meta.model_dump(include=set(DataFacts.model_fields)),
            step=state.step,
            factor_vocab_sizes=[len(v) for v in self.data.factor_vocabs],
            data_identity=self.data_identity(),
            initialised_from=origin,
            metrics=state.history[-1] if state.history else {},
        )
        trainer = {
            "optimizer": opt_scalars,
            "sampler": position,
            "state": state.saved(),
            "scaler": scaler.state_dict(),  # fp16's loss scale ({} when not scaling)
        }
        rng = {"rng.torch": torch.get_rng_state()}
        if self.device.type == "cuda":  # dropout on CUDA draws from the device's generator
            rng["rng.cuda"] = torch.cuda.get_rng_state(self.device)
        weights = state_tensors(self.model)
        with _writing(path):
            save_checkpoint(
                path,
                weights,
                self.config,
                meta,
                vocab_files(self.data.dir),
                trainer=trainer,
                trainer_tensors={**opt_tensors, **rng},
            )
        self._prune(state)
        return path

    def _prune(self, state: TrainState) -> None:
        keep = {p.name for p in step_checkpoints(self.checkpoints)[-self.keeping.keep_last :]}
        if state.best_step is not None:
            keep.add(checkpoint_name(state.best_step))
            best = self.root / "best.json"
            with _writing(best):
                write_text_atomic(best, json.dumps({"step": state.best_step}))
        for p in step_checkpoints(self.checkpoints):
            if p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)
        state.saved_at = {name: s for name, s in state.saved_at.items() if name in keep}

    def forget_missing_best(self, state: TrainState) -> None:
        """A best checkpoint deleted behind the run's back: say so, and let the next validation
        choose a new best (best.json names the missing one until then, and decoding from the run
        directory refuses it rather than use another)."""
        best = state.best_step
        if best is not None and not (self.checkpoints / checkpoint_name(best)).exists():
            self.warn(f"the best checkpoint (step {best}) is missing; the next validation chooses a new best")
            state.forget_best()

    # ----------------------------------------------------------------- average
    def average_at_end(
        self, state: TrainState, metric: str, validate: Callable[[dict[str, Tensor]], dict[str, Any]]
    ) -> str:
        """train.average_last: average the last checkpoints of the stable part of training
        (`stable_window`), validate the average (`validate` scores weights in the model's place)
        and keep it in <run>/averaged only if it is at least as good by `metric`
        (train.best_metric) as the best checkpoint, so that decoding with <run>/averaged never
        gets a worse model than the run's best, nor a stale one. What was done, in one line."""
        kept = [
            Kept(p, int(p.name[5:]), state.saved_at.get(p.name)) for p in step_checkpoints(self.checkpoints)
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
        with _writing(self.averaged):
            write_model_checkpoint(self.averaged, ck, "average", tuple(k.path for k in window.chosen))

    def _no_average(self, window: Window, what: str) -> str:
        """No average kept: an earlier one (of this run, at an earlier end of training) is
        removed, so <run>/averaged is never stale."""
        removed = ""
        if self.averaged.exists():
            check_output_dir(self.averaged, "average")  # only `average`'s output, as check_average_output
            shutil.rmtree(self.averaged)
            removed = f" (the earlier {self.averaged} removed)"
        return f"{what}{removed}; translate with {self.root} (its best checkpoint){_left_out(window)}"


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
