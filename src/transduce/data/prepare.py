"""`transduce prepare`: parallel text files -> BPE vocabulary -> binarised dataset; treebanks ->
parsing datasets.

Parallel text streams through in chunks, twice: a first pass checks every line and draws a
uniform sample of the training pairs for the vocabulary, a second encodes and appends to the
arrays on disk. Memory is bounded by a few chunks per process and the sample, not by the
corpus; chunks are processed by `workers` processes, and the output is the same for any number.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
from rich.progress import Progress

from ..choices import CONTROL_CHARACTERS, EMPTY_PAIRS, TABS
from ..config import load_config
from ..cpu_memory import release_freed_memory
from ..display import cleared_on_error
from ..fileio import atomic_directory, check_output_dir
from .chunks import ChunkJob, EncodeChunk, ScanChunk, SplitFiles, WordTree, make_job
from .corpus import CorpusError, LineRules, ReadStats, aligned_chunks, corpus_path, require_corpus_file
from .coverage import Coverage
from .dataset import (
    Dataset,
    Split,
    content_hash,
    finish_dataset,
    is_up_to_date,
    join_appended,
    prepare_task,
    tagged,
    write_dataset,
)
from .languages import LanguageError, LanguagePair, check_pairs
from .pool import available_cores, ordered_map
from .sampling import ALL, BottomK, Sampled
from .source import SourceFormat, read_word_trees
from .trees import linearise, read_treebank
from .vocab import (
    SentencePieceVocab,
    SymbolVocab,
    Vocab,
    VocabFilesError,
    load_vocab,
    piece_id,
    vocab_exists,
    vocab_files,
)
from .vocab_size import default_vocab_size, why

CHUNK_LINES = 20_000  # lines per chunk: what a process holds and encodes at a time
CHARS_PER_TOKEN = 32  # twice the longest piece sentencepiece learns: lines over max_len times it are dropped
# Training pairs the vocabulary is learned from at most: with a shared vocabulary, the 2M
# sentences sentencepiece trains on (it would sample that many of more itself).
VOCAB_SAMPLE = 1_000_000
SAMPLE_SEED = 0
SPM_SENTENCES = 2_000_000


@dataclass
class PrepareOptions:
    """`prepare`'s options. The vocabulary's size and sharing apply when it is learned: None means
    the default then (a size scaled to the corpus, `vocab_size.py`; shared), and is what they
    must be with `vocab_from`, so that a dataset's meta.json records no setting that was not used."""

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
    vocab_sample: int = VOCAB_SAMPLE  # training pairs the vocabulary is learned from, at most

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
            self.shared_vocab = True if self.shared_vocab is None else self.shared_vocab
            if self.vocab_size is not None and not 8 <= self.vocab_size <= 1 << 20:
                raise CorpusError(f"--vocab-size must be from 8 to {1 << 20}, not {self.vocab_size}")
        if self.max_len < 1:
            raise CorpusError(f"--max-len must be >= 1, not {self.max_len}")
        if self.max_ratio is not None and self.max_ratio < 1:
            raise CorpusError(f"--max-ratio must be >= 1 (or 0 for off), not {self.max_ratio}")
        if self.vocab_sample < 1:
            raise CorpusError(f"--vocab-sample must be >= 1, not {self.vocab_sample}")
        for name, allowed in (
            ("empty", EMPTY_PAIRS),
            ("tabs", TABS),
            ("control", CONTROL_CHARACTERS),
        ):
            if getattr(self, name) not in allowed:
                raise CorpusError(f"--{name} {getattr(self, name)!r}: allowed: {', '.join(allowed)}")

    def recorded(self) -> dict:
        """The options as hashed and kept in meta.json: an option added later enters only when
        not at its default, so that datasets prepared before it stay up to date, byte for byte."""
        options = asdict(self)
        if self.vocab_sample == VOCAB_SAMPLE:
            del options["vocab_sample"]
        return options

    @property
    def rules(self) -> LineRules:
        return LineRules(self.empty, self.tabs, self.control, self.max_chars)

    @property
    def max_chars(self) -> int:
        """The longest line kept, in characters, in every split: a longer one cannot fit in
        `max_len` tokens of a learned vocabulary (pieces of at most 16 characters; tags beside
        each word of a factored source), so it is skipped before it is encoded."""
        return self.max_len * CHARS_PER_TOKEN * (1 + self.source.factors)


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


def _no_empty_split(name: str, pairs: int, where: str) -> None:
    """A split with no usable example would only fail later, at the first validation."""
    if pairs == 0:
        raise CorpusError(f"{where}: the {name} split has no usable examples (empty, or all lines skipped)")


