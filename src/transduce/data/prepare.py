"""`transduce prepare`: parallel text files -> BPE vocabulary -> binarised dataset; treebanks ->
parsing datasets."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from rich.progress import Progress

from ..choices import CONTROL_CHARACTERS, EMPTY_PAIRS, TABS
from ..config import load_config
from ..fileio import check_output_dir
from .corpus import CorpusError, ReadStats, read_parallel, require_corpus_file
from .dataset import Dataset, Split, content_hash, is_up_to_date, prepare_task, write_dataset
from .source import SourceFormat, check_tree_words, encode_source, read_word_trees, split_line
from .trees import linearise, read_treebank
from .vocab import (
    SentencePieceVocab,
    SymbolVocab,
    Vocab,
    VocabFilesError,
    load_vocab,
    vocab_exists,
    vocab_files,
)

DEFAULT_VOCAB_SIZE = 37000  # the paper's shared En-De vocabulary


@dataclass
class PrepareOptions:
    """`prepare`'s options. The vocabulary's size and sharing apply when it is learned: None means
    the default then (37000, shared), and is what they must be with `vocab_from`, so that a
    dataset's meta.json records no setting that was not used."""

    src: str
    tgt: str
    vocab_size: int | None = None
    shared_vocab: bool | None = None
    max_len: int = 256
    max_ratio: float | None = 3.0
    empty: str = "skip"
    tabs: str = "space"
    source: SourceFormat = field(default_factory=SourceFormat)
    control: str = "skip"
    vocab_from: str | None = None  # a directory with src.* (and tgt.*) vocabulary files to reuse

    def __post_init__(self) -> None:
        """Options that could only fail later (inside sentencepiece, or by filtering everything),
        or that would not apply."""
        if self.vocab_from is not None:
            if self.vocab_size is not None or self.shared_vocab is not None:
                raise CorpusError(
                    "--vocab-size and --separate-vocab apply when prepare learns vocabularies; "
                    "--vocab-from uses the model's as they are"
                )
        else:
            self.vocab_size = DEFAULT_VOCAB_SIZE if self.vocab_size is None else self.vocab_size
            self.shared_vocab = True if self.shared_vocab is None else self.shared_vocab
            if not 8 <= self.vocab_size <= 1 << 20:
                raise CorpusError(f"--vocab-size must be from 8 to {1 << 20}, not {self.vocab_size}")
        if self.max_len < 1:
            raise CorpusError(f"--max-len must be >= 1, not {self.max_len}")
        if self.max_ratio is not None and self.max_ratio < 1:
            raise CorpusError(f"--max-ratio must be >= 1 (or 0 for off), not {self.max_ratio}")
        for name, allowed in (
            ("empty", EMPTY_PAIRS),
            ("tabs", TABS),
            ("control", CONTROL_CHARACTERS),
        ):
            if getattr(self, name) not in allowed:
                raise CorpusError(f"--{name} {getattr(self, name)!r}: allowed: {', '.join(allowed)}")


def ratio_limit(given: float | None, source_format: str) -> float | None:
    """The length-ratio filter for `--max-ratio` as given (None: not given, 0: off): 3 by
    default, off for tree sources, whose bracket tokens make them several times longer."""
    if given is None:
        return None if source_format == "tree" else 3.0
    if not given >= 0:  # NaN too
        raise CorpusError(f"--max-ratio must be a number >= 0 (0 = off), not {given}")
    return given or None


def _inputs(data_dir: Path, files: list[Path], force: bool) -> tuple[Path, ...]:
    """What -o must not overlap: the input files, and with `force` DATA_DIR itself, since what
    --force would replace there (a folder of raw corpora, say) could be the user's data."""
    return (data_dir, *files) if force else tuple(files)


def prepare_generated(task: str, overrides: list[str], out: Path, force: bool = False) -> Dataset:
    """Write a generated task as a dataset: the `small` preset's data settings, `data.task` =
    `task`, then the data.* `overrides` (`prepare --task NAME --set ...`)."""
    cfg = load_config("small", [f"data.task={task}", *overrides])
    return prepare_task(cfg.data, out, force=force)


