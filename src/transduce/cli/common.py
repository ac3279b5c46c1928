"""What the commands share: the typer app, the two consoles, the one-line error exit, loading
a model for a command, and the options several commands take, each defined once here."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from ..choices import ENGINES, QUANTIZE
from ..config import PRESETS
from ..display import cleared_on_error
from .metavars import App, Group, one_of

if TYPE_CHECKING:
    from ..decode.shortlist import Shortlist
    from ..store.load import LoadedModel

Advance = Callable[[int, int], None]  # called with (lines, output tokens) after each decoded batch
# click's UsageError, the base of BadParameter, from whichever click typer uses (newer typer
# versions carry their own copy of click, whose exceptions the `click` package does not raise)
UsageError: type[Exception] = typer.BadParameter.__base__
console = Console(stderr=True)  # messages, progress and errors
stdout = Console()  # results


def fail(message: str) -> NoReturn:
    """Print a clear error and exit with status 2 (no traceback for user errors)."""
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


@contextlib.contextmanager
def _usage_errors(command: str) -> Iterator[None]:
    """Click's usage errors (unknown commands or options, bad option values, missing arguments) as
    one `error:` line like every other error, instead of click's boxed usage message; `command`
    names the command for the --help hint when the error does not. A command group called without
    arguments still prints its help (click's NoArgsIsHelpError, matched by name as typer does:
    older click versions lack the class)."""
    try:
        yield
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            raise
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else command
        fail(f"{exc.format_message().rstrip('.')}; see `{where} --help`")


class _Commands(Group):
    """The top-level group: usage errors of the group and of every command under it, which click
    raises while making a context or resolving and running a command, end in `fail`."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: typer.Context | None = None, **extra: Any
    ) -> typer.Context:
        with _usage_errors(info_name or "transduce"):
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: typer.Context) -> Any:
        with _usage_errors(ctx.command_path):
            return super().invoke(ctx)