def _split_files(data_dir: Path, opts: PrepareOptions) -> dict[str, SplitFiles]:
    """train, dev and (when there) test: their files, plain or compressed."""
    fmt = opts.source
    names = ["train", "dev"] + (["test"] if corpus_path(data_dir, f"test.{opts.src}").exists() else [])
    return {
        n: SplitFiles(
            n,
            corpus_path(data_dir, f"{n}.{opts.src}"),
            corpus_path(data_dir, f"{n}.{opts.tgt}"),
            data_dir / f"{n}.{opts.src}.{fmt.trees}" if fmt.trees is not None else None,
        )
        for n in names
    }


@dataclass
class _Run:
    """What every pass needs: the options, processes, chunk size and progress display."""

    opts: PrepareOptions
    workers: int
    chunk_lines: int
    progress: Progress
    trees: dict[str, list[WordTree]] = field(default_factory=dict)  # per split, when given
    notes: list[str] = field(default_factory=list)  # what prepare chose, for stderr
    warnings: list[str] = field(default_factory=list)  # for stderr, not meta.json

    def read_trees(self, splits: Iterable[SplitFiles]) -> None:
        """The syntax trees of every split that has them (`--source-trees`), read whole: chunks
        take the trees of their lines from them."""
        fmt = self.opts.source
        for s in splits:
            if s.tree_file is not None and fmt.trees is not None:
                self.trees[s.name] = read_word_trees(s.tree_file, fmt.trees)
                s.tree_count = len(self.trees[s.name])

    def chunks(self, files: SplitFiles, sample: BottomK | None = None) -> Iterator[ChunkJob]:
        """The split's chunks as jobs, each with its trees and the sample's threshold then."""
        trees = self.trees.get(files.name)
        max_line = self.opts.rules.max_line_bytes
        chunks = aligned_chunks(files.src, files.tgt, self.chunk_lines, self.workers > 1, max_line)
        return (make_job(chunk, trees, sample.threshold if sample is not None else ALL) for chunk in chunks)


@dataclass
class _Scan:
    """Pass one over a split: its stats, the tree brackets and (per factor) tags it holds."""

    stats: ReadStats
    symbols: set[str]
    tags: list[set[str]]


def _scan(run: _Run, files: SplitFiles, sample: BottomK | None, seed: int = SAMPLE_SEED) -> _Scan:
    """Check every line of a split; offer its pairs to `sample` (the training split's), drawn with
    `seed` (each language pair of a multilingual dataset its own, so that their keys differ)."""
    task = run.progress.add_task(f"checking {files.src.name}, {files.tgt.name}", total=None)
    opts = run.opts
    work = ScanChunk(files, opts.rules, opts.source, seed if sample is not None else None)
    out = _Scan(ReadStats(), set(), [set() for _ in range(opts.source.factors)])
    for found in ordered_map(work, run.chunks(files, sample), run.workers):
        out.stats.add(found.stats)
        out.symbols |= found.symbols
        for mine, more in zip(out.tags, found.tags, strict=True):
            mine |= more
        if sample is not None:
            sample.offer(found.keys, found.numbers, found.pairs, found.starts, found.ends)
        run.progress.advance(task, found.stats.pairs)
    return out


@dataclass
class _Vocabs:
    src: Vocab
    tgt: Vocab
    shared: bool
    tags: list[SymbolVocab]
    sampled: int | None = None  # training pairs the vocabulary was learned from, if not all


def _vocabularies(
    run: _Run, scans: dict[str, _Scan], source: BottomK | ReusedVocabs, tags: tuple[str, ...] = ()
) -> _Vocabs:
    """Learn the vocabularies from the sample of training pairs, or take the reused ones; `tags`
    (a multilingual dataset's target-language tags) are pieces of their own."""
    opts = run.opts
    factor_tags = [SymbolVocab(sorted(found)) for found in scans["train"].tags]
    if isinstance(source, ReusedVocabs):
        run.progress.add_task(f"vocabulary from {opts.vocab_from}", total=1, completed=1)
        return _Vocabs(source.src, source.tgt or source.src, source.tgt is None, factor_tags)
    learn = run.progress.add_task("learning BPE vocabulary", total=None)
    pairs = source.take()
    _check_tags_unused(pairs, tags)
    release_freed_memory()  # the scan's freed chunks, before sentencepiece's copy of the sample
    count = len(pairs)
    sampled = count if count < scans["train"].stats.pairs else None
    symbols = (
        sorted(set().union(*(s.symbols for s in scans.values()))) if opts.source.format == "tree" else []
    )
    symbols += tags
    size = opts.vocab_size
    if size is None:
        size = default_vocab_size(scans["train"].stats.pairs, pairs, len(symbols))
        run.notes.append(why(size, scans["train"].stats.pairs))
    if opts.shared_vocab:
        lines = chain(_side(pairs, 0), _side(pairs, 1))
        src = tgt = SentencePieceVocab.train(lines, size, max(SPM_SENTENCES, 2 * count), symbols=symbols)
    else:
        sentences = max(SPM_SENTENCES, count)
        src = SentencePieceVocab.train(_side(pairs, 0), size, sentences, symbols=symbols)
        tgt = SentencePieceVocab.train(_side(pairs, 1), size, sentences)
    del pairs
    release_freed_memory()  # sentencepiece's working memory, before encoding
    run.progress.update(learn, total=1, completed=1)
    return _Vocabs(src, tgt, bool(opts.shared_vocab), factor_tags, sampled)


