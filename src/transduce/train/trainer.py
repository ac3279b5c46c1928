"""The training loop: the paper's recipe, validation, checkpoints, exact resume, DDP.

One optimizer step consumes `train.accumulate` batches on each of the `world` ranks; the
summed loss is divided by the step's global target-token count, so one process
accumulating k batches computes the same update as k ranks with one batch each.
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from torch import Tensor

from ..config import Config, architecture_differences
from ..data.batching import Batch, make_batches
from ..data.dataset import Split
from ..data.meta import DataFacts
from ..fileio import OutputError, RunLock, check_output_dir, remove_stale_temporaries, write_text_atomic
from ..metrics import perplexity
from ..model.ponder import ponder_loss
from ..store.average import last_checkpoints, summary, write_average
from ..store.checkpoint import (
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
from .build import Distributed, Parts, build_parts
from .log import RunLogger
from .loss import label_smoothed_loss
from .objective import IGNORE
from .optimizer_state import optimizer_state, restore_optimizer
from .validation import greedy_outputs, improves


class TrainingError(RuntimeError):
    """Training cannot go on (repeated non-finite losses, a checkpoint of another model)."""


@dataclass
class StepStats:
    loss: float
    nll: float
    tokens: int
    grad_norm: float


class Skipped(enum.Enum):
    """Why `train_step` made no update."""

    NON_FINITE = "non-finite loss or gradient"
    OVERFLOW = "fp16 gradients overflowed at this loss scale"  # the scaler lowers it and goes on


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
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.env = env or Distributed()
        self.show = show_progress and self.env.main
        self.console = console or Console(quiet=not self.show)
        parts = parts or build_parts(cfg, self.run_dir, self.env)
        self.data, self.model, self.net, self.objective = parts.data, parts.model, parts.net, parts.objective
        self.optimizer, self.schedule, self.sampler = parts.optimizer, parts.schedule, parts.sampler
        self.metrics, self.throughput, self.device = parts.metrics, parts.throughput, parts.device
        self.train_split = self.data.splits["train"]
        self.state = TrainState()
        self.saved_step = 0  # the newest step a checkpoint holds
        self.logger: RunLogger | None = None
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=cfg.train.precision == "fp16")
        self.checkpoints = self.run_dir / "checkpoints"
        self.origin: InitSource | None = None  # set by init_from, kept across resumes

    # ----------------------------------------------------------------- state
    def resume(self) -> bool:
        """Load the newest intact checkpoint, skipping damaged ones; False if none."""
        for path in reversed(step_checkpoints(self.checkpoints)):
            try:
                ck = load_checkpoint(path, with_trainer=True)
            except CheckpointError as exc:
                self.warn(f"skipping damaged checkpoint: {exc}")
                continue
            if ck.config.model != self.cfg.model:
                raise TrainingError(
                    f"{path} holds a different model architecture than the config; "
                    "use a new run directory or the same model settings"
                )
            self._check_same_data(path, ck.meta)
            assert ck.trainer is not None
            load_weights(self.model, ck.weights)
            restore_optimizer(self.optimizer, ck.trainer["optimizer"], ck.trainer_tensors)
            self.sampler.load_state_dict(ck.trainer["sampler"])
            torch.set_rng_state(ck.trainer_tensors["rng.torch"])
            if self.device.type == "cuda" and "rng.cuda" in ck.trainer_tensors:
                torch.cuda.set_rng_state(ck.trainer_tensors["rng.cuda"], self.device)
            if self.scaler.is_enabled() and ck.trainer.get("scaler"):
                self.scaler.load_state_dict(ck.trainer["scaler"])
            state = dict(ck.trainer["state"])
            if "best_loss" in state:  # checkpoints written before train.best_metric
                state["best_value"] = state.pop("best_loss")
            self.state = TrainState(**state)
            self.origin = ck.meta.initialised_from
            self._forget_missing_best()
            self.console.print(f"resumed from {path} at step {self.state.step}")
            return True
        return False

    def init_from(self, path: Path, keep_optimizer: bool = False, keep_step: bool = False) -> None:
        """Start a new run from another run's (or an imported model's) weights: fine-tuning.

        The optimizer, schedule and data position start afresh unless `keep_optimizer` (Adam's
        moments, when the checkpoint has them) or `keep_step` (the step count, so the learning
        rate goes on from there). The architecture (training-only settings such as dropout may
        differ) and the vocabularies must be the checkpoint's."""
        ck_path = resolve_checkpoint(path)
        if self.run_dir.resolve() in (ck_path.resolve(), *ck_path.resolve().parents):
            raise TrainingError(
                f"--init-from {path} lies in the run directory {self.run_dir}; give another --run-dir"
            )
        ck = load_checkpoint(ck_path, with_trainer=keep_optimizer)
        differences = architecture_differences(ck.config.model, self.cfg.model)
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
        if keep_step:
            self.state.step = ck.meta.step
        self.origin = InitSource(
            checkpoint=str(ck_path), step=ck.meta.step, kept_optimizer=keep_optimizer, kept_step=keep_step
        )
        self.console.print(f"initialised from {ck_path} (step {ck.meta.step})")

    def _data_identity(self) -> DataIdentity:
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
        now = self._data_identity()
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
        if self.cfg.data.task is not None:
            return f"delete {self.data.dir} to have it generated again as it was, or use a new --run-dir"
        return "restore the dataset as it was, or use a new --run-dir"

    def save(self) -> Path:
        """Write a checkpoint of this step (the best one when its validation was the best)."""
        path = self.checkpoints / f"ckpt-{self.state.step:08d}"
        opt_scalars, opt_tensors = optimizer_state(self.optimizer)
        facts = self.data.meta.model_dump(include=set(DataFacts.model_fields))
        meta = CheckpointMeta(
            **facts,
            step=self.state.step,
            factor_vocab_sizes=[len(v) for v in self.data.factor_vocabs],
            data_identity=self._data_identity(),
            initialised_from=self.origin,
            metrics=self.state.history[-1] if self.state.history else {},
        )
        trainer = {
            "optimizer": opt_scalars,
            "sampler": self.sampler.state_dict(),
            "state": asdict(self.state),
            "scaler": self.scaler.state_dict(),  # fp16's loss scale ({} when not scaling)
        }
        rng = {"rng.torch": torch.get_rng_state()}
        if self.device.type == "cuda":  # dropout on CUDA draws from the device's generator
            rng["rng.cuda"] = torch.cuda.get_rng_state(self.device)
        save_checkpoint(
            path,
            state_tensors(self.model),
            self.cfg,
            meta,
            vocab_files(self.data.dir),
            trainer,
            {**opt_tensors, **rng},
        )
        self.saved_step = self.state.step
        self._prune()
        return path

    def _prune(self) -> None:
        keep = {p.name for p in step_checkpoints(self.checkpoints)[-self.cfg.train.keep_last :]}
        if self.state.best_step is not None:
            keep.add(f"ckpt-{self.state.best_step:08d}")
            write_text_atomic(self.run_dir / "best.json", json.dumps({"step": self.state.best_step}))
        for p in step_checkpoints(self.checkpoints):
            if p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)

    def _forget_missing_best(self) -> None:
        """A best checkpoint deleted behind the run's back: say so, and let the next validation
        choose a new best (best.json names the missing one until then, and decoding from the run
        directory refuses it rather than use another)."""
        best = self.state.best_step
        if best is not None and not (self.checkpoints / f"ckpt-{best:08d}").exists():
            self.warn(f"the best checkpoint (step {best}) is missing; the next validation chooses a new best")
            self.state.best_value = self.state.best_step = None

    # ----------------------------------------------------------------- steps
    def _autocast(self) -> contextlib.AbstractContextManager:
        p = self.cfg.train.precision
        if p == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if p == "bf16" else torch.float16
        return torch.autocast(self.device.type, dtype=dtype)

    def train_step(self, batches: list[Batch]) -> StepStats | Skipped:
        """One optimizer update over `batches`, or why there was none: a non-finite loss or
        gradient, or (fp16) gradients that overflowed only because of the loss scale."""
        targets = [self.objective.targets(b) for b in batches]
        total = float(sum(int(t.ne(IGNORE).sum()) for t in targets))  # counted on the host
        if self.env.world > 1:  # every rank divides by the step's global count
            tokens = torch.tensor([total], device=self.device)
            dist.all_reduce(tokens)
            total = float(tokens.item())
        self.optimizer.zero_grad(set_to_none=True)
        sums = torch.zeros(2, device=self.device)
        for i, (b, target) in enumerate(zip(batches, targets, strict=True)):
            sync = self.env.world == 1 or i == len(batches) - 1
            ctx = contextlib.nullcontext() if sync else self.net.no_sync()  # type: ignore[operator]
            with ctx:
                with self._autocast():
                    out = self.objective.forward(self.net, b.to(self.device))
                    loss, nll = label_smoothed_loss(
                        out.logits, target.to(self.device), self.cfg.train.label_smoothing, IGNORE
                    )
                objective = loss * (self.env.world / total)
                ponder = ponder_loss(out.ponder, self.cfg.model.act_tau)
                if ponder is not None:  # ACT's ponder cost, averaged over the step's batches
                    objective = objective + ponder / len(batches)
                self.scaler.scale(objective).backward()
            sums += torch.stack([loss.detach(), nll])
        if self.env.world > 1:
            dist.all_reduce(sums)
        self.scaler.unscale_(self.optimizer)
        clip = self.cfg.train.clip_norm or math.inf
        norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip))
        finite_loss = math.isfinite(float(sums[0]))
        if not (finite_loss and math.isfinite(norm)):
            overflow = finite_loss and self.scaler.is_enabled() and self.scaler.get_scale() >= 1.0
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.update()  # halves the loss scale after an overflow
            return Skipped.OVERFLOW if overflow else Skipped.NON_FINITE
        lr = self.schedule(self.state.step + 1)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.state.step += 1
        return StepStats(float(sums[0]) / total, float(sums[1]) / total, int(total), norm)

    # ------------------------------------------------------------ validation
    @torch.no_grad()
    def dev_loss(self, split: Split) -> tuple[float, float, dict[str, float]]:
        """Per-token smoothed loss and NLL on a split, plus ACT step statistics (mean/max)."""
        self.model.eval()
        batches, _ = make_batches(self.objective.lengths(split), self.cfg.data.max_tokens, seed=0)
        loss_sum = nll_sum = tokens = 0.0
        steps: dict[str, list[Tensor]] = {}
        for idx in batches:
            b = self.objective.collate(split, idx)
            target = self.objective.targets(b)
            out = self.objective.forward(self.model, b.to(self.device))
            loss, nll = label_smoothed_loss(
                out.logits, target.to(self.device), self.cfg.train.label_smoothing, IGNORE
            )
            scored = int(target.ne(IGNORE).sum())
            loss_sum, nll_sum, tokens = loss_sum + float(loss), nll_sum + float(nll), tokens + scored
            for side, p in out.ponder.items():
                steps.setdefault(side, []).append(p.real(p.steps))
        self.model.train()
        ponder = {}
        for side, parts in steps.items():
            joined = torch.cat(parts)
            ponder[f"{side}_ponder_mean"], ponder[f"{side}_ponder_max"] = (
                float(joined.mean()),
                float(joined.max()),
            )
        return loss_sum / max(tokens, 1), nll_sum / max(tokens, 1), ponder

    def predict(self, split: Split, limit: int | None = None) -> tuple[list[list[int]], list[list[int]]]:
        """Greedy outputs and references for the first `limit` examples of a split."""
        return greedy_outputs(self.model, split, self.cfg.decode, self.device, limit)

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
        loss, nll, ponder = self.dev_loss(self.data.splits["dev"])
        return {
            "step": self.state.step,
            "train_minutes": self.state.train_seconds / 60,
            "train_tokens": self.state.tokens,
            "dev_loss": loss,
            "dev_ppl": perplexity(nll, 1),
            **ponder,
            **self.metrics(self.data, self.predict),
        }

    # ------------------------------------------------------------------ loop
    def fit(self, resume: bool = False, init: Callable[[], None] | None = None) -> dict[str, Any]:
        """Train to `train.steps`, validating and checkpointing on the way. `init` (e.g. a call of
        `init_from`) starts a run that has no checkpoint to resume from.

        The run directory is locked for the whole run; if anything fails or interrupts training
        after a step that no checkpoint holds yet, that step is saved before the error goes on."""
        with RunLock(self.run_dir) if self.env.main else contextlib.nullcontext():
            self.logger = logger = RunLogger(self.run_dir, self.env.main)
            try:
                if self.env.main:
                    for leftover in remove_stale_temporaries(self.checkpoints):
                        self.warn(f"removed {leftover.name}, left by an interrupted checkpoint write")
                if self.env.main and self.cfg.train.average_last is not None:
                    self._average_output()  # refused now, not after the training
                resumed = resume and self.resume()
                if init is not None and not resumed:
                    init()
                self.saved_step = self.state.step
                try:
                    metrics = self._loop(logger)
                except BaseException as exc:
                    self._save_on_the_way_out(exc)
                    raise
                if self.env.main and self.cfg.train.average_last is not None:
                    self._average_last(self.cfg.train.average_last)
                return metrics
            finally:
                logger.close()
                self.logger = None

    def _average_last(self, n: int) -> None:
        """`train.average_last`: the mean of the run's last `n` checkpoints in <run>/averaged,
        replacing only an earlier average (a longer or resumed run averages its own last ones)."""
        paths = last_checkpoints(self.run_dir, n)
        if len(paths) < n:
            self.warn(f"train.average_last={n}, but the run has {len(paths)} checkpoints; averaging those")
        out = self._average_output()
        averaged = write_average(paths, out)
        if self.logger is not None:  # the CLI names the average on screen
            self.logger.text(summary(averaged, out))

    def _average_output(self) -> Path:
        """<run>/averaged, where train.average_last writes: refused if `average` did not write it."""
        out = self.run_dir / "averaged"
        try:
            check_output_dir(out, "average")
        except OutputError:
            raise TrainingError(
                f"train.average_last would replace {out}, which `transduce average` did not write; "
                "move it away or set train.average_last=null"
            ) from None
        return out

    def _save_on_the_way_out(self, exc: BaseException) -> None:
        if not self.env.main or self.state.step <= self.saved_step:
            return
        try:
            path = self.save()
        except Exception as again:  # the original error matters more than this one
            self.warn(f"could not save step {self.state.step} after {type(exc).__name__}: {again}")
            return
        self.warn(f"training stopped by {type(exc).__name__}; steps so far saved in {path}")

    def warn(self, message: str) -> None:
        """A warning on stderr and in train.log, whether or not the progress display is on."""
        Console(stderr=True).print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)
        if self.logger is not None:
            self.logger.text(f"warning: {message}")

    def _loop(self, logger: RunLogger) -> dict[str, Any]:
        t = self.cfg.train
        if t.max_minutes is not None and self.state.train_seconds >= 60 * t.max_minutes:
            logger.text(f"train.max_minutes={t.max_minutes} already spent; nothing to train")
            return self.state.history[-1] if self.state.history else {}
        if t.patience is not None and self.state.stale >= t.patience:
            logger.text(
                f"stopped early: {self.state.stale} validations without a better dev {t.best_metric}; "
                "nothing to train (raise train.patience to go on)"
            )
            return self.state.history[-1] if self.state.history else {}
        stream = iter(self.sampler)
        last_save = time.monotonic()
        window_tokens, window_start = 0, time.monotonic()
        columns = [
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
        ]
        with Progress(*columns, console=self.console, disable=not self.show) as progress:
            bar = progress.add_task("train", total=t.steps, completed=self.state.step, stats="")
            last_validation = self.state.train_seconds
            while self.state.step < t.steps:
                began = time.monotonic()
                batches = [
                    self.objective.collate(self.train_split, next(stream)) for _ in range(t.accumulate)
                ]
                stats = self.train_step(batches)
                self.state.train_seconds += time.monotonic() - began
                if stats is Skipped.OVERFLOW:
                    self.state.skipped += 1
                    logger.text(
                        f"step {self.state.step}: {stats.value}, update skipped; loss scale now "
                        f"{self.scaler.get_scale():g}"
                    )
                    continue
                if stats is Skipped.NON_FINITE:
                    self.state.skipped += 1
                    self.state.bad_in_row += 1
                    logger.text(
                        f"step {self.state.step}: non-finite loss or gradient, update skipped "
                        f"({self.state.bad_in_row} in a row)"
                    )
                    if self.state.bad_in_row >= t.max_bad_steps:
                        raise TrainingError(
                            f"{self.state.bad_in_row} non-finite losses in a row at step {self.state.step}; "
                            "lower train.lr_scale, set train.clip_norm, or check the data"
                        )
                    continue
                self.state.bad_in_row = 0
                window_tokens += stats.tokens
                self.state.tokens += stats.tokens
                progress.update(bar, completed=self.state.step)
                step = self.state.step
                if step % t.log_every == 0 or step == t.steps:
                    elapsed = max(time.monotonic() - window_start, 1e-9)
                    lr = self.optimizer.param_groups[0]["lr"]
                    row = {
                        "loss": stats.loss,
                        "nll": stats.nll,
                        "ppl": perplexity(stats.nll, 1),
                        "lr": lr,
                        "grad_norm": stats.grad_norm,
                        **self.throughput.row(window_tokens, elapsed),
                    }
                    logger.scalars(step, {f"train/{k}": v for k, v in row.items()})
                    shown = f"loss {stats.loss:.3f} lr {lr:.2e} " + self.throughput.shown(row)
                    progress.update(bar, stats=shown)
                    if self.show and not self.console.is_terminal:  # a log file gets plain lines
                        self.console.print(f"step {step}/{t.steps}: {shown}", highlight=False)
                    window_tokens, window_start = 0, time.monotonic()
                out_of_time = self._agree(
                    t.max_minutes is not None and self.state.train_seconds >= 60 * t.max_minutes
                )
                validate_due = self._agree(
                    t.validate_every_minutes is not None
                    and self.state.train_seconds - last_validation >= 60 * t.validate_every_minutes
                )
                improved = stop_early = False
                if step % t.validate_every == 0 or step == t.steps or validate_due or out_of_time:
                    improved = self._agree(self._validate_and_record(logger, progress))
                    stop_early = self._agree(t.patience is not None and self.state.stale >= t.patience)
                    last_validation = self.state.train_seconds
                minutes = t.save_every_minutes
                due_time = minutes is not None and time.monotonic() - last_save >= 60 * minutes
                due = step % t.save_every == 0 or step == t.steps or due_time or out_of_time
                if due or improved or stop_early:  # the best checkpoint is always kept
                    if self.env.main:
                        self.save()
                    self.env.barrier()
                    last_save = time.monotonic()
                if out_of_time:
                    logger.text(f"step {step}: train.max_minutes={t.max_minutes} of training time reached")
                    break
                if stop_early:
                    logger.text(
                        f"step {step}: stopped early after {self.state.stale} validations without a "
                        f"better dev {t.best_metric} (the best at step {self.state.best_step})"
                    )
                    break
        return self.state.history[-1] if self.state.history else {}

    def _agree(self, flag: bool) -> bool:
        """True when any rank says so, so all ranks stop or validate together (time differs)."""
        if self.env.world == 1:
            return flag
        value = torch.tensor([float(flag)], device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def _validate_and_record(self, logger: RunLogger, progress: Progress) -> bool:
        """Validate (on the main rank) and track the best step; True if this one is the best."""
        improved = False
        if self.env.main:
            metrics = self.validate()
            self.state.history.append(metrics)
            logger.scalars(self.state.step, {f"valid/{k}": v for k, v in metrics.items() if k != "step"})
            shown = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items() if k != "step")
            progress.console.print(f"step {self.state.step}: {shown}")
            improved = self._track_best(metrics)
        self.env.barrier()
        return improved

    def _track_best(self, metrics: dict[str, Any]) -> bool:
        """Update the best step by train.best_metric and the count of validations since it."""
        metric = self.cfg.train.best_metric
        value = float(metrics[f"dev_{metric}"])
        if math.isfinite(value) and improves(metric, value, self.state.best_value):
            self.state.best_value, self.state.best_step, self.state.stale = value, self.state.step, 0
            return True
        self.state.stale += 1
        return False
