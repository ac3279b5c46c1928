"""Decoding: `translate` lines, `evaluate` a checkpoint or an output file."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..choices import SPLITS
from ..config import DecodeConfig
from .common import (
    Advance,
    Alpha,
    Beam,
    Checkpoints,
    Device,
    EngineOption,
    Greedy,
    NumSamples,
    Quantize,
    Sample,
    Seed,
    ShortlistFile,
    StaticCache,
    Temperature,
    Threads,
    TopK,
    TopP,
    app,
    console,
    decode_progress,
    engine_honours,
    fail,
    loaded_models,
    read_shortlist,
    stdout,
    user_errors,
)
from .metavars import one_of

if TYPE_CHECKING:
    from ..decode.shortlist import Shortlist
    from ..evaluate import AccuracyReport, TextReport
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
    except OutputError as exc:  # a WriteError already names the path
        fail(str(exc))
    except OSError as exc:  # a device or pipe written through
        fail(f"cannot write {path}: {exc.strerror or exc}")


@contextlib.contextmanager
def _target_words(path: Path | None) -> Iterator[None]:
    """A word of the target-side file `path` that the model's vocabulary cannot spell, as one
    error naming the file, line and word."""
    from ..decode.targets import UnknownWordError

    try:
        yield
    except UnknownWordError as exc:
        fail(f"{path}:{exc.line}: {exc.reason}")


def _options(loaded: list[LoadedModel], **given: object) -> DecodeConfig:
    """The first checkpoint's search settings with the given options overlaid (`greedy` and
    `sample`: flags naming the search), checked against the engine that decodes the checkpoints
    before any decoding; errors name the command-line options (`--top-k`)."""
    from ..decode.options import OptionsError, decode_options
    from ..decode.pipeline import decoding_engine

    try:
        options = decode_options(loaded[0].config.decode, **given)
        decoding_engine(loaded)[1].check(options)
    except OptionsError as exc:
        fail(exc.describe(lambda field: "--" + field.replace("_", "-")))
    except ValueError as exc:  # checkpoints that cannot decode together
        fail(str(exc))
    return options


@contextlib.contextmanager
def _named_options() -> Iterator[None]:
    """An OptionsError raised while decoding (one that depends on the inputs, as a --min-len above
    an input's length limit) as one error line naming the command-line options."""
    from ..decode.options import OptionsError

    try:
        yield
    except OptionsError as exc:
        fail(exc.describe(lambda field: "--" + field.replace("_", "-")))


def _decoding_given(params: dict[str, object]) -> dict[str, object]:
    """The decoding options a command was given (its `DecodeConfig` fields and the --greedy and
    --sample flags), by name; absent ones, and flags left off, are the checkpoint's."""
    names = {*DecodeConfig.model_fields, "greedy", "sample"}
    return {
        name: value
        for name, value in params.items()
        if name in names and value is not None and value is not False
    }


TargetLanguage = Annotated[
    str | None,
    typer.Option(
        help="A multilingual model (`prepare --pair`): the language to translate into (e.g. fr, or fra), "
        "for every line that does not start with one of the model's tags (>>fra<<) itself."
    ),
]
SourceLanguage = Annotated[
    str | None,
    typer.Option(
        help="A model that reads the source language from a token (an `import m2m100` checkpoint: "
        "M2M100, NLLB): the source's language (e.g. en, or eng_Latn), with --tgt-lang."
    ),
]
Prefix = Annotated[
    Path | None,
    typer.Option(
        help="Forced prefixes: one line per input line, target text every output of that line starts "
        "with (search continues after it; an empty line forces nothing)."
    ),
]


InputFile = Annotated[
    Path | None,
    typer.Option(
        "--input",
        "-i",
        help="Input file; default stdin, answered line by line as it arrives (lines already waiting in "
        "a pipe are decoded together, up to 4,096 at a time, as a file's are).",
    ),
]
OutputFile = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Output file (a regular file is replaced atomically; links are followed; devices and "
        "pipes are written through); default or '-': stdout.",
    ),
]
NBest = Annotated[int | None, typer.Option(help="Print the n best (n <= beam) as 'line ||| text ||| score'.")]
MaxLenA = Annotated[float | None, typer.Option(help="Max output length = a * source length + b.")]
MaxLenB = Annotated[int | None, typer.Option(help="See --max-len-a (paper: b = 50).")]
MinLen = Annotated[int | None, typer.Option(help="Minimum output length (EOS blocked before it).")]
MaxTokens = Annotated[int | None, typer.Option(help="Token budget of a decoding batch.")]
MaxSrcLen = Annotated[
    int, typer.Option(help="Truncate longer inputs (in subword tokens, >= 1), with a warning.")
]
SourceTrees = Annotated[
    Path | None,
    typer.Option(help="Syntax-aware models: source trees (.tree or .conllu), one per non-empty line."),
]


