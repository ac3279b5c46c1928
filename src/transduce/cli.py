"""The `transduce` command line: one subcommand per job, options documented in --help."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from .config import ConfigError, DecodeConfig

if TYPE_CHECKING:
    from .metrics import BleuReport
    from .store.load import LoadedModel
    from .train.trainer import Trainer

app = typer.Typer(
    help="Train, decode, evaluate and inspect Transformer sequence-to-sequence models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)  # messages, progress and errors
stdout = Console()  # results


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


def fail(message: str) -> NoReturn:
    """Print a clear error and exit with status 2 (no traceback for user errors)."""
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
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
    from .cost import model_cost
    from .store.load import resolve_model_source

    try:
        cfg, src_v, tgt_v = resolve_model_source(source, overrides or [], src_vocab, tgt_vocab)
        cost = model_cost(cfg.model, src_v, tgt_v, src_len, tgt_len)
    except (ConfigError, ValueError) as exc:
        fail(str(exc))
        return
    table = Table(
        caption="params per application: Table 1 formula and measured (with biases); "
        "mults per application over the whole sequence",
        title=f"{source}: d={cfg.model.d_model} h={cfg.model.heads} d_ff={cfg.model.d_ff} "
        f"vocab={src_v}/{tgt_v} m={src_len} n={tgt_len}",
    )
    for col in ("side", "sub-model", "x", "Table 1", "measured", "mults"):
        table.add_column(col, justify="left" if col in ("side", "sub-model") else "right", no_wrap=True)
    for r in cost.rows:
        table.add_row(
            r.side, r.module, str(r.times), f"{r.params_formula:,}", f"{r.params_measured:,}", f"{r.mults:,}"
        )
    table.add_row("-", "embeddings, output, rest", "1", "-", f"{cost.embedding_params:,}", "-")
    stdout.print(table)
    total, fwd = cost.total_params, cost.forward_flops
    stdout.print(f"total parameters: {total:,} ({total / 1e6:.2f}M)")
    stdout.print(f"forward FLOPs per target token: {fwd / 1e6:.1f}M; training (3x): {3 * fwd / 1e6:.1f}M")


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
        float | None,
        typer.Option(
            help="Drop training pairs whose length ratio exceeds this (0 = off); default 3, off for "
            "--source-format tree (bracket tokens make tree sources several times longer)."
        ),
    ] = None,
    empty: Annotated[str, typer.Option(help="Pairs with an empty side: skip (counted) or reject.")] = "skip",
    tabs: Annotated[str, typer.Option(help="Tabs inside a line: space (replace) or reject.")] = "space",
    control: Annotated[
        str, typer.Option(help="Pairs with control characters: skip (counted, first one shown) or reject.")
    ] = "skip",
    task: Annotated[
        str | None,
        typer.Option(
            help="Instead of text files, generate a task (copy, reverse, addition, lte), or 'parse': "
            "DATA_DIR holds treebank files train.trees, dev.trees and optional test.trees."
        ),
    ] = None,
    trees: Annotated[str, typer.Option(help="With --task parse: the treebank file suffix.")] = "trees",
    source_format: Annotated[
        str,
        typer.Option(
            help="text, or tree: source lines are bracketed trees, linearised for the encoder "
            "(tree-to-string)."
        ),
    ] = "text",
    tree_tags: Annotated[
        bool, typer.Option(help="With --source-format tree: keep POS tags in the linearised source.")
    ] = True,
    factors: Annotated[
        int, typer.Option(help="Source tokens are word|tag1|...|tagN with this many tags (factored input).")
    ] = 0,
    factor_sep: Annotated[str, typer.Option(help="Separator between a word and its tags.")] = "|",
    source_trees: Annotated[
        str | None,
        typer.Option(
            help="Syntax trees for syntax-aware attention: 'tree' reads {split}.SRC.tree (bracketed, "
            "one per line), 'conllu' reads {split}.SRC.conllu (dependency heads)."
        ),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="data.* overrides for --task, e.g. --set data.task_train_max_len=40."),
    ] = None,
    force: Force = False,
) -> None:
    """Validate parallel text, learn BPE, write a binarised dataset (a no-op when up to date).

    -o is written atomically. An existing -o is replaced only if `prepare` wrote it; anything else
    (a file, a foreign or non-empty directory, a link) needs --force, and an -o that contains or
    lies inside an input file is always refused."""
    from .data.corpus import CorpusError
    from .data.prepare import PrepareOptions, prepare_generated, prepare_parse, prepare_text, ratio_limit
    from .data.source import SourceFormat
    from .fileio import OutputError

    try:
        if task == "parse":
            if data_dir is None:
                fail("--task parse needs a DATA_DIR with train/dev treebank files")
                return
            report = prepare_parse(data_dir, out, trees, max_len, force=force)
            if report["up_to_date"]:
                console.print(f"{out} is up to date with its inputs; nothing to do")
            for name, r in report.get("splits", {}).items():
                console.print(f"{name}: {r['trees']} trees; skipped {r['skipped_too_long']} too long")
            return
        if task is not None:
            dataset = prepare_generated(task, overrides or [], out, force=force)
            console.print(
                f"{task}: "
                + ", ".join(f"{k} {v}" for k, v in dataset.meta.sizes.items())
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
            ratio_limit(max_ratio, source_format),
            empty,
            tabs,
            SourceFormat(source_format, tree_tags, factors, factor_sep, source_trees),
            control=control,
        )
        report = prepare_text(data_dir, out, opts, force=force)
    except (CorpusError, ConfigError, OutputError, ValueError) as exc:
        fail(str(exc))
    except OSError as exc:  # e.g. the disk filled up: the atomic write left the old output in place
        fail(f"cannot write {out}: {exc.strerror or exc}")
        return
    if report["up_to_date"]:
        console.print(f"{out} is up to date with its inputs; nothing to do")
        return
    for name, r in report["splits"].items():
        console.print(
            f"{name}: {r['pairs']} pairs kept; skipped {r['skipped_empty']} empty, "
            f"{r['skipped_too_long']} too long, {r['skipped_ratio']} over the length ratio, "
            f"{r['skipped_control']} with control characters; {r['tabs_replaced']} lines had tabs replaced"
            + (f" (first control character: {r['first_control']})" if r["first_control"] else "")
        )
    console.print(f"dataset written to {out}")


@app.command()
def train(
    config: Annotated[str, typer.Argument(help="A preset or a TOML/YAML config file.")],
    overrides: Overrides = None,
    run_dir: Annotated[
        Path | None, typer.Option(help="Where checkpoints and logs go; default runs/<config name>.")
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue from the newest intact checkpoint in the run directory.")
    ] = True,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
) -> None:
    """Train with the paper's recipe; launch with `torchrun --nproc_per_node N` for several processes."""
    from .config import load_config
    from .data.dataset import DatasetError
    from .fileio import OutputError
    from .train.build import run_directory, setup_distributed
    from .train.trainer import Trainer, TrainingError

    try:
        cfg = load_config(config, overrides or [])
        run = run_directory(config, run_dir, resume)
    except (ConfigError, OutputError) as exc:
        fail(str(exc))
        return
    env = setup_distributed()
    try:
        trainer = Trainer(cfg, run, env, show_progress=progress)
        metrics = trainer.fit(resume=resume)
    except (ConfigError, DatasetError, TrainingError, OutputError) as exc:
        fail(str(exc))
        return
    if env.main:
        show_samples(trainer)
        console.print(f"finished at step {trainer.state.step}; checkpoints in {run / 'checkpoints'}")
        if metrics:
            console.print(", ".join(f"{k} {v:.4g}" for k, v in metrics.items()))


