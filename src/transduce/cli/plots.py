"""Looking inside a model: `attention` heat maps and ACT `ponder` steps.

The two command bodies are kept as they were in cli.py: the model's attention-recording and
ponder interfaces are being rewritten, and these commands with them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import Checkpoint, app, fail, out_option, stdout
from .common import loaded_model as _load

PlotFolder = Annotated[Path, out_option("Folder for the PNG files.")]


@app.command()
def attention(
    checkpoint: Checkpoint,
    source: Annotated[str, typer.Argument(help="Source text.")],
    target: Annotated[
        str | None, typer.Argument(help="Target text; default: the model's greedy output.")
    ] = None,
    out_dir: PlotFolder = Path("attention"),
    layers: Annotated[
        str | None, typer.Option(help="Comma-separated layer numbers (from 0); default all.")
    ] = None,
    heads: Annotated[str | None, typer.Option(help="Comma-separated head numbers; default all.")] = None,
) -> None:
    """Write attention heat maps (encoder self, decoder self, cross) per layer, one panel per head."""
    from ..attention_plot import collect_attention, plot_attention
    from ..decode.search import greedy as greedy_search

    loaded = _load(checkpoint)
    try:
        chosen_layers = [int(x) for x in layers.split(",")] if layers else None
        chosen_heads = [int(x) for x in heads.split(",")] if heads else None
    except ValueError as exc:
        fail(f"--layers/--heads take comma-separated numbers: {exc}")
        return
    if chosen_heads and max(chosen_heads) >= loaded.config.model.heads:
        fail(f"--heads: the model has heads 0..{loaded.config.model.heads - 1}")
    src_ids = loaded.src_vocab.encode(source)
    if target is None:
        from ..data.batching import encode_sources

        tgt_ids = greedy_search(loaded.model, encode_sources([src_ids]))[0].tokens
    else:
        tgt_ids = loaded.tgt_vocab.encode(target)
    weights = collect_attention(loaded.model, src_ids, tgt_ids)
    files = plot_attention(
        weights,
        [loaded.src_vocab.token(i) for i in src_ids],
        [loaded.tgt_vocab.token(i) for i in tgt_ids],
        out_dir,
        chosen_layers,
        chosen_heads,
    )
    stdout.print(f"target: {loaded.tgt_vocab.decode(tgt_ids)}")
    stdout.print(f"wrote {len(files)} heat maps to {out_dir}")


@app.command()
def ponder(
    checkpoint: Annotated[Path, typer.Argument(help="A Universal Transformer checkpoint with ACT.")],
    source: Annotated[str, typer.Argument(help="Source text.")],
    out_dir: PlotFolder = Path("ponder"),
) -> None:
    """Plot ACT steps per position for the encoder (source) and decoder (greedy output)."""
    import torch

    from ..attention_plot import plot_ponder
    from ..data.batching import encode_sources
    from ..data.vocab import BOS
    from ..decode.search import greedy as greedy_search
    from ..model.universal import ponder_steps

    loaded = _load(checkpoint)
    if not loaded.config.model.act:
        fail(f"{checkpoint} is not a Universal Transformer with ACT (model.act is false)")
    src_ids = loaded.src_vocab.encode(source)
    src = encode_sources([src_ids])
    tgt_ids = greedy_search(loaded.model, src)[0].tokens
    with torch.no_grad():
        loaded.model(src, torch.tensor([[BOS, *tgt_ids]]))
    steps = ponder_steps(loaded.model)
    files = [
        plot_ponder(
            steps["encoder"],
            [*(loaded.src_vocab.token(i) for i in src_ids), "</s>"],
            out_dir / "encoder-ponder.png",
            "encoder: ACT steps per source position",
        ),
        plot_ponder(
            steps["decoder"],
            ["<s>", *(loaded.tgt_vocab.token(i) for i in tgt_ids)],
            out_dir / "decoder-ponder.png",
            "decoder: ACT steps per target position",
        ),
    ]
    stdout.print(f"output: {loaded.tgt_vocab.decode(tgt_ids)}")
    stdout.print(f"encoder steps: {steps['encoder'].tolist()}")
    stdout.print(f"wrote {', '.join(str(f) for f in files)}")
