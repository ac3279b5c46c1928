"""Looking inside a model: `attention` heat maps and ACT `ponder` steps (attention_plot.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from .common import Checkpoint, app, fail, loaded_model, out_option, stdout, user_errors

PlotFolder = Annotated[Path, out_option("Folder for the PNG files.")]
SourceText = Annotated[str, typer.Argument(help="Source text, in the model's input format.")]
SourceTree = Annotated[Path | None, typer.Option(help="The source's syntax tree, for syntax-aware models.")]
TargetText = Annotated[str | None, typer.Argument(help="Target text; default: the model's greedy output.")]
Layers = Annotated[str | None, typer.Option(help="Comma-separated layer numbers (from 0); default all.")]
Heads = Annotated[str | None, typer.Option(help="Comma-separated head numbers; default all.")]


def _check_folder(out_dir: Path) -> None:
    from ..fileio import OutputError, check_path

    with user_errors(OutputError):
        check_path(out_dir, renamed=False)
    if out_dir.exists() and not out_dir.is_dir():
        fail(f"{out_dir} is a file; -o takes a folder for the PNG files")


def _unwritable(out_dir: Path, exc: OSError) -> NoReturn:
    fail(f"cannot write {out_dir}: {exc.strerror or exc}")


def _numbers(text: str | None, option: str) -> list[int] | None:
    try:
        return [int(x) for x in text.split(",")] if text else None
    except ValueError:
        fail(f"{option} takes comma-separated numbers, not {text!r}")


@app.command()
def attention(
    checkpoint: Checkpoint,
    source: SourceText,
    target: TargetText = None,
    out_dir: PlotFolder = Path("attention"),
    layers: Layers = None,
    heads: Heads = None,
    src_trees: SourceTree = None,
) -> None:
    """Write attention heat maps (encoder self, decoder self, cross) per layer, one panel per head.

    A decoder map's rows are the tokens written at each step (the target, then </s>), as the
    server's /attention labels them; its columns are the tokens read."""
    from ..attention_plot import axis_labels, check_selection, collect_attention, make_example, plot_attention

    _check_folder(out_dir)
    loaded = loaded_model(checkpoint)
    chosen_layers, chosen_heads = _numbers(layers, "--layers"), _numbers(heads, "--heads")
    with user_errors(ValueError):
        check_selection(loaded.model, loaded.config.model.heads, chosen_layers, chosen_heads)
        example = make_example(loaded, source, target, src_trees)
    files = plot_attention(
        collect_attention(loaded.model, example),
        axis_labels(example, loaded),
        out_dir,
        chosen_layers,
        chosen_heads,
    )
    stdout.print(f"target: {loaded.tgt_vocab.decode(example.tgt_ids)}")
    stdout.print(f"wrote {len(files)} heat maps to {out_dir}")


@app.command()
def ponder(
    checkpoint: Annotated[Path, typer.Argument(help="A Universal Transformer checkpoint with ACT.")],
    source: SourceText,
    out_dir: PlotFolder = Path("ponder"),
    src_trees: SourceTree = None,
) -> None:
    """Plot ACT steps per position for the encoder (source) and decoder (greedy output)."""
    from ..attention_plot import make_example, plot_ponder, ponder_steps

    _check_folder(out_dir)
    loaded = loaded_model(checkpoint)
    if not loaded.config.model.act:
        fail(f"{checkpoint} is not a Universal Transformer with ACT (model.act is false)")
    with user_errors(ValueError):
        example = make_example(loaded, source, None, src_trees)
    steps = ponder_steps(loaded.model, example)
    try:
        src_plot = plot_ponder(
            steps["encoder"], example.src_labels(loaded), out_dir / "encoder-ponder.png", "encoder: ACT steps"
        )
        tgt_plot = plot_ponder(
            steps["decoder"],
            example.written_labels(loaded),
            out_dir / "decoder-ponder.png",
            "decoder: ACT steps",
        )
    except OSError as exc:  # a full disk
        _unwritable(out_dir, exc)
    stdout.print(f"output: {loaded.tgt_vocab.decode(example.tgt_ids)}")
    stdout.print(f"encoder steps: {steps['encoder'].tolist()}")
    stdout.print(f"wrote {src_plot}, {tgt_plot}")