def _encode(vocab: Vocab, lines: list[str], progress: Progress, label: str) -> list[list[int]]:
    """Each line's ids; a learned sentencepiece model encodes a block of lines per call, any
    other vocabulary (a symbol or Marian one reused with --vocab-from) line by line."""
    task = progress.add_task(label, total=len(lines))
    out: list[list[int]] = []
    step = 10_000
    for start in range(0, len(lines), step):
        block = lines[start : start + step]
        out.extend(
            vocab.sp.encode(block) if isinstance(vocab, SentencePieceVocab) else map(vocab.encode, block)
        )
        progress.advance(task, len(block))
    return out


def _length_filter(
    src: list[list[int]], tgt: list[list[int]], opts: PrepareOptions, stats: ReadStats
) -> list[int]:
    """Indices of the pairs within the length limit and ratio; the others are counted."""
    keep = []
    for i, (s, t) in enumerate(zip(src, tgt, strict=True)):
        if len(s) > opts.max_len or len(t) > opts.max_len:
            stats.skipped_long += 1
        elif opts.max_ratio is not None and max(len(s), len(t)) > opts.max_ratio * max(
            1, min(len(s), len(t))
        ):
            stats.skipped_ratio += 1
        else:
            keep.append(i)
    return keep


@dataclass
class _SourceSide:
    """A split's source lines in the chosen format: words, tags and word-level tree distances."""

    words: list[list[str]]
    tags: list[list[list[str]]]
    omegas: list[np.ndarray] | None

    def texts(self) -> list[str]:
        return [" ".join(w) for w in self.words]


def _read_source(
    data_dir: Path, name: str, opts: PrepareOptions, lines: list[str], stats: ReadStats
) -> _SourceSide:
    fmt = opts.source
    path = data_dir / f"{name}.{opts.src}"
    words, tags = [], []
    for line, number in zip(lines, stats.kept_lines, strict=True):
        w, t = split_line(line, fmt, f"{path}:{number + 1}")
        words.append(w)
        tags.append(t)
    omegas = None
    if fmt.trees is not None:
        tree_path = data_dir / f"{name}.{opts.src}.{fmt.trees}"
        trees = read_word_trees(tree_path, fmt.trees)
        if len(trees) <= max(stats.kept_lines, default=-1):
            raise CorpusError(f"{tree_path}: {len(trees)} trees for the {path} lines")
        omegas = []
        for w, number in zip(words, stats.kept_lines, strict=True):
            tree_words, omega = trees[number]
            check_tree_words(w, tree_words, f"{tree_path}: tree {number + 1}")
            omegas.append(omega)
    return _SourceSide(words, tags, omegas)


def _bracket_symbols(sides: list[_SourceSide]) -> list[str]:
    """Linearised-tree tokens, kept whole by the subword model (tree-to-string input)."""
    return sorted({w for side in sides for ws in side.words for w in ws if len(w) > 1 and w[0] in "()"})


@dataclass
class ReusedVocabs:
    """Another model's vocabularies, to encode new data with (`prepare --vocab-from`)."""

    src: Vocab
    tgt: Vocab | None  # None: shared with the source
    files: list[Path]


def _reused_vocabs(directory: Path, fmt: SourceFormat) -> ReusedVocabs:
    """The vocabularies saved in a checkpoint or dataset directory; CorpusError if there are none
    or the source format needs vocabularies learned from the data (tags, tree brackets)."""
    if fmt.format != "text" or fmt.by_word:
        raise CorpusError("--vocab-from works with plain text sources (not trees, tags or source trees)")
    if not vocab_exists(directory / "src"):
        raise CorpusError(f"--vocab-from {directory}: no vocabulary there (expected src.* files)")
    try:
        files = vocab_files(directory)
        src = load_vocab(directory / "src")
        tgt = load_vocab(directory / "tgt") if vocab_exists(directory / "tgt") else None
    except VocabFilesError as exc:
        raise CorpusError(f"--vocab-from {exc}") from None
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
        raise CorpusError(f"--vocab-from {directory}: vocabulary damaged ({exc})") from None
    return ReusedVocabs(src, tgt, files)


