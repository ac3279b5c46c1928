"""What `prepare` does with one chunk of a split, in whichever process runs it.

Two passes over every split: `ScanChunk` checks the lines (every message names file:line),
collects what the vocabularies need (tree brackets, tags) and offers the training pairs to the
vocabulary sample; `EncodeChunk` encodes the pairs with the vocabularies and applies the length
filter. Both are picklable and depend on nothing but their chunk, so chunks can go to any
process and the results, taken in order, are the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .corpus import CleanChunk, CorpusError, LineRules, RawChunk, ReadStats, clean_chunk
from .dataset import Split
from .sampling import ALL, sample_keys
from .source import SourceAnnotation, SourceFormat, check_tree_words, encode_source, split_line
from .vocab import SentencePieceVocab, SymbolVocab, Vocab

WordTree = tuple[list[str], np.ndarray]  # a syntax tree's words and word-level distances


@dataclass
class SplitFiles:
    """A split's files, with the syntax tree file beside its source and its number of trees."""

    name: str
    src: Path
    tgt: Path
    tree_file: Path | None = None
    tree_count: int = 0


@dataclass
class ChunkJob:
    chunk: RawChunk
    trees: list[WordTree] | None = None  # the trees of the chunk's lines (fewer if the file ends)
    threshold: np.uint64 = ALL  # scanning: pairs keyed above it cannot enter the sample


def make_job(chunk: RawChunk, trees: list[WordTree] | None, threshold: np.uint64 = ALL) -> ChunkJob:
    """A chunk with the syntax trees of its lines (`trees`: the whole file's, read beforehand)."""
    return ChunkJob(
        chunk, None if trees is None else trees[chunk.first - 1 : chunk.first - 1 + chunk.lines], threshold
    )


@dataclass
class SourceSide:
    """The kept source lines of a chunk in the chosen format: words, tags and tree distances."""

    words: list[list[str]]
    tags: list[list[list[str]]]
    omegas: list[np.ndarray] | None

    def texts(self) -> list[str]:
        return [" ".join(w) for w in self.words]


@dataclass
class _Chunk:
    """What both passes share: the split's files, the line rules and the source format."""

    files: SplitFiles
    rules: LineRules
    fmt: SourceFormat

    def clean(self, job: ChunkJob) -> CleanChunk:
        return clean_chunk(job.chunk, self.files.src, self.files.tgt, self.rules)

    def source_side(self, clean: CleanChunk, job: ChunkJob) -> SourceSide:
        """The source lines split into words and tags, with their trees (checked to match)."""
        words, tags = [], []
        for line, number in zip(clean.src, clean.numbers, strict=True):
            w, t = split_line(line, self.fmt, f"{self.files.src}:{number + 1}")
            words.append(w)
            tags.append(t)
        omegas = None
        if job.trees is not None:
            count = self.files.tree_count
            if clean.numbers and clean.numbers[-1] >= count:
                raise CorpusError(f"{self.files.tree_file}: {count} trees for the {self.files.src} lines")
            omegas = []
            for w, number in zip(words, clean.numbers, strict=True):
                tree_words, omega = job.trees[number - (job.chunk.first - 1)]
                check_tree_words(w, tree_words, f"{self.files.tree_file}: tree {number + 1}")
                omegas.append(omega)
        return SourceSide(words, tags, omegas)


@dataclass
class Scanned:
    """Pass one's findings in a chunk."""

    stats: ReadStats
    symbols: set[str] = field(default_factory=set)  # bracket tokens of tree sources
    tags: list[set[str]] = field(default_factory=list)  # per factor
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    numbers: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pairs: bytes = b""  # the candidates for the sample: "source\ntarget" in UTF-8, one after another
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # where each starts
    ends: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # and ends