@app.command()
def translate(
    ctx: typer.Context,
    checkpoints: Checkpoints,
    input: InputFile = None,
    output: OutputFile = None,
    beam: Beam = None,
    alpha: Alpha = None,
    greedy: Greedy = False,
    nbest: NBest = None,
    sample: Sample = False,
    temperature: Temperature = None,
    top_k: TopK = None,
    top_p: TopP = None,
    seed: Seed = None,
    num_samples: NumSamples = None,
    prefix: Prefix = None,
    max_len_a: MaxLenA = None,
    max_len_b: MaxLenB = None,
    min_len: MinLen = None,
    max_tokens: MaxTokens = None,
    max_src_len: MaxSrcLen = 1024,
    threads: Threads = None,
    src_trees: SourceTrees = None,
    quantize: Quantize = "none",
    device: Device = "auto",
    shortlist: ShortlistFile = None,
    static_cache: StaticCache = False,
    engine: EngineOption = "torch",
    tgt_lang: TargetLanguage = None,
    src_lang: SourceLanguage = None,
) -> None:
    """Translate lines: input order and line count kept; empty lines give empty lines.

    Input lines are in the model's source format: plain text, bracketed trees (tree-to-string
    models) or word|tag tokens (factored models). Parsing models print bracketed trees.
    Language models (model.kind=decoder) continue each line, which is their prompt, by greedy
    search, beam search or sampling, and print the continuation (lengths and scores count the
    prompt); classifiers (model.kind=encoder) print each line's label, or a label per token.
    With several checkpoints, decodes with their ensemble. With --nbest > 1 or --num-samples > 1,
    prints every output as 'line ||| text ||| score' (lines numbered from 0)."""
    inputs = [p for p in (input, src_trees, prefix) if p is not None]
    _check_output(output, inputs)
    engine_honours(
        engine,
        src_trees=src_trees,
        static_cache=static_cache,
        prefix_with_shortlist=prefix is not None and shortlist is not None,
    )
    listed = read_shortlist(shortlist)
    loaded = loaded_models(checkpoints, quantize, threads, device, engine, listed)
    _check_output(output, [m.path for m in loaded])
    opts = _options(loaded, **_decoding_given(ctx.params))
    prefixes = _read_input(prefix) if prefix is not None else None
    run = _Translation(
        loaded,
        opts,
        src_trees=src_trees,
        max_src_len=max_src_len,
        listed=listed,
        prefix=prefix,
        prefixes=prefixes,
        tgt_lang=tgt_lang,
        src_lang=src_lang,
    )
    if input is None and (output is None or str(output) == "-"):
        done = _translate_stream(run.rows)
    else:
        lines = _read_input(input)
        with decode_progress("translating", len(lines), show=input is not None) as advance:
            rows = run.rows(lines, 0, advance)
        _write_output(output, rows)
        done = len(lines)
    if prefixes is not None and len(prefixes) != done:
        fail(f"{prefix}: {len(prefixes)} prefix lines for {done} input lines")


@dataclass(frozen=True)
class _Translation:
    """What translate decodes every group of input lines with."""

    loaded: list[LoadedModel]
    opts: DecodeConfig
    src_trees: Path | None
    max_src_len: int
    listed: Shortlist | None
    prefix: Path | None
    prefixes: list[str] | None
    tgt_lang: str | None = None
    src_lang: str | None = None

    def rows(self, lines: list[str], first: int, advance: Advance) -> list[str]:
        """Rows for input lines first, first + 1, ...; their prefixes taken from the same lines."""
        from ..decode.pipeline import output_rows, translate_lines

        forced = None
        if self.prefixes is not None:
            forced = self.prefixes[first : first + len(lines)]
            if len(forced) < len(lines):
                fail(f"{self.prefix}: {len(self.prefixes)} prefix lines for more input lines")
        many = self.opts.num_samples > 1 if self.opts.sample else self.opts.nbest > 1
        with user_errors(ValueError), _target_words(self.prefix), _named_options():
            outputs, encoded = translate_lines(
                self.loaded,
                lines,
                self.opts,
                trees=self.src_trees,
                max_src_len=self.max_src_len,
                tgt_lang=self.tgt_lang,
                src_lang=self.src_lang,
                on_batch=advance,
                prefixes=forced,
                first=first,
                shortlist=self.listed,
                scores=many,  # only n-best rows print them
            )
        if encoded.truncated:
            console.print(
                f"[yellow]warning:[/] {encoded.truncated} lines truncated to {self.max_src_len} tokens"
            )
        return output_rows(outputs, nbest=many, first=first)


