"""`prepare` streams (issue 50): chunks, worker processes, compressed input and the vocabulary
sample give the dataset the in-memory `prepare` gave, and bad input is still named by file:line."""

from __future__ import annotations

import bz2
import gzip
import io
import itertools
import json
import lzma
import os
import random
import resource
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest
import zstandard
from pool_jobs import die, square
from test_prepare_bytes import CASES, EXPECTED, WORDS, digests, plain_corpus
from typer.testing import CliRunner

from transduce.cli import app
from transduce.data.chunks import pair_payloads
from transduce.data.corpus import (
    BOM,
    CorpusError,
    LineReader,
    LineRules,
    Span,
    aligned_chunks,
    clean_chunk,
    read_lines,
)
from transduce.data.dataset import Split, join_appended
from transduce.data.pool import WorkerError, ordered_map
from transduce.data.prepare import PrepareOptions, prepare_text
from transduce.data.sampling import BottomK, sample_keys, smallest
from transduce.data.source import SourceAnnotation
from transduce.data.vocab import SentencePieceVocab
from transduce.data.zstd_frames import incomplete_frame


def _prepare(tmp: Path, case: str, workers: int, chunk_lines: int) -> dict[str, str]:
    corpus, options = CASES[case]
    folder = tmp / case
    folder.mkdir()
    corpus(folder)
    out = tmp / f"{case}-data"
    opts = PrepareOptions("src", "tgt", **options)
    prepare_text(
        Path(case), Path(out.name), opts, show_progress=False, workers=workers, chunk_lines=chunk_lines
    )
    return digests(out)


@pytest.mark.parametrize("case", sorted(CASES))
def test_chunks_of_a_few_lines_give_the_bytes_of_the_whole(tmp_path, monkeypatch, case):
    """Seven lines a chunk: the dirty lines, the filtered pairs and the trees fall in several."""
    monkeypatch.chdir(tmp_path)
    assert _prepare(tmp_path, case, workers=1, chunk_lines=7) == EXPECTED[case]


