"""Training: `train` a model, `average` its last checkpoints."""

from __future__ import annotations

import signal
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ..config import Config, ConfigError
from .common import Force, Overrides, app, console, fail, out_option, presets, stdout, user_errors
from .signals import sigterm_stops

if TYPE_CHECKING:
    from ..train.trainer import Trainer

# The fine-tuning schedule docs/training.md measured: a short warm-up to a tenth of the rate.
FINETUNE_SCHEDULE = "train.lr_scale=0.1 train.warmup=50"


@app.command()
def train(
    config: Annotated[
        str,
        typer.Argument(
            help=f"A preset: {presets()}; a TOML/YAML config file; or a checkpoint or run directory (its "
            "saved config; with --init-from, the easy way to keep the model's settings)."
        ),
    ],
    overrides: Overrides = None,
    run_dir: Annotated[
        Path | None, typer.Option(help="Where checkpoints and logs go; default runs/<config name>.")
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(help="Continue this run from the newest intact checkpoint in the run directory."),
    ] = True,
    init_from: Annotated[
        Path | None,
        typer.Option(
            help="Start a new run from these weights (a checkpoint, run directory or `import marian` "
            "output): fine-tuning, with a fresh optimizer, schedule and data position. Same "
            "architecture and vocabularies required (prepare the data with --vocab-from)."
        ),
    ] = None,
    keep_optimizer: Annotated[
        bool, typer.Option(help="With --init-from: also take Adam's state from the checkpoint.")
    ] = False,
    keep_step: Annotated[
        bool,
        typer.Option(help="With --init-from: go on from the checkpoint's step (the schedule continues)."),
    ] = False,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
) -> None:
    """Train with the paper's recipe; launch with `torchrun --nproc_per_node N` for several processes.

    Encoder-decoders (model.kind=encoder_decoder, the default), classifiers (encoder, on labelled
    data such as data.task=majority) and language models (decoder, reading source and target as
    one sequence, such as data.task=repeat) train alike.

    --resume continues the same run on the same data (interrupted runs); --init-from starts a new
    run from trained weights (fine-tuning on new data)."""
    from ..data.dataset import DatasetError
    from ..fileio import OutputError
    from ..store.checkpoint import CheckpointError
    from ..train.build import setup_distributed
    from ..train.trainer import Trainer, TrainingError

    keeps = keep_optimizer or keep_step
    cfg, run = config_and_run(config, overrides or [], run_dir, resume, init_from, keeps)
    env = setup_distributed()
    # A shell starts background jobs with SIGINT ignored; training saves as it stops, so it always may
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # SIGTERM ends training like Ctrl-C (saving); the process's own handling is back before the
    # process group closes, where a worker whose peer is gone may hang until its launcher's SIGTERM.
    try:
        with sigterm_stops():
            with user_errors(ConfigError, DatasetError, TrainingError, OutputError, CheckpointError):
                try:
                    trainer = Trainer(cfg, run, env, show_progress=progress)
                    init = None
                    if init_from is not None:
                        init = partial(
                            start_finetuning,
                            trainer,
                            cfg,
                            init_from,
                            keep_optimizer=keep_optimizer,
                            keep_step=keep_step,
                            main=env.main,
                        )
                    metrics = trainer.fit(resume=resume, init=init)
                finally:
                    # Saved: a SIGTERM now (torchrun's agent stopping the survivor of a lost
                    # node, say) is ignored, so that it cuts neither the error line nor the report.
                    signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if env.main:
                report_end(trainer, run, metrics)
    finally:
        env.close()


def config_and_run(
    config: str, overrides: list[str], run_dir: Path | None, resume: bool, init_from: Path | None, keeps: bool
) -> tuple[Config, Path]:
    """The run's config and directory, checked before anything starts (one error line if not);
    `keeps`: --keep-optimizer or --keep-step was given, which only --init-from takes."""
    if keeps and init_from is None:
        fail("--keep-optimizer and --keep-step go with --init-from")
    from ..fileio import OutputError, check_path
    from ..store.checkpoint import CheckpointError
    from ..store.load import config_from
    from ..train.run_dir import run_directory

    with user_errors(ConfigError, OutputError, CheckpointError):
        if run_dir is not None:
            check_path(run_dir, renamed=False)  # a name too long, say: said before anything starts
        cfg = config_from(config, overrides)
        return cfg, run_directory(config, run_dir, resume, cfg.data.dataset, init_from)