def _check_tags_unused(pairs: Sampled, tags: tuple[str, ...]) -> None:
    """A tag is a piece of its own wherever it occurs: text that holds one (a tag format that
    spells a word, or a corpus already tagged) would be read as asking for a language."""
    for tag in tags:
        if any(tag.encode() in pair for pair in pairs):
            raise CorpusError(
                f"the tag {tag} occurs in the training text; choose a --tag-format whose tags the corpus "
                "does not hold (or remove the tags the corpus has: prepare adds them)"
            )


def _side(pairs: Sampled, side: int) -> Iterator[str]:
    """The sampled pairs' sources (0) or targets (1), decoded one at a time: sentencepiece keeps
    its own copy, and the sample stays in its compact form."""
    for pair in pairs:
        yield pair.split(b"\n", 1)[side].decode()


def _encode_split(
    run: _Run,
    out: Path,
    files: SplitFiles,
    vocabs: _Vocabs,
    pairs: int,
    *,
    append: bool = False,
    tag: int | None = None,
) -> dict:
    """Encode a split chunk by chunk into `out` (the first chunk saved, the others appended; all
    appended after an earlier language pair's with `append`), each source starting with the id
    `tag` when given; the training split is length-filtered. Its report: pairs kept, skipped and why."""
    opts = run.opts
    task = run.progress.add_task(f"encoding {files.src.name}, {files.tgt.name}", total=pairs)
    limits = (opts.max_len, opts.max_ratio) if files.name == "train" else None
    work = EncodeChunk(files, opts.rules, opts.source, vocabs.src, vocabs.tgt, vocabs.tags, limits)
    stats, kept, coverage = ReadStats(), 0, Coverage()
    for i, done in enumerate(ordered_map(work, run.chunks(files), run.workers)):
        split = done.split if tag is None else tagged(done.split, tag)
        (split.append_to if i or append else split.save)(out, files.name)
        stats.add(done.stats)
        kept += len(done.split)
        coverage.count(done.split)
        run.progress.advance(task, done.stats.pairs)
    join_appended(out, files.name)
    if kept == 0:
        raise CorpusError(
            f"all {stats.pairs} training pairs were filtered out ({stats.skipped_long} longer "
            f"than {opts.max_len} pieces, {stats.skipped_ratio} over the length ratio "
            f"{opts.max_ratio}); loosen --max-len or --max-ratio"
        )
    if opts.vocab_from is not None:
        run.warnings += coverage.warnings((files.src, files.tgt), opts.vocab_from)
    return {
        "pairs": kept,
        "skipped_empty": stats.skipped_empty,
        "skipped_too_long": stats.skipped_long,
        "skipped_ratio": stats.skipped_ratio,
        "skipped_control": stats.skipped_control,
        "first_control": stats.first_control,
        "tabs_replaced": stats.tabs_replaced,
    }


def _progress(show: bool) -> contextlib.AbstractContextManager[Progress]:
    """The progress display, its lines kept when `prepare` succeeds and cleared on an error."""
    return cleared_on_error(Progress(disable=not show, transient=False))


def _input_files(
    data_dir: Path, opts: PrepareOptions
) -> tuple[dict[str, SplitFiles], list[Path], ReusedVocabs | None]:
    """The splits' files, each checked to be there and readable, and the vocabularies reused with
    --vocab-from: every file the content hash covers."""
    splits = _split_files(data_dir, opts)
    files = [f for s in splits.values() for f in (s.src, s.tgt)]
    files += [s.tree_file for s in splits.values() if s.tree_file is not None]
    for f in files:
        require_corpus_file(f, " (expected train.*, dev.* and optional test.* files)")
    reused = _reused_vocabs(Path(opts.vocab_from), opts.source) if opts.vocab_from is not None else None
    return splits, files + (reused.files if reused is not None else []), reused