def _learn_vocabs(
    train_src: list[str], train_tgt: list[str], opts: PrepareOptions, symbols: list[str], progress: Progress
) -> tuple[Vocab, Vocab, bool]:
    """BPE vocabularies learned on the training text: (source, target, shared)."""
    learn = progress.add_task("learning BPE vocabulary", total=None)
    size = opts.vocab_size or DEFAULT_VOCAB_SIZE
    if opts.shared_vocab:
        src_vocab = SentencePieceVocab.train(train_src + train_tgt, size, symbols=symbols)
        tgt_vocab = src_vocab
    else:
        src_vocab = SentencePieceVocab.train(train_src, size, symbols=symbols)
        tgt_vocab = SentencePieceVocab.train(train_tgt, size)
    progress.update(learn, total=1, completed=1)
    return src_vocab, tgt_vocab, bool(opts.shared_vocab)


def _no_empty_split(name: str, pairs: int, where: str) -> None:
    """A split with no usable example would only fail later, at the first validation."""
    if pairs == 0:
        raise CorpusError(f"{where}: the {name} split has no usable examples (empty, or all lines skipped)")


def prepare_text(
    data_dir: Path, out: Path, opts: PrepareOptions, show_progress: bool = True, force: bool = False
) -> dict:
    """Build (or confirm up to date) the dataset for `data_dir/{train,dev,test}.{src,tgt}`;
    `out` is replaced only if `prepare` wrote it before (or `force`)."""
    fmt = opts.source
    names = [n for n in ("train", "dev", "test") if n != "test" or (data_dir / f"test.{opts.src}").exists()]
    files = [data_dir / f"{n}.{side}" for n in names for side in (opts.src, opts.tgt)]
    if fmt.trees is not None:
        files += [data_dir / f"{n}.{opts.src}.{fmt.trees}" for n in names]
    for f in files:
        require_corpus_file(f, " (expected train.*, dev.* and optional test.* files)")
    reused = _reused_vocabs(Path(opts.vocab_from), fmt) if opts.vocab_from is not None else None
    if reused is not None:
        files += reused.files
    digest = content_hash(files, asdict(opts))
    if is_up_to_date(out, digest):
        return {"up_to_date": True, "out": str(out)}
    inputs = _inputs(data_dir, files, force)
    check_output_dir(out, "prepare", inputs, force)
    report: dict = {"up_to_date": False, "out": str(out), "splits": {}}
    texts = {
        n: read_parallel(
            data_dir / f"{n}.{opts.src}", data_dir / f"{n}.{opts.tgt}", opts.empty, opts.tabs, opts.control
        )
        for n in names
    }
    for name, (_, tgt, _) in texts.items():
        _no_empty_split(name, len(tgt), f"{data_dir / name}.{{{opts.src},{opts.tgt}}}")
    plain = fmt.format == "text" and not fmt.by_word
    sources = {} if plain else {n: _read_source(data_dir, n, opts, t[0], t[2]) for n, t in texts.items()}
    src_texts = {n: t[0] if plain else sources[n].texts() for n, t in texts.items()}
    with Progress(disable=not show_progress, transient=False) as progress:
        train_src, train_tgt = src_texts["train"], texts["train"][1]
        symbols = _bracket_symbols(list(sources.values())) if fmt.format == "tree" else []
        if reused is not None:
            src_vocab, tgt_vocab, shared = reused.src, reused.tgt or reused.src, reused.tgt is None
        else:
            src_vocab, tgt_vocab, shared = _learn_vocabs(train_src, train_tgt, opts, symbols, progress)
        tag_vocabs = [
            SymbolVocab(sorted({t for tags in sources["train"].tags for t in tags[k]}))
            for k in range(fmt.factors)
        ]
        splits = {}
        for name, (_, tgt, stats) in texts.items():
            annotations = None
            if fmt.by_word:
                side = sources[name]
                encoded = [
                    encode_source(src_vocab, w, t, tag_vocabs, o)
                    for w, t, o in zip(
                        side.words, side.tags, side.omegas or [None] * len(side.words), strict=True
                    )
                ]
                src_ids, annotations = [e[0] for e in encoded], [e[1] for e in encoded]
            else:
                src_ids = _encode(src_vocab, src_texts[name], progress, f"encoding {name}.{opts.src}")
            tgt_ids = _encode(tgt_vocab, tgt, progress, f"encoding {name}.{opts.tgt}")
            if name == "train":
                keep = _length_filter(src_ids, tgt_ids, opts, stats)
                if not keep:
                    raise CorpusError(
                        f"all {len(src_ids)} training pairs were filtered out ({stats.skipped_long} longer "
                        f"than {opts.max_len} pieces, {stats.skipped_ratio} over the length ratio "
                        f"{opts.max_ratio}); loosen --max-len or --max-ratio"
                    )
                src_ids, tgt_ids = [src_ids[i] for i in keep], [tgt_ids[i] for i in keep]
                annotations = [annotations[i] for i in keep] if annotations is not None else None
            splits[name] = Split.from_lists(src_ids, tgt_ids, annotations)
            report["splits"][name] = {
                "pairs": len(src_ids),
                "skipped_empty": stats.skipped_empty,
                "skipped_too_long": stats.skipped_long,
                "skipped_ratio": stats.skipped_ratio,
                "skipped_control": stats.skipped_control,
                "first_control": stats.first_control,
                "tabs_replaced": stats.tabs_replaced,
            }
    meta = {
        "hash": digest,
        "data_kind": "text",
        "options": asdict(opts),
        "source": fmt,
        "factors": fmt.factors,
        "report": report["splits"],
    }
    extra_vocabs = {f"src.factor{k}": v for k, v in enumerate(tag_vocabs)}
    write_dataset(
        out,
        splits,
        src_vocab,
        None if shared else tgt_vocab,
        meta,
        vocabs=extra_vocabs,
        inputs=inputs,
        force=force,
    )
    return report