def show_samples(trainer: Trainer, count: int = 5) -> None:
    """Print a few dev examples with the model's greedy output."""
    table = Table(title="dev samples (greedy)")
    for col in ("source", "reference", "output", "ok"):
        table.add_column(col)
    for source, reference, output in trainer.samples(count):
        table.add_row(source, reference, output, "yes" if output == reference else "no")
    stdout.print(table)


@app.command()
def average(
    checkpoints: Annotated[
        list[Path] | None, typer.Argument(help="Checkpoint directories to average.")
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the averaged checkpoint.")] = Path(
        "averaged"
    ),
    last: Annotated[
        int | None, typer.Option(help="Average the last K checkpoints of --run-dir instead.")
    ] = None,
    run_dir: Annotated[Path | None, typer.Option(help="Run directory for --last.")] = None,
    force: Force = False,
) -> None:
    """Average checkpoint parameters (the paper: last 5 for base, last 20 for big).

    The checkpoints must share architecture and vocabularies. The output records which
    checkpoints (and steps) it averages; an existing -o is replaced only if `average` wrote it."""
    from .fileio import OutputError
    from .store.average import last_checkpoints, write_average
    from .store.checkpoint import CheckpointError

    try:
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
    except (CheckpointError, OutputError) as exc:
        fail(str(exc))
    steps = ", ".join(str(a.step) for a in averaged.meta.averaged_from)
    console.print(f"averaged {len(paths)} checkpoints (steps {steps}) into {out}")