def start_finetuning(
    trainer: Trainer, cfg: Config, path: Path, *, keep_optimizer: bool, keep_step: bool, main: bool
) -> None:
    """Trainer.init_from (called when the run starts, not when it resumes), then, on the main
    process, the hint of `rewarming_hint` where it applies."""
    trainer.init_from(path, keep_optimizer, keep_step)
    hint = None if keep_step or not main else rewarming_hint(cfg, path)
    if hint is not None:
        say(hint)


def rewarming_hint(cfg: Config, checkpoint: Path) -> str | None:
    """A hint when fine-tuning from `checkpoint` warms up again to at least the peak learning rate
    it was trained with (as a preset's own schedule does): on a small domain set that rate undoes
    much of what the model knew (docs/training.md, "Fine-tuning")."""
    from ..config import build_config
    from ..store.checkpoint import read_meta
    from ..store.load import resolve_checkpoint
    from ..train.schedule import InverseSqrt

    trained = build_config(read_meta(resolve_checkpoint(checkpoint)).config, [])
    run, before = (InverseSqrt(c.model.d_model, c.train.warmup, c.train.lr_scale) for c in (cfg, trained))
    if run.peak < before.peak:
        return None
    return (
        f"hint: this fine-tuning run warms up again to a learning rate of {run.peak:.2g} (at step "
        f"{run.warmup}), no lower than the peak {checkpoint} was trained with ({before.peak:.2g}); on "
        "a small domain set that undoes much of what the model learned. For fine-tuning: "
        f"{FINETUNE_SCHEDULE}, and general data mixed into the domain's (docs/training.md, Fine-tuning)"
    )


def report_end(trainer: Trainer, run: Path, metrics: dict[str, float]) -> None:
    """Why training stopped, with dev samples, what train.average_last did and the last scores;
    or, for a run that had finished before, only that."""
    outcome = trainer.outcome
    assert outcome is not None
    if outcome.already:
        say(f"{run} had already finished at step {outcome.step}: {outcome.reason}")
        return
    show_samples(trainer)
    say(f"finished at step {outcome.step} ({outcome.reason}); checkpoints in {run / 'checkpoints'}")
    if outcome.average is not None:
        say(outcome.average)
    if metrics:
        console.print(", ".join(f"{k} {v:.4g}" for k, v in metrics.items()))


def say(line: str) -> None:
    """A line of the library's text on stderr, as it is (no markup, no wrapping inside paths)."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def show_samples(trainer: Trainer, count: int = 5) -> None:
    """Print a few dev examples with the model's greedy output."""
    table = Table(title="dev samples (greedy)")
    for col in ("source", "reference", "output", "ok"):
        table.add_column(col)
    for source, reference, output in trainer.validator.samples(count):
        table.add_row(source, reference, output, "yes" if output == reference else "no")
    stdout.print(table)


@app.command()
def average(
    checkpoints: Annotated[
        list[Path] | None, typer.Argument(help="Checkpoint directories to average.")
    ] = None,
    out: Annotated[Path, out_option("Where to write the averaged checkpoint.")] = Path("averaged"),
    last: Annotated[
        int | None, typer.Option(help="Average the last K checkpoints of --run-dir instead.")
    ] = None,
    run_dir: Annotated[Path | None, typer.Option(help="Run directory for --last.")] = None,
    force: Force = False,
) -> None:
    """Average checkpoint parameters (the paper: last 5 for base, last 20 for big).

    The checkpoints must share architecture and vocabularies. The output records which
    checkpoints (and steps) it averages; an existing -o is replaced only if `average` wrote it."""
    from ..fileio import OutputError
    from ..store.average import last_checkpoints, summary, write_average
    from ..store.checkpoint import CheckpointError

    with user_errors(CheckpointError, OutputError):
        if last is not None:
            if run_dir is None:
                fail("--last needs --run-dir")
            paths = last_checkpoints(run_dir, last)
            if len(paths) < last:
                console.print(
                    f"[yellow]warning:[/] --last {last}: {run_dir} has only {len(paths)} checkpoints; "
                    f"averaging {len(paths)}",
                    highlight=False,
                )
        else:
            paths = list(checkpoints or [])
        averaged = write_average(paths, out, force)
    console.print(summary(averaged, out))