def _translate_stream(run: Callable[[list[str], int, Advance], list[str]]) -> int:
    """Translate standard input group by group as lines arrive, writing each group's rows at once
    (an interactive line is answered before the next is typed); returns the number of lines.
    A stdin without a file descriptor (an in-process test runner) is read whole."""
    from ..data.corpus import CorpusError, stream_input

    if sys.stdin is None:
        fail("standard input is closed; give --input FILE")
    try:
        groups: Iterable[list[str]] = stream_input(sys.stdin.fileno())
    except (OSError, ValueError):
        groups = [_read_input(None)]
    done = 0
    with (
        decode_progress("translating", None, show=not sys.stdin.isatty()) as advance,
        user_errors(CorpusError),
    ):
        for lines in groups:
            _write_output(None, run(lines, done, advance))
            done += len(lines)
    return done


KeptTranslations = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Also write the translations of --src to this file, one per line, as translate -o "
        "does (replaced atomically; never one of the inputs).",
    ),
]


def _check_kept(output: Path, without_translations: list[object], inputs: list[Path]) -> None:
    """evaluate -o: refused where nothing is translated (--hyp, --split, --trees), or where it
    would overwrite an input."""
    if any(given is not None for given in without_translations):
        fail("-o keeps the translations of --src; --hyp, --split and --trees make none to keep")
    _check_output(output, inputs)


EvaluatedCheckpoints = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Checkpoint or run directory (not needed with --hyp); several evaluate their ensemble."
    ),
]
EvaluatedSource = Annotated[
    Path | None, typer.Option(help="Source file to translate (a language model's prompts) and score.")
]
References = Annotated[
    list[Path] | None,
    typer.Option(
        help="Reference file (one line per segment); repeat for several references. For a "
        "classifier, one file of labels: one per line, or one per source token."
    ),
]
Hypotheses = Annotated[Path | None, typer.Option(help="Score this existing output instead of translating.")]
Split = Annotated[
    str | None,
    typer.Option(metavar=one_of(SPLITS), help="For models of a generated task: dev, test or test_long."),
]
GoldTrees = Annotated[
    Path | None,
    typer.Option(
        help="Gold treebank: parse its sentences with a parsing model (or score --hyp trees) and "
        "report labelled bracket precision/recall/F1 with EVALB conventions."
    ),
]
EvaluatedSourceTrees = Annotated[
    Path | None, typer.Option(help="Syntax-aware models: the --src file's trees (.tree or .conllu).")
]