def _read_input(path: Path | None) -> list[str]:
    """Lines of a file, or of stdin; invalid UTF-8 is an error naming the line."""
    from .data.corpus import CorpusError, read_input

    try:
        return read_input(path)
    except CorpusError as exc:
        fail(str(exc))


def _check_output(path: Path | None) -> None:
    """Refuse an unwritable -o before any decoding is spent on it."""
    from .fileio import OutputError, check_output_file

    try:
        if path is not None:
            check_output_file(path)
    except OutputError as exc:
        fail(str(exc))


def _write_output(path: Path | None, lines: list[str]) -> None:
    from .fileio import OutputError, write_output_file

    try:
        write_output_file(path, "".join(line + "\n" for line in lines))
    except (OutputError, OSError) as exc:
        fail(f"cannot write {path}: {exc}")


Quantize = Annotated[
    str,
    typer.Option(
        help="none (float32; on CPU with weights pre-packed for oneDNN), or int8: dynamic int8 "
        "quantisation of the linear layers (CPU decoding)."
    ),
]
Threads = Annotated[int | None, typer.Option(help="CPU threads for PyTorch (>= 1).")]


def _load(checkpoint: Path, quantize: str | None = None, threads: int | None = None) -> LoadedModel:
    """The model behind a checkpoint or run directory (prepared for decoding when `quantize` is
    given), or a clear error and exit status 2."""
    from .store.checkpoint import CheckpointError
    from .store.load import load_for_decoding, load_model

    try:
        if quantize is None:
            return load_model(checkpoint)
        return load_for_decoding(checkpoint, quantize, threads)
    except (CheckpointError, ValueError) as exc:
        fail(str(exc))


def _options(loaded: LoadedModel, **given: object) -> DecodeConfig:
    from .decode.pipeline import decode_options

    try:
        return decode_options(loaded.config.decode, **given)
    except ConfigError as exc:
        fail(str(exc))


@app.command()
def translate(
    checkpoint: Annotated[
        Path, typer.Argument(help="A checkpoint directory, or a run directory (its best checkpoint).")
    ],
    input: Annotated[Path | None, typer.Option("--input", "-i", help="Input file; default stdin.")] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Output file (a regular file is replaced atomically; links are followed; devices and "
            "pipes are written through); default or '-': stdout.",
        ),
    ] = None,
    beam: Annotated[
        int | None, typer.Option(help="Beam size (default from the checkpoint's config, paper: 4).")
    ] = None,
    alpha: Annotated[float | None, typer.Option(help="Length penalty exponent (paper: 0.6).")] = None,
    greedy: Annotated[bool, typer.Option(help="Greedy search instead of beam search.")] = False,
    nbest: Annotated[
        int | None, typer.Option(help="Print the n best (n <= beam) as 'line ||| text ||| score'.")
    ] = None,
    max_len_a: Annotated[
        float | None, typer.Option(help="Max output length = a * source length + b.")
    ] = None,
    max_len_b: Annotated[int | None, typer.Option(help="See --max-len-a (paper: b = 50).")] = None,
    min_len: Annotated[
        int | None, typer.Option(help="Minimum output length (EOS blocked before it).")
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Token budget of a decoding batch.")] = None,
    max_src_len: Annotated[
        int, typer.Option(help="Truncate longer inputs (in subword tokens, >= 1), with a warning.")
    ] = 1024,
    threads: Threads = None,
    src_trees: Annotated[
        Path | None,
        typer.Option(help="Syntax-aware models: source trees (.tree or .conllu), one per non-empty line."),
    ] = None,
    quantize: Quantize = "none",
) -> None:
    """Translate lines: input order and line count kept; empty lines give empty lines.

    Input lines are in the model's source format: plain text, bracketed trees (tree-to-string
    models) or word|tag tokens (factored models). Parsing models print bracketed trees."""
    from rich.progress import Progress

    from .decode.pipeline import output_rows, translate_lines

    _check_output(output)
    loaded = _load(checkpoint, quantize, threads)
    opts = _options(
        loaded,
        beam=beam,
        alpha=alpha,
        nbest=nbest,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        min_len=min_len,
        max_tokens=max_tokens,
    )
    lines = _read_input(input)
    with Progress(console=console, disable=input is None) as progress:
        task = progress.add_task("translating", total=len(lines))
        try:
            outputs, encoded = translate_lines(
                loaded, lines, opts, greedy, src_trees, max_src_len, lambda n: progress.advance(task, n)
            )
        except ValueError as exc:
            fail(str(exc))
    if encoded.truncated:
        console.print(f"[yellow]warning:[/] {encoded.truncated} lines truncated to {max_src_len} tokens")
    _write_output(output, output_rows(outputs, nbest=opts.nbest > 1 and not greedy))


