"""The `transduce` command line: one subcommand per job, options documented in --help."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .config import ConfigError

app = typer.Typer(
    help="Train, decode, evaluate and inspect Transformer sequence-to-sequence models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()


@app.callback()
def _group() -> None:
    """Train, decode, evaluate and inspect Transformer sequence-to-sequence models."""


Overrides = Annotated[
    list[str] | None,
    typer.Argument(help="Dotted config overrides, e.g. model.d_model=256 train.steps=2000."),
]


def fail(message: str) -> None:
    """Print a clear error and exit with status 2 (no traceback for user errors)."""
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(2)


@app.command()
def inspect(
    source: Annotated[
        str,
        typer.Argument(help="A preset (small, base, big, parse), a config file, or a checkpoint directory."),
    ],
    overrides: Overrides = None,
    src_vocab: Annotated[int, typer.Option(help="Source vocabulary size (ignored for checkpoints).")] = 37000,
    tgt_vocab: Annotated[
        int | None, typer.Option(help="Target vocabulary size; default: the source's (shared).")
    ] = None,
    src_len: Annotated[int, typer.Option(help="Source length m used for the time column.")] = 32,
    tgt_len: Annotated[int, typer.Option(help="Target length n used for the time column.")] = 32,
) -> None:
    """Per-module parameter counts and FLOPs per token (the survey's Table 1) and the totals."""
    from .cost import cost_table, embedding_params, flops_per_token
    from .model import build_model
    from .models_io import resolve_model_source

    try:
        cfg, src_v, tgt_v = resolve_model_source(source, overrides or [], src_vocab, tgt_vocab)
        model = build_model(cfg.model, src_v, tgt_v)
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        fail(str(exc))
        return
    rows = cost_table(cfg.model, src_len, tgt_len, model)
    table = Table(
        caption="params per application: Table 1 formula and measured (with biases); "
        "mults per application over the whole sequence",
        title=f"{source}: d={cfg.model.d_model} h={cfg.model.heads} d_ff={cfg.model.d_ff} "
        f"vocab={src_v}/{tgt_v} m={src_len} n={tgt_len}",
    )
    for col in ("side", "sub-model", "x", "Table 1", "measured", "mults"):
        table.add_column(col, justify="left" if col in ("side", "sub-model") else "right", no_wrap=True)
    for r in rows:
        table.add_row(
            r.side, r.module, str(r.times), f"{r.params_formula:,}", f"{r.params_measured:,}", f"{r.mults:,}"
        )
    emb = embedding_params(model)
    table.add_row("-", "embeddings + output", "1", "-", f"{emb:,}", "-")
    console.print(table)
    total = sum(p.numel() for p in model.parameters())
    fwd = flops_per_token(cfg.model, tgt_v, src_len, tgt_len)
    console.print(f"total parameters: {total:,} ({total / 1e6:.2f}M)")
    console.print(f"forward FLOPs per target token: {fwd / 1e6:.1f}M; training (3x): {3 * fwd / 1e6:.1f}M")


@app.command()
def prepare(
    data_dir: Annotated[
        Path | None, typer.Argument(help="Folder with train.SRC/train.TGT, dev.* and optional test.* files.")
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Dataset directory to write.")] = Path(
        "data/prepared"
    ),
    src: Annotated[str, typer.Option(help="Source file suffix (language code), e.g. de.")] = "src",
    tgt: Annotated[str, typer.Option(help="Target file suffix, e.g. en.")] = "tgt",
    vocab_size: Annotated[int, typer.Option(help="BPE vocabulary size (the paper: 37000 shared).")] = 37000,
    separate_vocab: Annotated[
        bool, typer.Option(help="Learn separate source and target vocabularies.")
    ] = False,
    max_len: Annotated[
        int, typer.Option(help="Drop training pairs with a side longer than this (subword tokens).")
    ] = 256,
    max_ratio: Annotated[
        float, typer.Option(help="Drop training pairs whose length ratio exceeds this (0 = off).")
    ] = 3.0,
    empty: Annotated[str, typer.Option(help="Pairs with an empty side: skip (counted) or reject.")] = "skip",
    tabs: Annotated[str, typer.Option(help="Tabs inside a line: space (replace) or reject.")] = "space",
    task: Annotated[
        str | None, typer.Option(help="Instead of text files, generate a task: copy, reverse, addition, lte.")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="data.* overrides for --task, e.g. --set data.task_train_max_len=40."),
    ] = None,
) -> None:
    """Validate parallel text, learn BPE, write a binarised dataset (a no-op when up to date)."""
    from .config import load_config
    from .data.corpus import CorpusError
    from .data.dataset import prepare_task
    from .data.prepare import PrepareOptions, prepare_text

    if empty not in ("skip", "reject") or tabs not in ("space", "reject"):
        fail("--empty takes skip or reject; --tabs takes space or reject")
    try:
        if task is not None:
            cfg = load_config("small", [f"data.task={task}", *(overrides or [])])
            dataset = prepare_task(cfg.data, out)
            console.print(
                f"{task}: "
                + ", ".join(f"{k} {v}" for k, v in dataset.meta["sizes"].items())
                + f" examples in {out}"
            )
            return
        if data_dir is None:
            fail("give a DATA_DIR with parallel text files, or --task NAME")
            return
        opts = PrepareOptions(
            src,
            tgt,
            vocab_size,
            not separate_vocab,
            max_len,
            max_ratio if max_ratio > 0 else None,
            empty,
            tabs,
        )
        report = prepare_text(data_dir, out, opts)
    except (CorpusError, ConfigError, ValueError) as exc:
        fail(str(exc))
        return
    if report["up_to_date"]:
        console.print(f"{out} is up to date with its inputs; nothing to do")
        return
    for name, r in report["splits"].items():
        console.print(
            f"{name}: {r['pairs']} pairs kept; skipped {r['skipped_empty']} empty, "
            f"{r['skipped_too_long']} too long, {r['skipped_ratio']} over the length ratio; "
            f"{r['tabs_replaced']} lines had tabs replaced"
        )
    console.print(f"dataset written to {out}")


def main() -> None:
    app()