@app.command()
def evaluate(
    checkpoints: EvaluatedCheckpoints = None,
    src: EvaluatedSource = None,
    ref: References = None,
    hyp: Hypotheses = None,
    split: Split = None,
    trees: GoldTrees = None,
    greedy: Greedy = False,
    beam: Beam = None,
    alpha: Alpha = None,
    src_trees: EvaluatedSourceTrees = None,
    threads: Threads = None,
    quantize: Quantize = "none",
    device: Device = "auto",
    shortlist: ShortlistFile = None,
    output: KeptTranslations = None,
    static_cache: StaticCache = False,
    engine: EngineOption = "torch",
    tgt_lang: TargetLanguage = None,
    src_lang: SourceLanguage = None,
) -> None:
    """BLEU and chrF (sacrebleu, signatures printed), perplexity, task accuracy, label accuracy of
    classifiers, or bracket F1.

    A language model's perplexity counts its prompts (the --src lines) with the references, as
    training does. The progress display shows sentences/s and output tokens/s. With -o the
    translations scored are kept, which saves decoding them again with translate."""
    from .. import evaluate as ev
    from ..data.kinds import data_kind
    from ..decode.kinds import decoding_for

    if output is not None:
        _check_kept(output, [hyp, split, trees], [p for p in (src, *(ref or []), src_trees) if p is not None])
    refs = [_read_input(r) for r in ref or []]
    engine_honours(engine, src_trees=src_trees, static_cache=static_cache)
    with user_errors(ValueError):
        if trees is not None:
            load = functools.partial(loaded_models, checkpoints or [], quantize, threads, device, engine)
            _evaluate_parse(trees, hyp, load if checkpoints else None, greedy=greedy, beam=beam, alpha=alpha)
            return
        if hyp is not None:
            return _score_hypotheses(
                hyp, refs, src=src, split=split, greedy=greedy, beam=beam, alpha=alpha, tgt_lang=tgt_lang
            )
        if not checkpoints:
            fail("give a CHECKPOINT (with --src/--ref or --split), or --hyp with --ref")
        listed = read_shortlist(shortlist)
        loaded = loaded_models(checkpoints, quantize, threads, device, engine, listed)
        if output is not None:
            _check_output(output, [m.path for m in loaded])
        opts = _options(
            loaded, greedy=greedy or None, beam=beam, alpha=alpha, nbest=1, static_cache=static_cache or None
        )
        if split is not None:
            with decode_progress(f"evaluating {split}", None) as advance:
                r = ev.evaluate_split(loaded, split, opts, on_batch=advance, shortlist=listed)
            _print_accuracy(split, r, data_kind(loaded[0].meta.data_kind).labels)
            return
        if src is None or not refs:
            fail("give --src and --ref files (or --split for generated tasks)")
        sources = _read_input(src)
        if decoding_for(loaded[0].config.model.kind).labels:
            _evaluate_labels(loaded, src, sources, refs, opts, output)
            return
        with decode_progress("evaluating", len(sources)) as advance:
            report = ev.evaluate_text(
                loaded,
                sources,
                refs,
                opts,
                trees=src_trees,
                on_batch=advance,
                shortlist=listed,
                tgt_lang=tgt_lang,
                src_lang=src_lang,
            )
    _print_text_report(report, output)


def _print_text_report(report: TextReport, output: Path | None) -> None:
    """Keep the scored translations (-o), then print the scores and the reference perplexity."""
    if output is not None:
        _write_output(output, report.hypotheses)
    _print_scores(report.scores)
    stdout.print(f"reference perplexity {report.perplexity:.4f} over {report.tokens} tokens")


def _evaluate_labels(
    loaded: list[LoadedModel],
    src: Path,
    sources: list[str],
    refs: list[list[str]],
    opts: DecodeConfig,
    output: Path | None,
) -> None:
    """A classifier's label accuracy on --src against one --ref file of labels."""
    from .. import evaluate as ev

    if output is not None:
        fail("-o keeps translations; a classifier's labels are printed by translate")
    if len(refs) > 1:
        fail("a classifier is evaluated on one --ref file of labels")
    with decode_progress("evaluating", len(sources)) as advance:
        _print_accuracy(str(src), ev.evaluate_labels(loaded, sources, refs[0], opts, advance), True)