app = App(
    cls=_Commands,
    help="Train, decode, evaluate and inspect Transformer sequence-to-sequence models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(show: bool) -> None:
    if show:
        from importlib.metadata import version

        stdout.print(f"transduce {version('transduce')}")
        raise typer.Exit()


@app.callback()
def _group(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Train, decode, evaluate and inspect Transformer sequence-to-sequence models."""


@contextlib.contextmanager
def user_errors(*kinds: type[Exception]) -> Iterator[None]:
    """End the command with `fail` on an exception of these kinds raised in the block: the
    library's errors for bad input carry a one-line message naming the file, line or option."""
    try:
        yield
    except kinds as exc:
        fail(str(exc))


def loaded_model(
    checkpoint: Path, quantize: str | None = None, threads: int | None = None, device: str = "auto"
) -> LoadedModel:
    """The model behind a checkpoint or run directory (prepared for decoding on `device` when
    `quantize` is given; else on the CPU), or a clear error and exit status 2."""
    from ..store.checkpoint import CheckpointError
    from ..store.load import load_for_decoding, load_model

    with user_errors(CheckpointError, ValueError):
        if quantize is None:
            return load_model(checkpoint)
        return load_for_decoding(checkpoint, quantize, threads, device)


def loaded_models(
    checkpoints: list[Path],
    quantize: str,
    threads: int | None,
    device: str = "auto",
    engine: str = "torch",
    shortlist: Shortlist | None = None,
) -> list[LoadedModel]:
    """Each checkpoint opened for decoding on `engine` (several: an ensemble's members), or a
    clear error. `shortlist` is loaded into engines that take it when they open a model
    (CTranslate2's vocabulary map); ours is given it per call."""
    from ..decode.engines import open_models
    from ..store.checkpoint import CheckpointError

    if not checkpoints:
        fail("give at least one CHECKPOINT")
    if engine not in ENGINES:
        fail(f"--engine {engine!r}: allowed: {', '.join(ENGINES)}")
    with user_errors(CheckpointError, ValueError):  # the CTranslate2 engine's EngineError is a ValueError
        return open_models(
            checkpoints, engine, quantize=quantize, threads=threads, device=device, shortlist=shortlist
        )


def engine_honours(engine: str, **given: object) -> None:
    """Refuse, before any model is loaded, a given option that `engine` does not honour (the
    engines' table says which, and why)."""
    from ..decode.engines import refused

    if engine not in ENGINES:
        fail(f"--engine {engine!r}: allowed: {', '.join(ENGINES)}")
    found = refused(engine, **given)
    if found is not None:
        option, why = found
        fail(f"{OPTION_NAMES.get(option, '--' + option.replace('_', '-'))}: {why} (--engine torch)")


OPTION_NAMES = {"prefix_with_shortlist": "--prefix with --shortlist"}  # what engines refuse together


class RateColumn(ProgressColumn):
    """Sentences and output tokens per second since the task began."""

    def render(self, task: Task) -> Text:
        seconds = task.elapsed or 0.0
        if seconds <= 0:
            return Text("")
        tokens = task.fields.get("tokens", 0)
        return Text(f"{task.completed / seconds:.1f} sent/s, {tokens / seconds:.0f} tok/s", style="cyan")


@contextlib.contextmanager
def decode_progress(description: str, total: int | None, show: bool = True) -> Iterator[Advance]:
    """The progress display of a decoding command (done / total when known, sentences/s and
    tokens/s); yields the callback that the library calls after each batch. A command that ends
    in an error (or any exception) clears the display, so its `error:` line is all that is left
    on stderr, instead of a "0 lines" progress line after it."""
    columns: list[str | ProgressColumn] = [TextColumn(f"[bold]{description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
    else:
        columns.append(TextColumn("{task.completed} lines"))
    progress = Progress(*columns, RateColumn(), console=console, disable=not show)
    task = progress.add_task(description, total=total, tokens=0)
    counted = {"tokens": 0}

    def advance(lines: int, tokens: int) -> None:
        counted["tokens"] += tokens
        progress.update(task, advance=lines, tokens=counted["tokens"])

    with cleared_on_error(progress):
        yield advance


def presets() -> str:
    """The presets with their sizes, read from the preset data (config.PRESETS) for --help."""
    sizes = []
    for name, preset in PRESETS.items():
        model = preset["model"]
        layers = f"{model['encoder_layers']}+{model['decoder_layers']} layers"
        sizes.append(f"{name} (d_model {model['d_model']}, {layers})")
    return ", ".join(sizes)


def out_option(contents: str) -> Any:
    """The -o/--out option of a command that writes a directory; `contents` is its help."""
    return typer.Option("--out", "-o", help=contents)


# Arguments and options that several commands take, with one help text each.
Checkpoint = Annotated[
    Path, typer.Argument(help="A checkpoint directory, or a run directory (its best checkpoint).")
]
Checkpoints = Annotated[
    list[Path],
    typer.Argument(
        help="A checkpoint or run directory; several decode as an ensemble (their probabilities "
        "averaged at every step; they must share the vocabularies)."
    ),
]
Overrides = Annotated[
    list[str] | None,
    typer.Argument(help="Dotted config overrides, e.g. model.d_model=256 train.steps=2000."),
]
Force = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Replace -o even if it is a file, a link or a directory this command did not write.",
    ),
]
Threads = Annotated[int | None, typer.Option(help="CPU threads for PyTorch, or CTranslate2's (>= 1).")]
EngineOption = Annotated[
    str,
    typer.Option(
        "--engine",
        metavar=one_of(ENGINES),
        help="What decodes: torch (our PyTorch model: every model kind, ensembles, syntax-aware and "
        "factored inputs) or ctranslate2 (CTranslate2, for plain "
        "Transformer encoder-decoders; the checkpoint is exported on first use into a cache beside "
        "its weights, or give an export directory). Its beam search divides log P by |Y|^alpha "
        "where ours divides by ((5 + |Y|) / 6)^alpha (--alpha 0 makes them equal); scores are "
        "reported in ours. Needs `pip install ctranslate2`.",
    ),
]
Device = Annotated[
    str,
    typer.Option(
        help="auto (the first CUDA device when there is one, else the CPU; the CPU for --quantize "
        "int8), cpu, cuda or cuda:N."
    ),
]
Quantize = Annotated[
    str,
    typer.Option(
        metavar=one_of(QUANTIZE),
        help="none (float32; on CPU with weights pre-packed for oneDNN), or int8: dynamic int8 "
        "quantisation of the linear maps of at least 2^18 weights, the smaller staying float32 (CPU "
        "decoding; on the torch engine 1.15-1.2x float32's speed at d_model 256, 1.2-1.4x at 512, "
        "1.5-1.7x at 1024, level at 128: for int8 speed at any width use --engine ctranslate2 "
        "--quantize int8, its int8 weights).",
    ),
]
ShortlistFile = Annotated[
    Path | None,
    typer.Option(
        "--shortlist",
        help="Score only the target tokens this file (`transduce shortlist`) lists for each batch's "
        "sources: faster on small models, outputs may change (one encoder-decoder model).",
    ),
]
Beam = Annotated[int | None, typer.Option(help="Beam size (default from the checkpoint's config, paper: 4).")]
Alpha = Annotated[float | None, typer.Option(help="Length penalty exponent (paper: 0.6).")]
Greedy = Annotated[bool, typer.Option(help="Greedy search instead of beam search.")]
StaticCache = Annotated[
    bool,
    typer.Option(
        help="Decode with fixed-shape caches: on a CUDA device each decoder step is one replayed CUDA "
        "graph instead of hundreds of kernel launches (one plain Transformer encoder-decoder)."
    ),
]
Sample = Annotated[
    bool, typer.Option(help="Draw outputs at random from the model instead of searching (back-translation).")
]
Temperature = Annotated[
    float | None, typer.Option(help="Sampling: divide log-probabilities by this (0 < t <= 100; 1: as is).")
]
TopK = Annotated[int | None, typer.Option(help="Sampling: only among the k most probable tokens (0: off).")]
TopP = Annotated[
    float | None,
    typer.Option(help="Sampling: only in the smallest set of tokens with mass >= p (0 < p <= 1; 1: off)."),
]
Seed = Annotated[
    int | None, typer.Option(help="Sampling seed: the same seed and input give the same samples.")
]
NumSamples = Annotated[
    int | None, typer.Option(help="Sampling: outputs per input, printed as n-best rows when > 1.")
]


def read_shortlist(path: Path | None) -> Shortlist | None:
    """The shortlist file's contents, or a clear error and exit status 2."""
    if path is None:
        return None
    from ..decode.shortlist import Shortlist, ShortlistError

    with user_errors(ShortlistError):
        return Shortlist.load(path)
