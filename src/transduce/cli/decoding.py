"""Decoding: `translate` lines, `evaluate` a checkpoint or an output file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..config import ConfigError, DecodeConfig
from .common import (
    Alpha,
    Beam,
    Checkpoint,
    Greedy,
    Quantize,
    Threads,
    app,
    console,
    fail,
    loaded_model,
    stdout,
    user_errors,
)

if TYPE_CHECKING:
    from ..metrics import BleuReport
    from ..store.load import LoadedModel


def _read_input(path: Path | None) -> list[str]:
    """Lines of a file, or of stdin; invalid UTF-8 is an error naming the line."""
    from ..data.corpus import CorpusError, read_input

    with user_errors(CorpusError):
        return read_input(path)


def _check_output(path: Path | None, inputs: list[Path]) -> None:
    """Refuse an unwritable -o, or one that would overwrite an input, before any decoding."""
    from ..fileio import OutputError, check_output_file

    with user_errors(OutputError):
        check_output_file(path or Path("-"), inputs)


def _write_output(path: Path | None, lines: list[str]) -> None:
    from ..fileio import OutputError, write_output_file

    try:
        write_output_file(path, "".join(line + "\n" for line in lines))
    except (OutputError, OSError) as exc:
        fail(f"cannot write {path}: {exc}")


def _options(loaded: LoadedModel, **given: object) -> DecodeConfig:
    """The checkpoint's search settings with the given options overlaid."""
    from ..decode.pipeline import decode_options

    with user_errors(ConfigError):
        return decode_options(loaded.config.decode, **given)


@app.command()
def translate(
    checkpoint: Checkpoint,
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
    beam: Beam = None,
    alpha: Alpha = None,
    greedy: Greedy = False,
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

    from ..decode.pipeline import output_rows, translate_lines

    _check_output(output, [p for p in (input, src_trees) if p is not None])
    loaded = loaded_model(checkpoint, quantize, threads)
    _check_output(output, [loaded.path])
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
    with Progress(console=console, disable=input is None) as progress, user_errors(ValueError):
        task = progress.add_task("translating", total=len(lines))
        outputs, encoded = translate_lines(
            loaded, lines, opts, greedy, src_trees, max_src_len, lambda n: progress.advance(task, n)
        )
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
        str | None,
        typer.Option(help="For generated-task models: dev, test or test_long."),
    ] = None,
    trees: Annotated[
        Path | None,
        typer.Option(
            help="Gold treebank: parse its sentences with a parsing model (or score --hyp trees) and "
            "report labelled bracket precision/recall/F1 with EVALB conventions."
        ),
    ] = None,
    greedy: Greedy = False,
    beam: Beam = None,
    alpha: Alpha = None,
    src_trees: Annotated[
        Path | None,
        typer.Option(help="Syntax-aware models: the --src file's trees (.tree or .conllu)."),
    ] = None,
    threads: Threads = None,
    quantize: Quantize = "none",
) -> None:
    """BLEU and chrF (sacrebleu, signatures printed), perplexity, task accuracy, or bracket F1."""
    from .. import evaluate as ev
    from ..metrics import corpus_scores

    refs = [_read_input(r) for r in ref or []]
    with user_errors(ValueError):
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
        loaded = loaded_model(checkpoint, quantize, threads)
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
    from ..data.trees import read_treebank
    from ..evalb import corpus_score
    from ..evaluate import evaluate_parser

    golds = read_treebank(gold_file)
    if hyp is not None:
        score = corpus_score(golds, read_treebank(hyp))
    elif checkpoint is None:
        fail("--trees needs a parsing CHECKPOINT, or --hyp with parsed trees")
    else:
        loaded = loaded_model(checkpoint, quantize, threads)
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