@dataclass
class ScanChunk(_Chunk):
    """Pass one: check the lines; with a `seed`, key the pairs for the vocabulary sample."""

    seed: int | None = None

    def __call__(self, job: ChunkJob) -> Scanned:
        clean = self.clean(job)
        out = Scanned(clean.stats)
        texts = clean.src
        if self.fmt.format != "text" or self.fmt.by_word:
            side = self.source_side(clean, job)
            texts = side.texts()
            if self.fmt.format == "tree":
                out.symbols = {w for ws in side.words for w in ws if len(w) > 1 and w[0] in "()"}
            out.tags = [{t for tags in side.tags for t in tags[k]} for k in range(self.fmt.factors)]
        if self.seed is not None:
            numbers = np.asarray(clean.numbers, dtype=np.int64)
            keys = sample_keys(numbers, self.seed)
            picked = np.flatnonzero(keys <= job.threshold)
            out.keys, out.numbers = keys[picked], numbers[picked]
            out.pairs, out.starts, out.ends = pair_payloads(texts, clean.tgt, picked)
        return out


def pair_payloads(src: list[str], tgt: list[str], picked: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The picked pairs as "source\ntarget" in UTF-8, joined by newlines into one blob, and
    where each starts and ends: one join, the payloads found by their newlines (lines hold
    none); encoding pair by pair was a quarter of a scanning worker's time."""
    if len(picked) == len(src):
        sources, targets = src, tgt
    else:
        sources, targets = [src[i] for i in picked.tolist()], [tgt[i] for i in picked.tolist()]
    if not sources:
        return b"", np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    parts = [""] * (2 * len(sources))
    parts[0::2], parts[1::2] = sources, targets
    blob = "\n".join(parts).encode()
    between = np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == 10)[1::2]  # pair | pair
    return blob, np.concatenate([[0], between + 1]), np.append(between, len(blob))


@dataclass
class Encoded:
    split: Split
    stats: ReadStats


@dataclass
class EncodeChunk(_Chunk):
    """Pass two: encode the pairs; `limits` (max_len, max_ratio) filter the training split."""

    src_vocab: Vocab
    tgt_vocab: Vocab
    tag_vocabs: list[SymbolVocab]
    limits: tuple[int, float | None] | None = None

    def __call__(self, job: ChunkJob) -> Encoded:
        clean = self.clean(job)
        annotations: list[SourceAnnotation] | None = None
        if self.fmt.by_word:
            side = self.source_side(clean, job)
            omegas = side.omegas or [None] * len(side.words)
            encoded = [
                encode_source(self.src_vocab, w, t, self.tag_vocabs, o)
                for w, t, o in zip(side.words, side.tags, omegas, strict=True)
            ]
            src_ids, annotations = [e[0] for e in encoded], [e[1] for e in encoded]
        else:
            texts = clean.src if self.fmt.format == "text" else self.source_side(clean, job).texts()
            src_ids = _encode(self.src_vocab, texts)
        tgt_ids = _encode(self.tgt_vocab, clean.tgt)
        if self.limits is not None:
            keep = _length_filter(src_ids, tgt_ids, *self.limits, clean.stats)
            src_ids, tgt_ids = [src_ids[i] for i in keep], [tgt_ids[i] for i in keep]
            annotations = [annotations[i] for i in keep] if annotations is not None else None
        return Encoded(Split.from_lists(src_ids, tgt_ids, annotations), clean.stats)


def _length_filter(
    src: list[list[int]], tgt: list[list[int]], max_len: int, max_ratio: float | None, stats: ReadStats
) -> np.ndarray:
    """Indices of the pairs within the length limit and ratio; the others are counted."""
    s = np.fromiter(map(len, src), dtype=np.int64, count=len(src))
    t = np.fromiter(map(len, tgt), dtype=np.int64, count=len(tgt))
    long = (s > max_len) | (t > max_len)
    ratio = np.zeros_like(long)
    if max_ratio is not None:
        ratio = ~long & (np.maximum(s, t) > max_ratio * np.maximum(1, np.minimum(s, t)))
    stats.skipped_long += int(long.sum())
    stats.skipped_ratio += int(ratio.sum())
    return np.flatnonzero(~long & ~ratio)


def _encode(vocab: Vocab, texts: list[str]) -> list[list[int]]:
    """Each line's ids: a learned sentencepiece model encodes the chunk in one call, on one thread
    (the processes are the parallelism); any other vocabulary (a symbol or Marian one reused with
    --vocab-from) line by line, with its own ids."""
    if isinstance(vocab, SentencePieceVocab):
        return vocab.sp.encode(texts, num_threads=1)
    return [vocab.encode(text) for text in texts]