@app.command()
def evaluate(
    checkpoint: Annotated[
        Path | None, typer.Argument(help="Checkpoint or run directory (not needed with --hyp).")
    ] = None,
    src: Annotated[Path | None, typer.Option(help="Source file to translate and score.")] = None,
    ref: Annotated[
        list[Path] | None,
        typer.Option(help="Reference file (one line per segment); repeat for several references."),
    ] = None,
    hyp: Annotated[
        Path | None, typer.Option(help="Score this existing output instead of translating.")
    ] = None,
    split: Annotated[
        str | None, typer.Option(help="For generated-task models: dev, test or test_long.")
    ] = None,
    trees: Annotated[
        Path | None,
        typer.Option(
            help="Gold treebank: parse its sentences with a parsing model (or score --hyp trees) and "
            "report labelled bracket precision/recall/F1 with EVALB conventions."
        ),
    ] = None,
    greedy: Annotated[
        bool, typer.Option(help="Greedy search instead of the checkpoint's beam settings.")
    ] = False,
    beam: Annotated[int | None, typer.Option(help="Beam size override.")] = None,
    alpha: Annotated[float | None, typer.Option(help="Length penalty override.")] = None,
    src_trees: Annotated[
        Path | None, typer.Option(help="Syntax-aware models: the --src file's trees (.tree or .conllu).")
    ] = None,
    threads: Threads = None,
    quantize: Quantize = "none",
) -> None:
    """BLEU and chrF (sacrebleu, signatures printed), perplexity, task accuracy, or bracket F1."""
    from . import evaluate as ev
    from .metrics import corpus_scores

    refs = [_read_input(r) for r in ref or []]
    try:
        if trees is not None:
            _evaluate_parse(checkpoint, trees, hyp, greedy, beam, alpha, quantize, threads)
            return
        if hyp is not None:
            if not refs:
                fail("--hyp needs --ref")
            _print_scores(corpus_scores(_read_input(hyp), *refs))
            return
        if checkpoint is None:
            fail("give a CHECKPOINT (with --src/--ref or --split), or --hyp with --ref")
        loaded = _load(checkpoint, quantize, threads)
        opts = _options(loaded, beam=beam, alpha=alpha, nbest=1)
        if split is not None:
            r = ev.evaluate_split(loaded, split, opts, greedy)
            stdout.print(
                f"{split}: char accuracy {r.accuracy.char:.4f}, sequence accuracy {r.accuracy.sequence:.4f}, "
                f"perplexity {r.perplexity:.4f} ({r.examples} examples)"
            )
            return
        if src is None or not refs:
            fail("give --src and --ref files (or --split for generated tasks)")
        report = ev.evaluate_text(loaded, _read_input(src), refs, opts, greedy, src_trees)
    except ValueError as exc:
        fail(str(exc))
    _print_scores(report.scores)
    stdout.print(f"reference perplexity {report.perplexity:.4f} over {report.tokens} tokens")