@pytest.mark.parametrize("case", ["plain-shared", "factors-tree-file"])
def test_two_worker_processes_give_the_bytes_of_one(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    assert _prepare(tmp_path, case, workers=2, chunk_lines=7) == EXPECTED[case]


def test_an_error_in_a_worker_names_its_file_and_line(tmp_path):
    plain_corpus(tmp_path)
    lines = (tmp_path / "train.tgt").read_bytes().split(b"\n")
    lines[40] = b"bad \xff byte"
    (tmp_path / "train.tgt").write_bytes(b"\n".join(lines))
    opts = PrepareOptions("src", "tgt", vocab_size=360)
    with pytest.raises(CorpusError, match=r"train\.tgt:41: invalid UTF-8"):
        prepare_text(tmp_path, tmp_path / "out", opts, show_progress=False, workers=2, chunk_lines=6)
    assert not (tmp_path / "out").exists()


def test_workers_give_results_in_order_and_their_errors_and_deaths_are_raised():
    assert list(ordered_map(square, range(5), 2)) == [0, 1, 4, 9, 16]
    with pytest.raises(CorpusError, match="job 5 is bad"):
        list(ordered_map(square, range(9), 2))
    with pytest.raises(WorkerError, match="a worker process ended without its result"):
        list(ordered_map(die, range(4), 2))


def _compress(path: Path, kind: str) -> None:
    data = path.read_bytes()
    if kind == "gz":
        packed = gzip.compress(data)
    elif kind == "xz":
        packed = lzma.compress(data)
    elif kind == "bz2":
        packed = bz2.compress(data)
    else:  # two frames, as pzstd and concatenated files have
        half = len(data) // 2
        packed = zstandard.compress(data[:half]) + zstandard.compress(data[half:])
    path.with_name(f"{path.name}.{kind}").write_bytes(packed)
    path.unlink()


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zst"])
def test_compressed_corpora_are_read_directly(tmp_path, kind):
    opts = PrepareOptions("src", "tgt", vocab_size=360, max_len=40)
    for name in ("plain", "packed"):
        (tmp_path / name).mkdir()
        plain_corpus(tmp_path / name)
    for path in (tmp_path / "packed").iterdir():
        _compress(path, kind)
    plain = prepare_text(tmp_path / "plain", tmp_path / "a", opts, False, workers=1, chunk_lines=7)
    packed = prepare_text(tmp_path / "packed", tmp_path / "b", opts, False, workers=1, chunk_lines=7)
    arrays_and_vocab = {k: v for k, v in digests(tmp_path / "a").items() if k != "meta.json"}
    assert {k: v for k, v in digests(tmp_path / "b").items() if k != "meta.json"} == arrays_and_vocab
    assert packed["splits"]["train"]["first_control"].endswith(
        f"train.src.{kind}:32: contains control character U+0096"
    )
    assert packed["splits"]["dev"] == plain["splits"]["dev"]


def _zstd_frames(seed: int) -> list[bytes]:
    """Frames of every kind a header walk meets: with or without a checksum and a content size,
    single-segment or streamed, raw, compressed and RLE blocks, several blocks, an empty frame,
    a skippable frame."""
    rng = random.Random(seed)
    texts = [
        bytes(rng.getrandbits(8) for _ in range(1000)),  # incompressible: a raw block
        b"a" * 300_000,  # RLE blocks, three of them
        b"abcd" * 80_000,  # compressed blocks, three of them
        "".join(f"line {rng.randrange(10**6)}\n" for _ in range(300)).encode(),
        b"",
    ]
    frames = [b"\x5a\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"hello"]  # skippable
    for text in texts:
        checksum, size = rng.random() < 0.5, rng.random() < 0.5
        packer = zstandard.ZstdCompressor(level=rng.choice([1, 19]), write_checksum=checksum)
        if size:
            frames.append(packer.compress(text))
        else:  # streamed: no content size, not single-segment
            out = io.BytesIO()
            with packer.stream_writer(out, closefd=False) as writer:
                writer.write(text)
            frames.append(out.getvalue())
    rng.shuffle(frames)
    return frames


@pytest.mark.parametrize("seed", range(3))
def test_a_zstd_file_is_whole_only_where_a_frame_ends(tmp_path, seed):
    """The file cut at every byte: whole (None) exactly where one of the frames it was built from
    ends, otherwise the start of the frame the cut falls in."""
    frames = _zstd_frames(seed)
    blob = b"".join(frames)
    starts = list(itertools.accumulate(map(len, frames), initial=0))
    path = tmp_path / "c.zst"
    for cut in range(len(blob) + 1):
        path.write_bytes(blob[:cut])
        expected = None if cut in starts else max(s for s in starts if s < cut)
        assert incomplete_frame(path) == expected, (cut, starts)
    path.write_bytes(blob + b"trailing bytes")
    assert incomplete_frame(path) == len(blob)


def test_line_counts_are_compared_to_the_end_of_both_files(tmp_path):
    (tmp_path / "a").write_text("".join(f"{i}\n" for i in range(7)))
    (tmp_path / "b").write_text("".join(f"{i}\n" for i in range(4)) + "last line without newline")
    with pytest.raises(CorpusError, match=r"a has 7 lines, .*b has 5"):
        list(aligned_chunks(tmp_path / "a", tmp_path / "b", 2))


@pytest.mark.parametrize("text", [b"\xef\xbb\xbf", b"\xef\xbb\xbf\n", b"\xef\xbb\xbfa\r\nb", b"", b"\n\n"])
def test_chunks_hold_the_lines_read_lines_gives(tmp_path, text):
    (tmp_path / "a").write_bytes(text)
    chunks = list(aligned_chunks(tmp_path / "a", tmp_path / "a", 1))
    expected = read_lines(tmp_path / "a")
    assert [c.src.decode().removesuffix("\n").removesuffix("\r") for c in chunks] == expected


def _splitmix64(seed: int, number: int) -> int:
    """The reference SplitMix64 (Steele, Lea and Flood 2014): the state advanced number + 1
    times from seed * the second multiplier, then mixed; in Python integers, no numpy."""
    mask = (1 << 64) - 1
    z = (seed * 0x94D049BB133111EB + (number + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def test_sample_keys_are_splitmix64():
    numbers = np.array([0, 1, 2, 12345, 2**40 + 7])
    for seed in (0, 3):
        assert sample_keys(numbers, seed).tolist() == [_splitmix64(seed, int(n)) for n in numbers]


def _payloads(numbers: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Each line number written out as its payload, in one byte string with a "|" after each,
    and where each starts and ends."""
    items = [str(int(n)).encode() for n in numbers]
    ends = np.cumsum([len(p) + 1 for p in items], dtype=np.int64) - 1
    return b"".join(p + b"|" for p in items), ends - [len(p) for p in items], ends


def test_bottom_k_is_the_smallest_keys_however_the_stream_is_cut():
    rng = np.random.default_rng(0)
    numbers = np.sort(rng.choice(100_000, 5000, replace=False))  # kept lines: some skipped
    keys = sample_keys(numbers, 0)
    expected = sorted(numbers[np.argsort(keys)[:300]].tolist())
    sample = BottomK(300)
    start = 0
    while start < len(numbers):
        end = start + int(rng.integers(1, 400))
        k, n = keys[start:end], numbers[start:end]
        picked = k <= sample.threshold
        sample.offer(k[picked], n[picked], *_payloads(n[picked]))
        start = end
    taken = sample.take()
    assert [int(p) for p in taken] == expected
    assert [int(p) for p in taken] == expected  # read twice, the same
    small = BottomK(10_000)
    small.offer(keys, numbers, *_payloads(numbers))
    assert [int(p) for p in small.take()] == numbers.tolist()  # all of a short stream, in order


def test_bottom_k_payloads_survive_compactions_whatever_their_length():
    """Payloads of any length (none included) come back whole from offers compacted many times."""
    rng = np.random.default_rng(1)
    numbers = np.arange(3000)
    keys = sample_keys(numbers, 5)
    texts = ["é" * int(rng.integers(0, 30)) + str(n) if n % 7 else "" for n in numbers]
    sample = BottomK(100)
    for start in range(0, 3000, 50):
        items = [texts[i].encode() for i in range(start, start + 50)]
        ends = np.cumsum([len(p) for p in items])
        starts = ends - [len(p) for p in items]
        sample.offer(keys[start : start + 50], numbers[start : start + 50], b"".join(items), starts, ends)
    chosen = sorted(numbers[np.argsort(keys)[:100]].tolist())
    assert [p.decode() for p in sample.take()] == [texts[n] for n in chosen]


def test_pair_payloads_are_the_pairs_encoded_one_by_one():
    rng = np.random.default_rng(5)
    src = ["ä" * int(rng.integers(0, 4)) + f"s{i}" for i in range(30)]
    tgt = [f"t {i} é" for i in range(30)]
    for picked in (np.arange(30), np.arange(0), np.array([0]), np.sort(rng.choice(30, 11, replace=False))):
        blob, starts, ends = pair_payloads(src, tgt, picked)
        got = [blob[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        assert got == [f"{src[i]}\n{tgt[i]}".encode() for i in picked]


def test_smallest_is_a_sort_by_key_then_number():
    """The partition's pick, ties at the cut included, against a full sort of (key, number)."""
    rng = np.random.default_rng(2)
    for size, distinct, k in [(1000, 5, 300), (1000, 1000, 999), (50, 3, 50), (20, 2, 7), (10, 1, 0)]:
        keys = rng.integers(0, distinct, size).astype(np.uint64)
        numbers = rng.permutation(size).astype(np.int64)
        expected = np.zeros(size, dtype=bool)
        expected[np.lexsort((numbers, keys))[:k]] = True
        assert np.array_equal(smallest(keys, numbers, k), expected)


def test_bottom_k_with_tied_keys_and_tight_payloads_at_the_end():
    """Keys tied across offers are taken by line number, as a full sort would; what `take`
    returns holds its payloads' bytes and nothing more, however many compactions left slack."""
    rng = np.random.default_rng(3)
    numbers = np.arange(4000)
    keys = rng.integers(0, 50, 4000).astype(np.uint64)
    sample = BottomK(500)
    for start in range(0, 4000, 70):
        k, n = keys[start : start + 70], numbers[start : start + 70]
        sample.offer(k, n, *_payloads(n))
    taken = sample.take()
    assert [int(p) for p in taken] == sorted(numbers[np.lexsort((numbers, keys))[:500]].tolist())
    assert sum(len(b) for b in taken._blobs) == sum(len(p) for p in taken)


def test_the_vocabulary_is_learned_from_the_sample(tmp_path, monkeypatch):
    """The sampled vocabulary is the one sentencepiece learns from the 40 kept training pairs of
    smallest SplitMix64 key (computed here from the line numbers alone), for any chunking."""
    monkeypatch.chdir(tmp_path)
    Path("c").mkdir()
    plain_corpus(Path("c"))
    opts = PrepareOptions("src", "tgt", vocab_size=360, vocab_sample=40)
    a = prepare_text(Path("c"), Path("a"), opts, show_progress=False, workers=1, chunk_lines=5)
    prepare_text(Path("c"), Path("b"), opts, show_progress=False, workers=1, chunk_lines=1000)
    assert digests(Path("a")) == digests(Path("b"))
    meta = json.loads(Path("a/meta.json").read_text())
    assert meta["options"]["vocab_sample"] == 40 and meta["report"]["train"]["vocab_sample"] == 40
    assert a["splits"]["train"]["vocab_sample"] == 40
    src = (Path("c") / "train.src").read_bytes().removeprefix(b"\xef\xbb\xbf").decode().split("\n")[:-1]
    tgt = (Path("c") / "train.tgt").read_text().split("\n")[:-1]
    kept = [
        i
        for i, (s, t) in enumerate(zip(src, tgt, strict=True))
        if s.strip()
        and t.strip()
        and not any((ord(c) < 32 and c != "\t") or 127 <= ord(c) < 160 for c in s + t)
    ]
    chosen = sorted(sorted(kept, key=lambda i: _splitmix64(0, i))[:40])
    lines = [src[i].replace("\t", " ") for i in chosen] + [tgt[i].replace("\t", " ") for i in chosen]
    expected = SentencePieceVocab.train(lines, 360)
    assert Path("a/src.spm").read_bytes() == expected.proto
    whole = PrepareOptions("src", "tgt", vocab_size=360, vocab_sample=10**9)
    prepare_text(Path("c"), Path("d"), whole, show_progress=False)
    prepare_text(Path("c"), Path("e"), PrepareOptions("src", "tgt", vocab_size=360), show_progress=False)
    assert Path("d/src.spm").read_bytes() == Path("e/src.spm").read_bytes() != expected.proto


def _chunk(rng: np.random.Generator, pairs: int) -> Split:
    src = [rng.integers(4, 99, rng.integers(1, 6)).tolist() for _ in range(pairs)]
    tgt = [rng.integers(4, 99, rng.integers(1, 6)).tolist() for _ in range(pairs)]
    notes = [
        SourceAnnotation(rng.integers(0, 9, (2, len(s))), rng.integers(0, 9, (len(s), len(s)))) for s in src
    ]
    return Split.from_lists(src, tgt, notes)


def test_a_split_saved_in_chunks_is_the_split_saved_whole(tmp_path):
    rng = np.random.default_rng(1)
    chunks = [_chunk(rng, n) for n in (0, 3, 1, 0, 5)]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    chunks[0].save(tmp_path / "a", "train")
    for chunk in chunks[1:]:
        chunk.append_to(tmp_path / "a", "train")
    join_appended(tmp_path / "a", "train")
    whole = Split(
        np.concatenate([c.src_tokens for c in chunks]),
        _offsets([c.src_offsets for c in chunks]),
        np.concatenate([c.tgt_tokens for c in chunks]),
        _offsets([c.tgt_offsets for c in chunks]),
        np.concatenate([c.src_factors for c in chunks if c.src_factors is not None], axis=1),
        np.concatenate([c.omega for c in chunks if c.omega is not None]),
        _offsets([c.omega_offsets for c in chunks if c.omega_offsets is not None]),
    )
    whole.save(tmp_path / "b", "train")
    assert digests(tmp_path / "a") == digests(tmp_path / "b")


def _offsets(parts: list[np.ndarray]) -> np.ndarray:
    """Offsets of chunks laid end to end, from their lengths."""
    lengths = np.concatenate([np.diff(p) for p in parts])
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def test_prepare_cli_takes_workers_and_a_vocabulary_sample(tmp_path):
    plain_corpus(tmp_path)
    args = ["prepare", str(tmp_path), "--vocab-size", "360", "--vocab-sample", "30"]
    one = CliRunner().invoke(app, [*args, "--workers", "1", "-o", str(tmp_path / "one")])
    two = CliRunner().invoke(app, [*args, "--workers", "2", "-o", str(tmp_path / "two")])
    assert one.exit_code == two.exit_code == 0, one.output + two.output
    assert digests(tmp_path / "one") == digests(tmp_path / "two")
    assert json.loads((tmp_path / "one" / "meta.json").read_text())["report"]["train"]["vocab_sample"] == 30


def test_prepare_runs_in_a_thread_other_than_the_main_one(tmp_path):
    """Only the main thread may set signal handlers: elsewhere `prepare` keeps the process's
    SIGTERM handling (and its worker processes still start) instead of failing."""
    plain_corpus(tmp_path)
    args = ["prepare", str(tmp_path), "--vocab-size", "360", "--workers", "2", "-o", str(tmp_path / "d")]
    results = []
    thread = threading.Thread(target=lambda: results.append(CliRunner().invoke(app, args)))
    thread.start()
    thread.join()
    assert results[0].exit_code == 0, results[0].output


TRICKY = [
    "plain words",
    " leading space",
    "trailing space ",
    "",
    "   ",
    "\u3000",  # an ideographic space: whitespace, so the line is blank
    "a\u00a0b",  # a no-break space inside a line
    "tab\there",
    "bell\x07",
    "dash \u0096 from cp1252",
    "del\x7f",
    "carriage\rreturn",
    "ends with a carriage return\r",
    "größe straße 😀",
    "\u0085next line",
]


def _lines(path: Path) -> list[str]:
    """A file's lines as the previous `read_lines` split them: on newlines, one trailing newline
    allowed, then a CR at the end of each removed."""
    raw = path.read_bytes().split(b"\n")
    return [line.decode().removesuffix("\r") for line in (raw[:-1] if raw[-1] == b"" else raw)]


def _reference(src: list[str], tgt: list[str]) -> tuple[list[str], list[str], list[int], tuple]:
    """What the per-line reading of the previous `read_parallel` kept and counted (tabs replaced,
    control characters found with unicodedata, blank sides skipped)."""
    import unicodedata

    kept_src, kept_tgt, numbers, counts = [], [], [], [0, 0, 0]
    for number, (s, t) in enumerate(zip(src, tgt, strict=True)):
        counts[0] += ("\t" in s) + ("\t" in t)
        s, t = s.replace("\t", " "), t.replace("\t", " ")
        if any(unicodedata.category(c) == "Cc" for c in s + t):
            counts[1] += 1
        elif not s.strip() or not t.strip():
            counts[2] += 1
        else:
            kept_src.append(s)
            kept_tgt.append(t)
            numbers.append(number)
    return kept_src, kept_tgt, numbers, tuple(counts)


@pytest.mark.parametrize("seed", range(40))
def test_clean_chunks_keep_and_count_what_line_by_line_reading_did(tmp_path, seed):
    """Chunks taken whole (no tab, control or blank line in sight) and chunks looked at line by
    line give what the per-line reading gave, CRLF line ends and a missing last newline included."""
    rng = np.random.default_rng(seed)
    pool = TRICKY if seed % 2 else [TRICKY[i] for i in (0, 2, 6, 13)]  # half the time, clean lines
    src, tgt = ([pool[i] for i in rng.integers(0, len(pool), 12)] for _ in range(2))
    end = "\r\n" if seed % 3 == 0 else "\n"
    for name, lines in (("a", src), ("b", tgt)):
        last = "" if seed % 5 == 0 and lines[-1] else end  # a last line without its newline
        (tmp_path / name).write_bytes((end.join(lines) + last).encode())
    kept_src, kept_tgt, numbers, counts = [], [], [], [0, 0, 0]
    for chunk in aligned_chunks(tmp_path / "a", tmp_path / "b", int(rng.integers(1, 13))):
        clean = clean_chunk(chunk, tmp_path / "a", tmp_path / "b", LineRules())
        kept_src += clean.src
        kept_tgt += clean.tgt
        numbers += clean.numbers
        stats = clean.stats
        counts = [
            counts[0] + stats.tabs_replaced,
            counts[1] + stats.skipped_control,
            counts[2] + stats.skipped_empty,
        ]
    assert (kept_src, kept_tgt, numbers, tuple(counts)) == _reference(
        _lines(tmp_path / "a"), _lines(tmp_path / "b")
    )


def _lines_one_by_one(data: bytes, n: int) -> list[tuple[bytes, int]]:
    """The reference: the stream's lines one by one, n at a time, a leading mark dropped."""
    stream, out, first = io.BytesIO(data), [], True
    while True:
        lines = list(itertools.islice(stream, n))
        if first and lines:
            lines[0] = lines[0].removeprefix(BOM)
            if not lines[0]:
                lines.pop(0)
        first = False
        if not lines:
            return out
        out.append((b"".join(lines), len(lines)))


def test_line_blocks_are_the_lines_taken_one_by_one(monkeypatch):
    """Blocks of n lines found by reading whole blocks equal the lines read one at a time, for
    any block size (lines cut across reads), with or without a final newline or a mark."""
    rng = random.Random(0)
    for _ in range(2000):
        count = rng.randint(0, 30)
        lines = [bytes(rng.choice(b"ab\r\xc3\xa4 ") for _ in range(rng.randint(0, 6))) for _ in range(count)]
        mark, end = BOM if rng.random() < 0.3 else b"", b"\n" if rng.random() < 0.5 else b""
        data = mark + b"\n".join(lines) + end
        n = rng.randint(1, 7)
        monkeypatch.setattr(LineReader, "BLOCK", rng.choice([1, 2, 3, 5, 64, 1 << 22]))
        reader, got = LineReader(Path("x"), io.BytesIO(data)), []
        while (block := reader.take(n))[1]:
            got.append(block)
            assert data[reader.offset - len(block[0]) : reader.offset] == block[0]  # where it lies
        assert got == _lines_one_by_one(data, n)


def _long_lines_emptied(body: bytes, limit: int) -> tuple[bytes, list[int]]:
    """The reference for a reader with a line limit: the stream read line by line, each line of
    more than `limit` bytes (its newline not counted) an empty line, and their numbers."""
    out, cut = [], []
    for number, line in enumerate(io.BytesIO(body)):
        if len(line.removesuffix(b"\n")) > limit:
            line = b"\n"
            cut.append(number)
        out.append(line)
    return b"".join(out), cut


def test_lines_over_the_limit_are_read_as_empty_lines_and_listed(monkeypatch):
    """With a line limit, the blocks are those of the stream with every longer line emptied, and
    `cut` lists those lines, for any read size (long lines across reads, pieces of many lines)."""
    rng = random.Random(1)
    for _ in range(3000):
        limit = rng.randint(1, 12)
        lengths = [
            rng.choice([rng.randint(0, limit), rng.randint(0, 4 * limit)]) for _ in range(rng.randint(0, 30))
        ]
        lines = [bytes(rng.choice(b"ab\r\xc3\xa4 ") for _ in range(k)) for k in lengths]
        mark, end = BOM if rng.random() < 0.3 else b"", b"\n" if rng.random() < 0.5 else b""
        body = b"\n".join(lines) + end
        n = rng.randint(1, 7)
        monkeypatch.setattr(LineReader, "BLOCK", rng.choice([1, 2, 3, 5, 64, 1 << 22]))
        reader, got = LineReader(Path("x"), io.BytesIO(mark + body), max_line=limit), []
        while (block := reader.take(n))[1]:
            got.append(block)
        expected, cut = _long_lines_emptied(body, limit)
        assert got == _lines_one_by_one(expected, n)
        assert reader.cut == cut


def test_chunks_say_which_of_their_lines_were_too_long(tmp_path, monkeypatch):
    """A chunk lists the lines either side cut, numbered in the file; its pairs are skipped and
    counted as too long, as are pairs with a side over the rules' characters that the reader
    kept (under four bytes a character). Chunks that say where their lines lie do so only until
    a line is cut: the file's bytes there would hold it whole."""
    monkeypatch.setattr(LineReader, "BLOCK", 8)
    src_lines = [b"a" * 10, b"b" * 3, b"c" * 2, b"\xc3\xa4" * 7, b"d", b"e" * 30, b"f"]
    tgt_lines = [b"A", b"B" * 40, b"C", b"D", b"E" * 8, b"F", b"G"]
    for name, lines in (("c.src", src_lines), ("c.tgt", tgt_lines)):
        (tmp_path / name).write_bytes(b"\n".join(lines))
    src, tgt = tmp_path / "c.src", tmp_path / "c.tgt"
    rules = LineRules(max_chars=6)  # lines over 24 bytes are cut by the reader
    chunks = list(aligned_chunks(src, tgt, 3, max_line=rules.max_line_bytes))
    assert [c.long_lines for c in chunks] == [(2,), (6,), ()]
    cleaned = [clean_chunk(c, src, tgt, rules) for c in chunks]
    assert [c.src for c in cleaned] == [["cc"], [], ["f"]]
    assert [c.stats.skipped_long for c in cleaned] == [2, 3, 0]  # lines 1, 4, 5 kept by the reader
    spans = list(aligned_chunks(src, tgt, 3, spans=True, max_line=rules.max_line_bytes))
    assert [c.data() for c in spans] == [c.data() for c in chunks]
    assert [isinstance(c.src, Span) for c in spans] == [True, False, False]


def _corpus_with_a_long_line(folder: Path, mib: int) -> Path:
    """1,000 training pairs whose train.src.gz holds, as line 501, `mib` MiB of "ab " (a few MB
    compressed, written a MiB at a time); none when `mib` is 0."""
    folder.mkdir()
    lines = [f"{WORDS[i % 13]} {WORDS[i * 7 % 13]} {i}\n".encode() for i in range(1000)]
    (folder / "train.tgt").write_bytes(b"".join(lines))
    for name in ("dev.src", "dev.tgt"):
        (folder / name).write_bytes(b"".join(lines[:20]))
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip's format
    with (folder / "train.src.gz").open("wb") as out:
        out.write(packer.compress(b"".join(lines[:500])))
        if mib:
            for _ in range(mib):
                out.write(packer.compress((b"ab " * 349_526)[: 1 << 20]))
            lines[500] = b"\n"
        out.write(packer.compress(b"".join(lines[500:])))
        out.write(packer.flush())
    return folder


def _peak_megabytes(command: list[str], errors: Path) -> int:
    """The peak resident memory of a child running `command` (ru_maxrss, from wait4), which must
    succeed. It runs under a 4 GiB address-space limit: a regression fails, rather than take the
    memory of a shared machine."""
    limit = 4 << 30
    with errors.open("w") as err:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
        )
        _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, errors.read_text()
    return usage.ru_maxrss // 1024


def test_a_line_of_hundreds_of_megabytes_is_skipped_without_being_held(tmp_path):
    """Issue 87: a 300 MiB line in a .gz of a few MB (one far past --max-len) was read, decoded
    and encoded before the length filter dropped it, at about 63 times its size. The reader now
    drops it in pieces as it reads: the peak memory of `prepare` stays within 64 MB of the same
    run's without the line, and the report counts the pair as too long."""
    peaks = {}
    for mib in (0, 300):
        corpus = _corpus_with_a_long_line(tmp_path / f"c{mib}", mib)
        command = [sys.executable, "-m", "transduce", "prepare", str(corpus), "--vocab-size", "300"]
        command += ["--workers", "1", "-o", str(tmp_path / f"d{mib}")]
        peaks[mib] = _peak_megabytes(command, tmp_path / "errors.txt")
    assert peaks[300] - peaks[0] < 64, peaks
    report = json.loads((tmp_path / "d300" / "meta.json").read_text())["report"]["train"]
    assert (report["pairs"], report["skipped_too_long"]) == (999, 1)
    assert "train: 999 pairs kept; skipped 0 empty, 1 too long" in (tmp_path / "errors.txt").read_text()


def test_line_blocks_of_a_large_file_are_the_lines_taken_one_by_one():
    """Lines counted across the reader's 64 KB pieces and its 4 MB reads land where reading
    line by line puts them, for chunk sizes from one line to more than a read holds."""
    rng = np.random.default_rng(4)
    lengths = rng.integers(0, 200, 60_000)
    data = b"".join(b"x" * int(k) + b"\n" for k in lengths) + b"last"
    for n in (1, 999, 20_000, 70_000):
        reader, got = LineReader(Path("x"), io.BytesIO(data)), []
        while (block := reader.take(n))[1]:
            got.append(block)
        assert got == _lines_one_by_one(data, n)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_chunks_as_spans_read_the_bytes_of_chunks_read_whole(tmp_path, monkeypatch, suffix):
    """A chunk that says where its lines lie (an uncompressed file's) reads back the bytes of
    the chunk that holds them, a byte order mark, CRs and a missing last newline included; a
    compressed file's chunks hold their bytes."""
    monkeypatch.setattr(LineReader, "BLOCK", 16)
    src, tgt = (tmp_path / f"c.src{suffix}", tmp_path / f"c.tgt{suffix}")
    src_data = BOM + b"".join(b"s%d \xc3\xa4\r\n" % i for i in range(40)).rstrip(b"\n")
    tgt_data = b"".join(b"t" * (i % 5) + b"\n" for i in range(40))
    for path, data in ((src, src_data), (tgt, tgt_data)):
        path.write_bytes(gzip.compress(data) if suffix else data)
    whole = [c.data() for c in aligned_chunks(src, tgt, 3)]
    chunks = list(aligned_chunks(src, tgt, 3, spans=True))
    assert [c.data() for c in chunks] == whole and len(whole) == 14
    assert all(isinstance(c.src, Span) == (not suffix) for c in chunks)
    if not suffix:
        src.write_bytes(src_data[:50])  # cut short between the passes
        with pytest.raises(CorpusError, match=r"c\.src: the file changed while it was being read"):
            chunks[-1].data()