@app.command()
def score(
    checkpoints: Checkpoints,
    src: Annotated[Path, typer.Option(help="Source lines.")],
    tgt: Annotated[Path, typer.Option(help="Target lines to score, one per source line.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Output file; default or '-': stdout.")
    ] = None,
    per_token: Annotated[
        bool,
        typer.Option(
            help="Also list each scored token with its log-probability, as TOKEN=LOGPROB (EOS last)."
        ),
    ] = False,
    max_tokens: Annotated[
        int, typer.Option(min=1, help="Token budget of a batch (source plus target tokens).")
    ] = 4096,
    max_src_len: Annotated[
        int, typer.Option(help="Truncate longer sources (in subword tokens, >= 1).")
    ] = 1024,
    src_trees: Annotated[
        Path | None, typer.Option(help="Syntax-aware models: the --src file's trees (.tree or .conllu).")
    ] = None,
    threads: Threads = None,
    quantize: Quantize = "none",
    device: Device = "auto",
    engine: EngineOption = "torch",
    tgt_lang: TargetLanguage = None,
    src_lang: SourceLanguage = None,
) -> None:
    """Forced decoding: how probable the model finds each target given its source.

    One row per pair, in input order: 'log P(target + EOS | source) <TAB> the same per token'
    (natural log; tokens are the target's subwords plus EOS), with --per-token a third column:
    each token scored and its log-probability as TOKEN=LOGPROB, space-separated, in order, EOS
    last as </s> (tokens as the vocabulary writes them: sentencepiece pieces mark a space with
    ▁; the log-probability follows the last '='). With several checkpoints, scores under their
    ensemble (the log of their averaged probabilities). A language model scores its prompt (the
    source), the target and EOS as one sequence; a classifier the target's labels (no EOS)."""
    from ..decode.pipeline import score_lines

    _check_output(output, [p for p in (src, tgt, src_trees) if p is not None])
    engine_honours(engine, src_trees=src_trees)
    loaded = loaded_models(checkpoints, quantize, threads, device, engine)
    _check_output(output, [m.path for m in loaded])
    sources, targets = _read_input(src), _read_input(tgt)
    if len(sources) != len(targets):
        fail(f"{src} has {len(sources)} lines and {tgt} has {len(targets)}; give one target per source")
    with decode_progress("scoring", len(sources)) as advance, user_errors(ValueError), _target_words(tgt):
        scores = score_lines(
            loaded,
            sources,
            targets,
            trees=src_trees,
            max_src_len=max_src_len,
            max_tokens=max_tokens,
            per_token=per_token,
            on_batch=advance,
            tgt_lang=tgt_lang,
            src_lang=src_lang,
        )
    vocab = loaded[0].tgt_vocab
    rows = []
    for s in scores:
        row = f"{s.log_prob:.4f}\t{s.mean:.4f}"
        if s.tokens is not None and s.ids is not None:
            row += "\t" + " ".join(f"{vocab.token(i)}={t:.4f}" for i, t in zip(s.ids, s.tokens, strict=True))
        rows.append(row)
    _write_output(output, rows)


def _score_hypotheses(hyp: Path, refs: list[list[str]], **translating: object) -> None:
    """evaluate --hyp: the file scored as it is against the references; what would translate
    (the source, the search, the target language) is refused, as it would be ignored."""
    from ..metrics import corpus_scores

    named = [f"--{name.replace('_', '-')}" for name, value in translating.items() if value]
    if named:
        fail(f"{', '.join(named)}: --hyp is scored as it is; nothing is translated")
    _print_scores(corpus_scores(_read_input(hyp), *refs) if refs else fail("--hyp needs --ref"))


def _evaluate_parse(
    gold_file: Path, hyp: Path | None, load: Callable[[], list[LoadedModel]] | None, **search: object
) -> None:
    """Bracket scores of a file of trees (`hyp`) or of a parsing model's output (`load` opens it;
    decoded with the `search` options given: greedy, beam, alpha) against gold trees."""
    from ..data.trees import read_treebank
    from ..evalb import corpus_score
    from ..evaluate import evaluate_parser

    golds = read_treebank(gold_file)
    if hyp is not None:
        score = corpus_score(golds, read_treebank(hyp))
    elif load is None:
        fail("--trees needs a parsing CHECKPOINT, or --hyp with parsed trees")
    else:
        loaded = load()
        search["greedy"] = search["greedy"] or None
        score = evaluate_parser(loaded, golds, _options(loaded, nbest=1, **search))
    stdout.print(
        f"bracketing precision {100 * score.precision:.2f}  recall {100 * score.recall:.2f}  "
        f"F1 {100 * score.f1:.2f}  ({score.matched} matched, {score.gold} gold, {score.test} test "
        f"brackets; {len(golds)} sentences; EVALB conventions)",
        soft_wrap=True,
    )


def _print_accuracy(name: str, report: AccuracyReport, labels: bool) -> None:
    acc = report.accuracy
    shown = (
        f"label accuracy {acc.char:.4f}, lines with every label right {acc.sequence:.4f}"
        if labels
        else f"char accuracy {acc.char:.4f}, sequence accuracy {acc.sequence:.4f}"
    )
    stdout.print(
        f"{name}: {shown}, perplexity {report.perplexity:.4f} ({report.examples} examples)", soft_wrap=True
    )


def _print_scores(report: BleuReport) -> None:
    stdout.print(f"BLEU {report.bleu:.2f}  ({report.bleu_signature})", highlight=False, soft_wrap=True)
    stdout.print(f"chrF {report.chrf:.2f}  ({report.chrf_signature})", highlight=False, soft_wrap=True)
    stdout.print(f"tokenised BLEU (intl) {report.tokenized_bleu:.2f}", highlight=False)