def _write_splits(
    run: _Run, out: Path, splits: dict[str, SplitFiles], scans: dict[str, _Scan], vocabs: _Vocabs, digest: str
) -> dict:
    """Pass two over every split into `out`, then the vocabularies and meta.json; the report of
    each split (pairs kept, skipped and why)."""
    reports = {n: _encode_split(run, out, s, vocabs, scans[n].stats.pairs) for n, s in splits.items()}
    if vocabs.sampled is not None:
        reports["train"]["vocab_sample"] = vocabs.sampled
    fmt = run.opts.source
    meta = {
        "hash": digest,
        "data_kind": "text",
        "options": run.opts.recorded(),
        "source": fmt,
        "factors": fmt.factors,
        "report": reports,
    }
    extra_vocabs = {f"src.factor{k}": v for k, v in enumerate(vocabs.tags)}
    sizes = {name: r["pairs"] for name, r in reports.items()}
    finish_dataset(out, sizes, vocabs.src, None if vocabs.shared else vocabs.tgt, meta, extra_vocabs)
    return reports


def prepare_text(
    data_dir: Path,
    out: Path,
    opts: PrepareOptions,
    show_progress: bool = True,
    force: bool = False,
    workers: int | None = None,
    chunk_lines: int = CHUNK_LINES,
) -> dict:
    """Build (or confirm up to date) the dataset for `data_dir/{train,dev,test}.{src,tgt}`
    (each plain or compressed); `out` is replaced only if `prepare` wrote it before (or `force`).
    `workers` processes (default: the cores available) share the work; the output is the same."""
    splits, files, reused = _input_files(data_dir, opts)
    digest = content_hash(files, opts.recorded())
    if is_up_to_date(out, digest):
        return {"up_to_date": True, "out": str(out)}
    inputs = _inputs(data_dir, files, force)
    check_output_dir(out, "prepare", inputs, force)
    report: dict = {"up_to_date": False, "out": str(out), "splits": {}, "seconds": {}}
    with _progress(show_progress) as progress:
        run = _Run(opts, workers or available_cores(), chunk_lines, progress)
        run.read_trees(splits.values())
        clock = time.perf_counter()
        sample = BottomK(opts.vocab_sample) if reused is None else None
        scans = {n: _scan(run, s, sample if n == "train" else None) for n, s in splits.items()}
        for name, scan in scans.items():
            _no_empty_split(name, scan.stats.pairs, f"{data_dir / name}.{{{opts.src},{opts.tgt}}}")
        report["seconds"]["checking"], clock = time.perf_counter() - clock, time.perf_counter()
        vocabs = _vocabularies(run, scans, reused or sample)
        report["seconds"]["vocabulary"], clock = time.perf_counter() - clock, time.perf_counter()
        with atomic_directory(out, "prepare", inputs, force) as tmp:
            report["splits"] = _write_splits(run, tmp, splits, scans, vocabs, digest)
        report["seconds"]["encoding"] = time.perf_counter() - clock
    report["notes"], report["warnings"] = run.notes, run.warnings
    return report


@dataclass
class PairInput:
    """One language pair of a multilingual `prepare`: its languages and tag, and its folder."""

    pair: LanguagePair
    folder: Path

    def options(self, opts: PrepareOptions) -> PrepareOptions:
        return dataclasses.replace(opts, src=self.pair.src, tgt=self.pair.tgt)


def _pair_inputs(
    pairs: list[PairInput], opts: PrepareOptions
) -> tuple[list[dict[str, SplitFiles]], list[Path]]:
    """Each pair's splits (train and dev in every pair; test where a pair has it), checked to be
    there and readable, and every file the content hash covers."""
    if len(pairs) < 2:
        raise LanguageError("a multilingual dataset needs two --pair options or more")
    check_pairs([p.pair for p in pairs])
    fmt = opts.source
    if fmt.format != "text" or fmt.factors or fmt.trees is not None or opts.vocab_from is not None:
        raise CorpusError(
            "--pair takes plain text sources and learns its vocabulary: no --source-format tree, "
            "--factors, --source-trees or --vocab-from"
        )
    if opts.shared_vocab is False:
        raise CorpusError("--pair learns one vocabulary for every language, shared: no --separate-vocab")
    splits = [_split_files(p.folder, p.options(opts)) for p in pairs]
    files = [f for split in splits for s in split.values() for f in (s.src, s.tgt)]
    for f in files:
        require_corpus_file(f, " (each --pair folder holds train.*, dev.* and optional test.* files)")
    return splits, files


