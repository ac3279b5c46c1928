"""Before training: `prepare` a dataset, `inspect` what a model costs; from a prepared dataset, a
decoding `shortlist`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, get_args

import typer
from rich.markup import escape
from rich.table import Table

from ..choices import CONTROL_CHARACTERS, EMPTY_PAIRS, SOURCE_FORMATS, SOURCE_TREES, TABS
from ..config import PRESETS, ConfigError, TaskName
from .common import Force, Overrides, app, console, fail, out_option, stdout, user_errors
from .metavars import one_of
from .signals import sigterm_stops


@app.command()
def inspect(
    source: Annotated[
        str,
        typer.Argument(help=f"A preset ({', '.join(PRESETS)}), a config file, or a checkpoint directory."),
    ],
    overrides: Overrides = None,
    src_vocab: Annotated[
        int | None,
        typer.Option(
            help="Source vocabulary size; default: data.dataset's when the config names one, else "
            "37,000 (a checkpoint's own)."
        ),
    ] = None,
    tgt_vocab: Annotated[
        int | None, typer.Option(help="Target vocabulary size; default: the source's (shared).")
    ] = None,
    src_len: Annotated[
        int, typer.Option(min=1, help="Source length m (>= 1) used for the time column.")
    ] = 32,
    tgt_len: Annotated[
        int, typer.Option(min=1, help="Target length n (>= 1) used for the time column.")
    ] = 32,
) -> None:
    """Per-module parameter counts and FLOPs per token (the survey's Table 1) and the totals, for the
    vocabulary sizes of the checkpoint, of data.dataset, or of --src-vocab/--tgt-vocab."""
    from ..cost import model_cost
    from ..store.load import resolve_model_source

    with user_errors(ConfigError, ValueError):
        cfg, src_v, tgt_v = resolve_model_source(source, overrides or [], src_vocab, tgt_vocab)
        cost = model_cost(cfg.model, src_v, tgt_v, src_len, tgt_len)
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


# prepare's options, one named type each, so that the command's signature stays short.
DataDir = Annotated[
    Path | None, typer.Argument(help="Folder with train.SRC/train.TGT, dev.* and optional test.* files.")
]
SrcSuffix = Annotated[str, typer.Option(help="Source file suffix (language code), e.g. de.")]
TgtSuffix = Annotated[str, typer.Option(help="Target file suffix, e.g. en.")]
VocabSize = Annotated[
    int | None,
    typer.Option(
        help="BPE vocabulary size. Default: a piece per 5 training pairs, from 1,000 to the paper's "
        "37,000 (reached at 185,000 pairs; a 20,000-pair corpus gets 4,000), and at least a piece "
        "per character; prepare says what it chose."
    ),
]
SeparateVocab = Annotated[bool, typer.Option(help="Learn separate source and target vocabularies.")]
VocabFrom = Annotated[
    Path | None,
    typer.Option(
        help="Encode with the vocabularies of this checkpoint, run directory (its best checkpoint) "
        "or dataset instead of learning new ones (so without --vocab-size and --separate-vocab): "
        "data for fine-tuning with `train --init-from`. A file whose tokens are over 5% <unk> "
        "is a warning, over half an error."
    ),
]
VocabSample = Annotated[
    int,
    typer.Option(
        help="Learn the vocabulary from a uniform sample of this many training pairs (all of them "
        "when there are fewer; with a shared vocabulary, 1,000,000 pairs are the 2,000,000 "
        "sentences sentencepiece would train on anyway)."
    ),
]
Workers = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Processes that check and encode the text in chunks (default: the cores this process "
        "may use); the dataset is the same for any number.",
    ),
]
MaxLen = Annotated[
    int,
    typer.Option(
        help="Drop training pairs with a side longer than this (subword tokens); in every split, a "
        "pair with a line of over 32 times this many characters is skipped before it is encoded."
    ),
]
MaxRatio = Annotated[
    float | None,
    typer.Option(
        help="Drop training pairs whose length ratio exceeds this (0 = off); "
        "default 3, off for --source-format tree "
        "(bracket tokens make tree sources several times longer)."
    ),
]
EmptyPairs = Annotated[
    str, typer.Option(metavar=one_of(EMPTY_PAIRS), help="Pairs with an empty side: skip (counted) or reject.")
]
Tabs = Annotated[
    str, typer.Option(metavar=one_of(TABS), help="Tabs inside a line: space (replace) or reject.")
]
ControlCharacters = Annotated[
    str,
    typer.Option(
        metavar=one_of(CONTROL_CHARACTERS),
        help="Pairs with control characters: skip (counted, first one shown) or reject.",
    ),
]
Task = Annotated[
    str | None,
    typer.Option(
        metavar="TASK",
        help=f"Instead of text files, generate a task ({', '.join(get_args(TaskName))}; majority "
        "and updown are for classifiers, repeat for language models), or 'parse': DATA_DIR holds "
        "treebank files train.trees, dev.trees and optional test.trees.",
    ),
]
TreebankSuffix = Annotated[str, typer.Option(help="With --task parse: the treebank file suffix.")]
SourceFormatName = Annotated[
    str,
    typer.Option(
        metavar=one_of(SOURCE_FORMATS),
        help="text, or tree: source lines are bracketed trees, linearised for the encoder (tree-to-string).",
    ),
]
TreeTags = Annotated[
    bool, typer.Option(help="With --source-format tree: keep POS tags in the linearised source.")
]
Factors = Annotated[
    int, typer.Option(help="Source tokens are word|tag1|...|tagN with this many tags (factored input).")
]
FactorSep = Annotated[str, typer.Option(help="Separator between a word and its tags.")]
SourceTrees = Annotated[
    str | None,
    typer.Option(
        metavar=one_of(SOURCE_TREES),
        help="Syntax trees for syntax-aware attention: "
        "'tree' reads {split}.SRC.tree (bracketed, one per line), "
        "'conllu' reads {split}.SRC.conllu (dependency heads).",
    ),
]
Pairs = Annotated[
    list[str] | None,
    typer.Option(
        "--pair",
        metavar="SRC-TGT=DIR",
        help="A multilingual dataset: one language pair and its folder of train/dev/test files (e.g. "
        "en-de=corpus/en-de), repeated for every pair (instead of DATA_DIR, --src and --tgt). One shared "
        "vocabulary is learned over all of them; each source starts with its target language's tag "
        "(--tag-format), and the dataset remembers each example's pair.",
    ),
]
TagFormat = Annotated[
    str,
    typer.Option(
        help="With --pair: the target-language tag each source starts with, {lang} the language's "
        "ISO 639-3 code (de -> deu) as OPUS-MT's multilingual models spell it; e.g. '__{lang}__'."
    ),
]
TaskOverrides = Annotated[
    list[str] | None,
    typer.Option("--set", help="data.* overrides for --task, e.g. --set data.task_train_max_len=40."),
]


@contextlib.contextmanager
def _prepare_errors(out: Path) -> Iterator[None]:
    """prepare's bad input as one error line; a failed write (a full disk, say) names the output,
    which the atomic write left as it was."""
    from ..data.corpus import CorpusError
    from ..data.languages import LanguageError
    from ..data.pool import WorkerError
    from ..fileio import OutputError
    from ..store.checkpoint import CheckpointError

    try:
        yield
    except (
        CorpusError,
        ConfigError,
        OutputError,
        CheckpointError,
        ValueError,
        WorkerError,
        LanguageError,
    ) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")


def _prepare_task(
    task: str,
    data_dir: Path | None,
    out: Path,
    *,
    trees: str,
    max_len: int,
    overrides: list[str],
    force: bool,
) -> None:
    """`prepare --task`: a treebank for parsing (`parse`), or a generated task."""
    from ..data.prepare import prepare_generated, prepare_parse

    if task == "parse":
        if data_dir is None:
            fail("--task parse needs a DATA_DIR with train/dev treebank files")
        report = prepare_parse(data_dir, out, trees, max_len, force=force)
        if report["up_to_date"]:
            console.print(f"{out} is up to date with its inputs; nothing to do")
        for name, r in report.get("splits", {}).items():
            console.print(f"{name}: {r['trees']} trees; skipped {r['skipped_too_long']} too long")
        return
    dataset = prepare_generated(task, overrides, out, force=force)
    sizes = ", ".join(f"{k} {v}" for k, v in dataset.meta.sizes.items())
    console.print(f"{task}: {sizes} examples in {out}")


def _pair_inputs(specs: list[str], tag_format: str) -> list:
    """`--pair SRC-TGT=DIR` options as prepare's pair inputs (LanguageError naming a bad one)."""
    from ..data.languages import parse_pair
    from ..data.prepare import PairInput

    return [PairInput(*parse_pair(spec, tag_format)) for spec in specs]


def _print_text_report(report: dict, out: Path) -> None:
    """What prepare kept and skipped in each split of parallel text."""
    if report["up_to_date"]:
        console.print(f"{out} is up to date with its inputs; nothing to do")
        return
    for note in report["notes"]:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    for name, found in report["splits"].items():
        per_pair = found.items() if "pairs" not in found else [("", found)]  # a multilingual dataset's
        for pair, r in per_pair:
            console.print(
                f"{name}{' ' + pair if pair else ''}: {r['pairs']} pairs kept; skipped {r['skipped_empty']} "
                f"empty, {r['skipped_too_long']} too long, {r['skipped_ratio']} over the length ratio, "
                f"{r['skipped_control']} with control characters; "
                f"{r['tabs_replaced']} lines had tabs replaced"
                + (f" (first control character: {r['first_control']})" if r["first_control"] else "")
            )
    for warning in report["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    console.print(f"dataset written to {out}")


@app.command()
def prepare(
    data_dir: DataDir = None,
    out: Annotated[Path, out_option("Dataset directory to write.")] = Path("data/prepared"),
    src: SrcSuffix = "src",
    tgt: TgtSuffix = "tgt",
    vocab_size: VocabSize = None,
    separate_vocab: SeparateVocab = False,
    vocab_from: VocabFrom = None,
    vocab_sample: VocabSample = 1_000_000,
    workers: Workers = None,
    max_len: MaxLen = 256,
    max_ratio: MaxRatio = None,
    empty: EmptyPairs = "skip",
    tabs: Tabs = "space",
    control: ControlCharacters = "skip",
    task: Task = None,
    trees: TreebankSuffix = "trees",
    source_format: SourceFormatName = "text",
    tree_tags: TreeTags = True,
    factors: Factors = 0,
    factor_sep: FactorSep = "|",
    source_trees: SourceTrees = None,
    overrides: TaskOverrides = None,
    pairs: Pairs = None,
    tag_format: TagFormat = ">>{lang}<<",
    force: Force = False,
) -> None:
    """Validate parallel text, learn BPE, write a binarised dataset (a no-op when up to date).

    Text files may be compressed (train.en.gz, .bz2, .xz or .zst). The corpus streams through in
    chunks, so memory stays bounded whatever its size.

    -o is written atomically. An existing -o is replaced only if `prepare` wrote it; anything else
    (a file, a foreign or non-empty directory, a link) needs --force, which never replaces anything
    inside DATA_DIR; an -o that contains an input file is always refused."""
    from ..data.languages import DEFAULT_TAG as default_tag
    from ..data.prepare import PrepareOptions, prepare_pairs, prepare_text, ratio_limit
    from ..data.source import SourceFormat
    from ..store.load import vocab_source

    if vocab_from is not None and task is not None:
        fail("--vocab-from applies to parallel text, not to --task")
    if pairs and task is not None:
        fail("--pair applies to parallel text, not to --task")
    with sigterm_stops(), _prepare_errors(out):
        if task is not None:
            _prepare_task(
                task, data_dir, out, trees=trees, max_len=max_len, overrides=overrides or [], force=force
            )
            return
        if data_dir is None and not pairs:
            fail("give a DATA_DIR with parallel text files, --pair SRC-TGT=DIR for each pair, or --task NAME")
        if pairs and (src, tgt) != ("src", "tgt"):
            fail(
                "--src and --tgt name DATA_DIR's files; with --pair each pair names its languages (en-de=DIR)"
            )
        if not pairs and tag_format != default_tag:
            fail("--tag-format goes with --pair (a multilingual dataset's target-language tags)")
        opts = PrepareOptions(
            src,
            tgt,
            vocab_size=vocab_size,
            shared_vocab=False if separate_vocab else None,
            max_len=max_len,
            max_ratio=ratio_limit(max_ratio, source_format),
            empty=empty,
            tabs=tabs,
            source=SourceFormat(source_format, tree_tags, factors, factor_sep, source_trees),
            control=control,
            vocab_from=str(vocab_source(vocab_from)) if vocab_from is not None else None,
            vocab_sample=vocab_sample,
        )
        if pairs:
            if data_dir is not None:
                fail("give DATA_DIR or --pair options, not both")
            report = prepare_pairs(_pair_inputs(pairs, tag_format), out, opts, force=force, workers=workers)
        else:
            report = prepare_text(data_dir, out, opts, force=force, workers=workers)
    _print_text_report(report, out)


@app.command()
def shortlist(
    dataset: Annotated[
        Path, typer.Argument(help="A prepared dataset (`transduce prepare`): its training split is counted.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The shortlist file to write (.safetensors).")],
    per_token: Annotated[
        int, typer.Option(min=1, help="Target tokens listed per source token (highest Dice coefficient).")
    ] = 50,
    frequent: Annotated[
        int, typer.Option(min=0, help="The most frequent target tokens, always scored.")
    ] = 100,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
) -> None:
    """Build a vocabulary shortlist for `translate --shortlist` / `evaluate --shortlist`: per source
    token, the target tokens that co-occur with it most specifically in the training pairs."""
    from ..data.dataset import Dataset, DatasetError
    from ..decode.shortlist import build_shortlist
    from ..fileio import check_output_file

    with user_errors(DatasetError, ValueError, OSError):
        check_output_file(out, [dataset])
        if out.exists() and not force:
            fail(f"{out} exists; give --force to replace it")
        data = Dataset(dataset)
        train = data.splits.get("train")
        if train is None or len(train) == 0:
            fail(f"{dataset}: no training pairs to count")
        pairs = (train.pair(i) for i in range(len(train)))
        built = build_shortlist(pairs, len(data.src_vocab), len(data.tgt_vocab), per_token, frequent)
        built.save(out)
    listed = int(built.per_token.ge(0).sum())
    stdout.print(
        f"{out}: {listed:,} (source, target) entries for {built.src_vocab_size:,} source tokens, "
        f"{len(built.frequent)} frequent target tokens, from {len(train):,} training pairs"
    )