def _evaluate_parse(
    checkpoint: Path | None,
    gold_file: Path,
    hyp: Path | None,
    greedy: bool,
    beam: int | None,
    alpha: float | None,
    quantize: str,
    threads: int | None,
) -> None:
    """Bracket scores of a parsing model's output (or of a file of trees) against gold trees."""
    from .data.trees import read_treebank
    from .evalb import corpus_score
    from .evaluate import evaluate_parser

    golds = read_treebank(gold_file)
    if hyp is not None:
        score = corpus_score(golds, read_treebank(hyp))
    elif checkpoint is None:
        fail("--trees needs a parsing CHECKPOINT, or --hyp with parsed trees")
    else:
        loaded = _load(checkpoint, quantize, threads)
        score = evaluate_parser(loaded, golds, _options(loaded, beam=beam, alpha=alpha, nbest=1), greedy)
    stdout.print(
        f"bracketing precision {100 * score.precision:.2f}  recall {100 * score.recall:.2f}  "
        f"F1 {100 * score.f1:.2f}  ({score.matched} matched, {score.gold} gold, {score.test} test "
        f"brackets; {len(golds)} sentences; EVALB conventions)",
        soft_wrap=True,
    )


def _print_scores(report: BleuReport) -> None:
    stdout.print(f"BLEU {report.bleu:.2f}  ({report.bleu_signature})", highlight=False, soft_wrap=True)
    stdout.print(f"chrF {report.chrf:.2f}  ({report.chrf_signature})", highlight=False, soft_wrap=True)
    stdout.print(f"tokenised BLEU (intl) {report.tokenized_bleu:.2f}", highlight=False)


@app.command()
def attention(
    checkpoint: Annotated[Path, typer.Argument(help="Checkpoint or run directory.")],
    source: Annotated[str, typer.Argument(help="Source text.")],
    target: Annotated[
        str | None, typer.Argument(help="Target text; default: the model's greedy output.")
    ] = None,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Folder for the PNG files.")] = Path(
        "attention"
    ),
    layers: Annotated[
        str | None, typer.Option(help="Comma-separated layer numbers (from 0); default all.")
    ] = None,
    heads: Annotated[str | None, typer.Option(help="Comma-separated head numbers; default all.")] = None,
) -> None:
    """Write attention heat maps (encoder self, decoder self, cross) per layer, one panel per head."""
    from .attention_plot import collect_attention, plot_attention
    from .decode.search import greedy as greedy_search

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
        from .data.batching import encode_sources

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
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Folder for the PNG files.")] = Path("ponder"),
) -> None:
    """Plot ACT steps per position for the encoder (source) and decoder (greedy output)."""
    import torch

    from .attention_plot import plot_ponder
    from .data.batching import encode_sources
    from .data.vocab import BOS
    from .decode.search import greedy as greedy_search
    from .model.universal import ponder_steps

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


import_app = typer.Typer(
    help="Convert other toolkits' models into transduce checkpoints.", no_args_is_help=True
)
app.add_typer(import_app, name="import")


@import_app.command("marian")
def import_marian_cmd(
    hf_dir: Annotated[
        Path,
        typer.Argument(
            help="A Hugging Face MarianMTModel directory (config.json, "
            "model.safetensors, source.spm, target.spm, vocab.json)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Checkpoint directory to write.")] = Path(
        "imported"
    ),
    force: Force = False,
) -> None:
    """Import a MarianMTModel (e.g. an OPUS-MT model) as a transduce checkpoint.

    An existing -o is replaced only if `import marian` wrote it (else --force)."""
    from .fileio import OutputError
    from .interop.marian import MarianError, import_marian

    try:
        cfg = import_marian(hf_dir, out, force)
    except (MarianError, OutputError) as exc:
        fail(str(exc))
        return
    console.print(
        f"imported {hf_dir} ({cfg.model.encoder_layers}+{cfg.model.decoder_layers} layers, "
        f"d={cfg.model.d_model}) into {out}"
    )