def prepare_parse(
    data_dir: Path, out: Path, suffix: str = "trees", max_len: int = 256, force: bool = False
) -> dict:
    """Parsing as sequence-to-sequence from `{train,dev,test}.{suffix}` treebank files.

    Source: the words; target: the linearised tree with placeholder leaves and no POS tags.
    Both sides get symbol vocabularies from the training split (unseen words map to <unk>,
    which parsing tolerates: the output only needs the word count). Gold dev/test trees are
    kept beside the splits for bracket scoring.
    """
    names = [n for n in ("train", "dev", "test") if n != "test" or (data_dir / f"test.{suffix}").exists()]
    files = [data_dir / f"{n}.{suffix}" for n in names]
    for f in files:
        require_corpus_file(f, f" (expected train.{suffix}, dev.{suffix}, optional test.*)")
    digest = content_hash(files, {"kind": "parse", "max_len": max_len})
    if is_up_to_date(out, digest):
        return {"up_to_date": True, "out": str(out)}
    inputs = _inputs(data_dir, files, force)
    check_output_dir(out, "prepare", inputs, force)
    trees = {n: read_treebank(data_dir / f"{n}.{suffix}") for n in names}
    targets = {n: [" ".join(linearise(t, words=False, tags=False)) for t in ts] for n, ts in trees.items()}
    sources = {n: [" ".join(t.words()) for t in ts] for n, ts in trees.items()}
    src_vocab = SymbolVocab(sorted({w for line in sources["train"] for w in line.split(" ")}))
    tgt_vocab = SymbolVocab(sorted({tok for line in targets["train"] for tok in line.split(" ")}))
    splits, report, texts = {}, {}, {}
    for n in names:
        keep = [
            i
            for i in range(len(trees[n]))
            if n != "train" or max(len(sources[n][i].split(" ")), len(targets[n][i].split(" "))) <= max_len
        ]
        _no_empty_split(n, len(keep), str(data_dir / f"{n}.{suffix}"))
        splits[n] = Split.from_lists(
            [src_vocab.encode(sources[n][i]) for i in keep], [tgt_vocab.encode(targets[n][i]) for i in keep]
        )
        texts[f"{n}.trees.txt"] = [str(trees[n][i]) for i in keep]
        report[n] = {"trees": len(keep), "skipped_too_long": len(trees[n]) - len(keep)}
    roots = Counter(t.label for t in trees["train"])
    meta = {
        "hash": digest,
        "data_kind": "parse",
        "parse_root": roots.most_common(1)[0][0] if roots else "S",
        "report": report,
    }
    write_dataset(out, splits, src_vocab, tgt_vocab, meta, texts, inputs=inputs, force=force)
    return {"up_to_date": False, "out": str(out), "splits": report}
