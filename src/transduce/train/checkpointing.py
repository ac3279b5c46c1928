"""A run's checkpoints: saving them (the last train.keep_last and the best, named in best.json),
resuming from the newest intact one on the same data, starting from another run's weights, and
saving the steps no checkpoint holds when an error ends the run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import Config, architecture_differences
from ..data.meta import DataFacts
from ..fileio import remove_stale_temporaries, write_text_atomic
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
from ..store.load import resolve_checkpoint
from ..store.meta import CheckpointMeta, DataIdentity, InitSource
from .averaging import Keeping
from .build import Parts
from .optimizer_state import optimizer_state, restore_optimizer
from .run_dir import RunLayout, writing
from .state import TrainingError, TrainState


@dataclass(frozen=True, slots=True)
class Resumed:
    path: Path
    state: TrainState
    origin: InitSource | None  # where the run's first weights came from (--init-from)


class Checkpointing:
    """The checkpoints of one run; the training parts it saves and restores are given once."""

    def __init__(self, layout: RunLayout, cfg: Config, parts: Parts, warn: Callable[[str], None]) -> None:
        self.layout, self.checkpoints = layout, layout.checkpoints
        self.config, self.keeping, self.warn = cfg, Keeping.from_config(cfg.train), warn
        self.data, self.model, self.optimizer = parts.data, parts.model, parts.optimizer
        self.sampler, self.device = parts.sampler, parts.device
        self.saved_step = 0  # the newest step a checkpoint holds
        self.failed = False  # a failed save is not tried again on the way out

    def remove_leftovers(self) -> None:
        for leftover in remove_stale_temporaries(self.checkpoints):
            self.warn(f"removed {leftover.name}, left by an interrupted checkpoint write")

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
        `keep_optimizer` (`keep_step`: the caller takes the checkpoint's step, refused where it
        leaves nothing to train). The architecture (training-only settings such as dropout may
        differ) and the vocabularies must be the checkpoint's."""
        ck_path = resolve_checkpoint(path)
        if self.layout.root.resolve() in (ck_path.resolve(), *ck_path.resolve().parents):
            raise TrainingError(
                f"--init-from {path} lies in the run directory {self.layout.root}; give another --run-dir"
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
        steps = self.config.train.steps
        if keep_step and ck.meta.step >= steps:
            raise TrainingError(
                f"--keep-step: {ck_path} is at step {ck.meta.step}, not below "
                f"train.steps={steps}, so nothing would be trained; set train.steps "
                f"above {ck.meta.step} (it counts from the checkpoint's step) or leave out --keep-step"
            )
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
        *,
        origin: InitSource | None,
        scaler: torch.amp.GradScaler,
        position: dict[str, int],
    ) -> Path:
        """Write a checkpoint of `state`'s step, then keep the last train.keep_last and the best.
        `position`: the sampler's after the last batch trained on (not after batches prepared ahead)."""
        try:
            path = self._write(state, origin, scaler, position)
        except Exception:
            self.failed = True
            raise
        self.saved_step = state.step
        self._prune(state)
        return path

    def _write(
        self,
        state: TrainState,
        origin: InitSource | None,
        scaler: torch.amp.GradScaler,
        position: dict[str, int],
    ) -> Path:
        path = self.layout.checkpoint(state.step)
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
        with writing(path):
            save_checkpoint(
                path,
                weights,
                self.config,
                meta,
                vocab_files(self.data.dir),
                trainer=trainer,
                trainer_tensors={**opt_tensors, **rng},
            )
        return path

    def _prune(self, state: TrainState) -> None:
        keep = {p.name for p in step_checkpoints(self.checkpoints)[-self.keeping.keep_last :]}
        if state.best_step is not None:
            keep.add(self.layout.checkpoint(state.best_step).name)
            best = self.layout.best
            with writing(best):
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
        if best is not None and not self.layout.checkpoint(best).exists():
            self.warn(f"the best checkpoint (step {best}) is missing; the next validation chooses a new best")
            state.forget_best()

    def save_on_the_way_out(
        self,
        exc: BaseException,
        state: TrainState,
        *,
        catch_up: Callable[[], object],
        save: Callable[[], Path],
    ) -> None:
        """Save the steps no checkpoint holds yet before `exc` ends the run (`catch_up` reads back
        the steps the weights hold, and the data position after them); not when saving is what
        failed (a full disk would refuse it again, with a second error after the first), nor when
        the device cannot say which steps the weights hold."""
        if self.failed:
            return
        try:
            catch_up()
        except Exception:  # the device itself failed
            return
        if state.step <= self.saved_step:
            return
        try:
            path = save()
        except Exception as again:  # the original error matters more than this one
            self.warn(f"could not save step {state.step} after {type(exc).__name__}: {again}")
            return
        self.warn(f"training stopped by {type(exc).__name__}; steps so far saved in {path}")

    def newest(self) -> Path | None:
        """The newest checkpoint, if the run has one."""
        saved = step_checkpoints(self.checkpoints)
        return saved[-1] if saved else None