@app.command("export")
def export_cmd(
    checkpoint: Annotated[Path, typer.Argument(help="Checkpoint or run directory.")],
    format: Annotated[
        str,
        typer.Option(help="marian (a Hugging Face MarianMTModel directory) or ctranslate2."),
    ] = "marian",
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write.")] = Path("exported"),
    quantization: Annotated[
        str, typer.Option(help="ctranslate2 weights: float32, int8, int8_float32, int16, float16, ...")
    ] = "float32",
    force: Force = False,
) -> None:
    """Export a checkpoint as a MarianMTModel directory or a CTranslate2 model (via Marian's layout).

    An existing -o is replaced only if `export` wrote it (else --force)."""
    from .fileio import OutputError
    from .interop.ctranslate2 import QUANTIZATIONS, export_ctranslate2
    from .interop.marian import MarianError, export_marian
    from .store.checkpoint import CheckpointError

    if format not in ("marian", "ctranslate2"):
        fail(f"--format {format!r}: allowed: marian, ctranslate2")
    if quantization not in QUANTIZATIONS:
        fail(f"--quantization {quantization!r}: allowed: {', '.join(QUANTIZATIONS)}")
    try:
        if format == "marian":
            export_marian(checkpoint, out, force)
        else:
            export_ctranslate2(checkpoint, out, quantization, force)
    except (MarianError, CheckpointError, OutputError) as exc:
        fail(str(exc))
        return
    console.print(f"exported {checkpoint} to {out} ({format})")


@app.command()
def serve(
    checkpoint: Annotated[Path, typer.Argument(help="A checkpoint directory, or a run directory.")],
    host: Annotated[str, typer.Option(help="Address to bind; loopback by default.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(help="Require this X-API-Key header (default: $TRANSDUCE_API_KEY); empty: error."),
    ] = None,
    max_segments: Annotated[int, typer.Option(help="Most segments per request (more: 413).")] = 64,
    max_chars: Annotated[int, typer.Option(help="Most characters per segment (more: 413).")] = 2000,
    max_body_bytes: Annotated[
        int, typer.Option(help="Largest request body in bytes (more: 413, read no further).")
    ] = 1 << 20,
    max_request_tokens: Annotated[
        int, typer.Option(help="Most work per request, in source tokens (with EOS) x beam (more: 413).")
    ] = 32768,
    max_batch_tokens: Annotated[
        int,
        typer.Option(
            help="Most work per decode call (source tokens x beam), so also per segment (more: 413); "
            "larger requests are decoded in such calls, taking turns with other requests."
        ),
    ] = 4096,
    max_queued_tokens: Annotated[
        int, typer.Option(help="Most work waiting to be decoded (source tokens x beam); more: 503.")
    ] = 65536,
    request_timeout: Annotated[
        float,
        typer.Option(help="Seconds a request may take, queueing included (more: 503, its work dropped)."),
    ] = 60.0,
    max_wait_ms: Annotated[
        float, typer.Option(help="How long the first queued request waits for others to batch with.")
    ] = 10.0,
    batching: Annotated[bool, typer.Option(help="Dynamic batching of concurrent requests.")] = True,
    graceful_seconds: Annotated[
        float,
        typer.Option(
            help="On SIGINT/SIGTERM, how long in-flight requests may still finish; then the rest get 503 "
            "and the process exits, even mid-decode."
        ),
    ] = 10.0,
    threads: Annotated[int | None, typer.Option(help="CPU threads for PyTorch.")] = None,
    quantize: Quantize = "none",
) -> None:
    """A REST translation server: POST /translate, /attention; GET /health, /info, / (demo page).

    The OpenAPI schema is at /openapi.json (no /docs page: it would load its scripts from a CDN)."""
    from .serve import Limits, Listen, create_app, is_loopback, run_server, server_api_key

    try:
        key = server_api_key(api_key)
        listen = Listen(host, port, graceful_seconds)
        limits = Limits(
            max_segments=max_segments,
            max_chars=max_chars,
            max_body_bytes=max_body_bytes,
            max_request_tokens=max_request_tokens,
            max_batch_tokens=max_batch_tokens,
            max_queued_tokens=max_queued_tokens,
            request_timeout=request_timeout,
            max_wait_ms=max_wait_ms,
            batching=batching,
        )
    except ValueError as exc:
        fail(str(exc))
    if not is_loopback(host) and key is None:
        console.print(
            f"[yellow]warning:[/] serving on {host} without an API key; anyone who can reach it may use it "
            "(set --api-key or TRANSDUCE_API_KEY)"
        )
    loaded = _load(checkpoint, quantize, threads)
    try:
        application = create_app(loaded, limits, key)
    except ValueError as exc:
        fail(str(exc))
    run_server(application, listen)


def main() -> None:
    app()