def _pair_scans(
    run: _Run, pairs: list[PairInput], splits: list[dict[str, SplitFiles]], sample: BottomK
) -> list[dict[str, _Scan]]:
    """Pass one over every pair's splits (each checked for empty ones); the training splits offer
    their pairs to one vocabulary sample, each pair with a seed of its own."""
    scans = []
    for k, (pair, split) in enumerate(zip(pairs, splits, strict=True)):
        found = {
            n: _scan(run, s, sample if n == "train" else None, SAMPLE_SEED + k) for n, s in split.items()
        }
        for name, scan in found.items():
            where = f"{pair.folder / name}.{{{pair.pair.src},{pair.pair.tgt}}}"
            _no_empty_split(name, scan.stats.pairs, where)
        scans.append(found)
    return scans


def _whole(scans: list[dict[str, _Scan]]) -> dict[str, _Scan]:
    """The pairs' scans added up per split: what the vocabulary's default size counts."""
    total: dict[str, _Scan] = {}
    for found in scans:
        for name, scan in found.items():
            total.setdefault(name, _Scan(ReadStats(), set(), [])).stats.add(scan.stats)
    return total


def _write_pair_splits(
    run: _Run,
    out: Path,
    pairs: list[PairInput],
    splits: list[dict[str, SplitFiles]],
    scans: list[dict[str, _Scan]],
    vocabs: _Vocabs,
) -> tuple[dict[str, dict], dict[str, int]]:
    """Pass two: every split of every pair into `out`, pair after pair, sources tagged, and the
    pair of each example in {split}.pair.npy. Per split, the report of each pair, and the sizes."""
    reports: dict[str, dict] = {}
    ids: dict[str, list[np.ndarray]] = {}
    for k, (pair, split) in enumerate(zip(pairs, splits, strict=True)):
        tag = piece_id(vocabs.src, pair.pair.tag)
        for name, files in split.items():
            expected = scans[k][name].stats.pairs
            report = _encode_split(run, out, files, vocabs, expected, append=name in ids, tag=tag)
            reports.setdefault(name, {})[pair.pair.name] = report
            ids.setdefault(name, []).append(np.full(report["pairs"], k, dtype=np.uint16))
    for name, parts in ids.items():
        np.save(out / f"{name}.pair.npy", np.concatenate(parts))
    return reports, {name: sum(len(p) for p in parts) for name, parts in ids.items()}


def prepare_pairs(
    pairs: list[PairInput],
    out: Path,
    opts: PrepareOptions,
    show_progress: bool = True,
    force: bool = False,
    workers: int | None = None,
    chunk_lines: int = CHUNK_LINES,
) -> dict:
    """A multilingual dataset (or confirm it up to date): every pair's `{train,dev,test}.{src,tgt}`
    with one shared vocabulary learned over all of them, the pairs' target-language tags among its
    pieces; each source starts with its pair's tag, and `{split}.pair.npy` says each example's
    pair. Everything `prepare_text` checks and guarantees holds for each pair's files."""
    splits, files = _pair_inputs(pairs, opts)
    recorded = {**opts.recorded(), "pairs": [p.pair.model_dump() for p in pairs]}
    digest = content_hash(files, recorded)
    if is_up_to_date(out, digest):
        return {"up_to_date": True, "out": str(out)}
    inputs = (*sorted({p.folder for p in pairs}), *files) if force else tuple(files)
    check_output_dir(out, "prepare", inputs, force)
    report: dict = {"up_to_date": False, "out": str(out), "splits": {}, "seconds": {}}
    with _progress(show_progress) as progress:
        run = _Run(opts, workers or available_cores(), chunk_lines, progress)
        clock = time.perf_counter()
        sample = BottomK(opts.vocab_sample)
        scans = _pair_scans(run, pairs, splits, sample)
        report["seconds"]["checking"], clock = time.perf_counter() - clock, time.perf_counter()
        vocabs = _vocabularies(run, _whole(scans), sample, tuple(p.pair.tag for p in pairs))
        report["seconds"]["vocabulary"], clock = time.perf_counter() - clock, time.perf_counter()
        with atomic_directory(out, "prepare", inputs, force) as tmp:
            report["splits"], sizes = _write_pair_splits(run, tmp, pairs, splits, scans, vocabs)
            meta = {"hash": digest, "data_kind": "text", "options": recorded, "report": report["splits"]}
            meta["languages"] = [p.pair for p in pairs]
            finish_dataset(tmp, sizes, vocabs.src, None, meta)
        report["seconds"]["encoding"] = time.perf_counter() - clock
    report["notes"], report["warnings"] = run.notes, run.warnings
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
