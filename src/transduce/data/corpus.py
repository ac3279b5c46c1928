"""Reading parallel text with validation: every problem names the file and the line.

Rules (documented in docs/data.md):
- a missing file, or source and target files with different line counts, is an error naming
  both files and both counts;
- bytes that are not UTF-8 are an error naming the file and the 1-based line number;
- a pair with control characters (Unicode category Cc other than tab, e.g. a stray U+0096 from
  a mis-decoded cp1252 dash) is skipped and counted, the first one's file:line reported
  (`control="skip"`), or is an error naming file, line and code point (`control="reject"`);
  tabs are replaced by a space when `tabs="space"`, or are an error when `tabs="reject"`;
- a pair with an empty (or all-whitespace) side is skipped and counted (`empty="skip"`) or
  is an error (`empty="reject"`).
- a pair with a side of more than `max_chars` characters is skipped and counted as too long
  before anything is done with its text; a line over four times that many bytes is dropped
  by the reader as it reads (`LineCap`), never held whole.

Corpora are read as streams, plain or compressed (`.gz`, `.bz2`, `.xz`, `.zst`), in aligned chunks of
lines (`aligned_chunks`), and each chunk is checked on its own (`clean_chunk`): `prepare` holds
one chunk at a time, never a whole corpus, and can check chunks in several processes.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import select
import sys
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .long_lines import LineCap
from .zstd_frames import incomplete_frame

COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst")
BOM = b"\xef\xbb\xbf"
# Unicode category Cc (fixed since Unicode 1.1) but the tab, which has rules of its own.
CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
# The same in UTF-8 bytes, to pass over clean chunks at the speed of bytes methods: C0 but the tab
# and newline, DEL, and C1 (U+0080..U+009F, 0xC2 and a byte 0x80..0x9F; 0xC2 only leads).
_C0_BYTES = bytes([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])
_C1_BYTES = re.compile(b"\xc2[\x80-\x9f]")
_SPACE_AFTER_NEWLINE = re.compile(r"\n\s")  # \s: what str.strip() removes


class CorpusError(ValueError):
    """Input text that cannot be used; the message says which file and line."""


@dataclass
class ReadStats:
    pairs: int = 0
    skipped_empty: int = 0
    tabs_replaced: int = 0
    skipped_long: int = 0
    skipped_ratio: int = 0
    skipped_control: int = 0
    first_control: str | None = None  # file:line and code point of the first skipped one

    def add(self, later: ReadStats) -> None:
        """Count in the stats of the lines that follow these."""
        for name in (
            "pairs",
            "skipped_empty",
            "tabs_replaced",
            "skipped_long",
            "skipped_ratio",
            "skipped_control",
        ):
            setattr(self, name, getattr(self, name) + getattr(later, name))
        self.first_control = self.first_control or later.first_control


def _require_readable(path: Path, hint: str = "") -> None:
    if not path.exists():
        raise CorpusError(f"{path}: file not found{hint}")
    if path.is_dir():
        raise CorpusError(f"{path}: a directory, not a text file")


def require_corpus_file(path: Path, hint: str = "") -> None:
    """A corpus file must be a regular file: a pipe or device would block or never end."""
    _require_readable(path, hint)
    if not path.is_file():
        raise CorpusError(f"{path}: not a regular file (a pipe or device); give a corpus file")


def read_lines(path: Path) -> list[str]:
    """Decode a file line by line as UTF-8 ('\\n' separated, one trailing newline allowed).
    A pipe is read to its end (`translate -i <(...)`); corpora use `require_corpus_file`."""
    _require_readable(path)
    return decode_lines(path.read_bytes(), str(path))


def decode_lines(data: bytes, name: str, first_line: int = 1) -> list[str]:
    """`data` as UTF-8 lines (a leading byte order mark and a CR before each newline dropped);
    invalid bytes are an error naming `name` and the 1-based line (`data` begins at `first_line`)."""
    if first_line == 1:
        data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark is not text
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    return [
        _decode_line(line, name, number).removesuffix("\r") for number, line in enumerate(raw, first_line)
    ]


def _decode_line(line: bytes, name: str, number: int) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{name}:{number}: invalid UTF-8 at byte {exc.start} of the line ({exc.reason})"
        ) from None


def read_input(path: Path | None) -> list[str]:
    """Lines of a file, or of standard input when `path` is None, decoded as `read_lines` does."""
    return read_lines(path) if path is not None else decode_lines(sys.stdin.buffer.read(), "<stdin>")


STREAM_GROUP = 4096  # lines a group of piped input may hold: decoded as one batching of a file's


def stream_input(fd: int, name: str = "<stdin>", max_lines: int = STREAM_GROUP) -> Iterator[list[str]]:
    """Lines of a file descriptor (stdin) in groups as they arrive: a group holds the complete
    lines already available, up to `max_lines`, so an interactive line is answered at once while
    piped input is batched (sorted by length and cut by the token budget) nearly as a file is:
    groups of 64 lines made 6,000 piped lines take twice a file's time. Decoded as `decode_lines`
    does; UTF-8 errors name the line."""
    pending, number, eof = b"", 1, False
    while not eof or pending:
        # Block on a read only while no complete line waits; otherwise take what is there.
        while not eof and pending.count(b"\n") < max_lines and (b"\n" not in pending or _readable(fd)):
            chunk = os.read(fd, 1 << 16)
            eof = not chunk
            pending += chunk
        cut = _nth_newline(pending, max_lines)
        if cut < 0:  # end of input: the last line may lack its newline
            cut = len(pending) - 1
        group, pending = pending[: cut + 1], pending[cut + 1 :]
        lines = decode_lines(group, name, number)
        number += len(lines)
        yield lines


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def _nth_newline(data: bytes, n: int) -> int:
    """Index of the n-th newline of `data`, or of its last one if it has fewer; -1 if none."""
    found, _ = _find_newline(data, n, 0)
    return found if found >= 0 else data.rfind(b"\n")


def _find_newline(data: bytes, n: int, at: int) -> tuple[int, int]:
    """The index of the n-th newline of `data` from `at` and n, or -1 and how many there are
    when fewer. Newlines are counted a 256 KB piece at a time and located only in the piece that
    holds the n-th: locating every newline was most of the reading time of the process that
    hands out `prepare`'s chunks (numpy counts four times as fast as `bytes.count`)."""
    found = 0
    while at < len(data):
        piece = np.frombuffer(data, np.uint8, min(1 << 18, len(data) - at), at) == 10
        here = int(np.count_nonzero(piece))
        if found + here >= n:
            return at + int(np.flatnonzero(piece)[n - found - 1]), n
        found, at = found + here, at + len(piece)
    return -1, found


def corpus_path(folder: Path, name: str) -> Path:
    """`folder/name`, or the compressed file `name.gz`, `.bz2`, `.xz` or `.zst` when that is the one there;
    the plain name when none is (whoever needs the file reports it missing). Two forms of one
    file are an error: which one holds the data is the user's to say."""
    found = [p for p in (folder / name, *(folder / f"{name}{ext}" for ext in COMPRESSIONS)) if p.exists()]
    if len(found) > 1:
        raise CorpusError(
            f"{folder / name}: found {' and '.join(p.name for p in found)}; keep only one of them"
        )
    return found[0] if found else folder / name


def open_corpus(path: Path) -> BinaryIO:
    """The file's bytes, decompressed according to its suffix; a .zst file that is not whole
    frames is a CorpusError (gzip's, bz2's and xz's readers raise one when they reach the cut)."""
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    if path.suffix == ".bz2":
        return bz2.open(path, "rb")
    if path.suffix == ".xz":
        return lzma.open(path, "rb")
    if path.suffix == ".zst":
        import zstandard

        cut = incomplete_frame(path)
        if cut is not None:  # its reader would give the whole frames before it, and no error
            raise CorpusError(f"{path}: damaged or cut short (no whole zstd frame from byte {cut})")
        reader = zstandard.ZstdDecompressor().stream_reader(path.open("rb"), read_across_frames=True)
        return io.BufferedReader(reader)
    return path.open("rb")


def _read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged or truncated compressed file raises."""
    import zstandard

    return (OSError, EOFError, lzma.LZMAError, zstandard.ZstdError)


class LineReader:
    """A corpus file's lines, taken n at a time as one block of bytes (newlines kept; the last
    line may lack one), a leading byte order mark dropped; a damaged compressed file is a
    CorpusError naming the file. Lines are found in blocks read whole, not one by one: the
    process that reads hands chunks to the workers, and its reading was half its time. With
    `max_line`, a line longer than that many bytes is read as an empty line (`cut` lists them)
    and never held whole."""

    BLOCK = 1 << 22

    def __init__(self, path: Path, stream: BinaryIO, max_line: int | None = None) -> None:
        self.path = path
        self.stream = stream
        self.lines = 0  # lines taken so far
        self.offset = 0  # where in the (uncompressed) file the lines taken end, while none is cut
        self._cap = LineCap(max_line) if max_line is not None else None
        self._buffer = b""  # read; taken up to _start
        self._start = 0
        self._counted = (0, 0)  # newlines counted from _start: up to where, and how many
        self._fresh = True  # nothing read yet
        self._eof = False

    @property
    def cut(self) -> list[int]:
        """The 0-based numbers of the lines read as empty for being too long, so far."""
        return self._cap.cut if self._cap is not None else []

    def take(self, n: int) -> tuple[bytes, int]:
        """Up to n lines as one block, and how many it holds (fewer only at the end)."""
        while True:
            at, before = self._counted
            cut, found = _find_newline(self._buffer, n - before, at)
            if cut >= 0:
                count, cut = n, cut + 1
                break
            self._counted = (len(self._buffer), before + found)
            if self._eof:  # what is left, its last line perhaps without a newline
                cut = len(self._buffer)
                count = before + found + (cut > self._start and not self._buffer.endswith(b"\n"))
                break
            self._read()
        block = self._buffer[self._start : cut]
        self._start, self._counted = cut, (cut, 0)
        self.lines += count
        self.offset += len(block)
        return block, count

    def _read(self) -> None:
        try:
            more = self.stream.read(self.BLOCK)
        except _read_errors() as exc:
            raise CorpusError(f"{self.path}: unreadable after line {self.lines} ({exc})") from None
        self._eof = not more
        if self._fresh and more.startswith(BOM[:1]):
            while len(more) < len(BOM) and (extra := self.stream.read(len(BOM) - len(more))):
                more += extra
            if more.startswith(BOM):
                more, self.offset = more[len(BOM) :], len(BOM)
        self._fresh = False
        if self._cap is not None:
            more = self._cap.finish() if self._eof else self._cap.feed(more)
        self._buffer = self._buffer[self._start :] + more
        self._counted = (self._counted[0] - self._start, self._counted[1])
        self._start = 0

    def count_rest(self) -> int:
        """Read the file to its end, counting its lines as `take` would have."""
        total = 0
        while count := self.take(1 << 16)[1]:
            total += count
        return total


@dataclass(frozen=True)
class Span:
    """Where a chunk's lines lie in an uncompressed file, for the process that takes the chunk
    to read: sending the bytes to a worker was a sixth of the time of the process that hands
    out the chunks."""

    path: Path
    start: int
    size: int

    def read(self) -> bytes:
        try:
            with self.path.open("rb") as f:
                f.seek(self.start)
                data = f.read(self.size)
        except OSError as exc:
            raise CorpusError(f"{self.path}: unreadable ({exc})") from None
        if len(data) != self.size:
            raise CorpusError(f"{self.path}: the file changed while it was being read")
        return data


@dataclass
class RawChunk:
    """Aligned lines of a source and a target file, as read (bytes, newlines kept) or where they
    lie in the files."""

    first: int  # the 1-based line number of its first line
    lines: int
    src: bytes | Span
    tgt: bytes | Span
    long_lines: tuple[int, ...] = ()  # 1-based numbers of lines read as empty for their length

    def data(self) -> tuple[bytes, bytes]:
        """The source and target lines' bytes."""
        return _bytes(self.src), _bytes(self.tgt)


def _bytes(side: bytes | Span) -> bytes:
    return side.read() if isinstance(side, Span) else side


def aligned_chunks(
    src_path: Path, tgt_path: Path, lines: int, spans: bool = False, max_line: int | None = None
) -> Iterator[RawChunk]:
    """The two files in chunks of `lines` lines; files of different lengths are an error naming
    both files and their line counts (found when the shorter one ends). With `spans`, a chunk of
    an uncompressed file says where its lines lie instead of holding them (until a line is cut).
    A line longer than `max_line` bytes is read as an empty line and listed in `long_lines`."""
    with ExitStack() as stack:
        src, tgt = (
            LineReader(p, stack.enter_context(open_corpus(p)), max_line) for p in (src_path, tgt_path)
        )
        first = 1
        while True:
            (a, got), (b, other) = src.take(lines), tgt.take(lines)
            if got != other:
                src_total, tgt_total = src.lines + src.count_rest(), tgt.lines + tgt.count_rest()
                raise CorpusError(
                    f"line counts differ: {src_path} has {src_total} lines, {tgt_path} has {tgt_total}"
                )
            if not got:
                return
            a, b = (
                Span(path, reader.offset - len(data), len(data))
                if spans and path.suffix not in COMPRESSIONS and not reader.cut
                else data
                for path, reader, data in zip((src_path, tgt_path), (src, tgt), (a, b), strict=True)
            )
            yield RawChunk(first, got, a, b, _cut_between(src.cut, tgt.cut, first, got))
            first += got


def _cut_between(src: list[int], tgt: list[int], first: int, count: int) -> tuple[int, ...]:
    """The 1-based numbers of the `count` lines from `first` that either side cut (`src`, `tgt`:
    the readers' sorted 0-based numbers)."""
    found: set[int] = set()
    for cut in (src, tgt):
        found.update(n + 1 for n in cut[bisect_left(cut, first - 1) : bisect_left(cut, first - 1 + count)])
    return tuple(sorted(found))


def decode_chunk(data: bytes, name: str, first: int) -> str:
    """A chunk's lines (from `aligned_chunks`) as one text, '\\n' between them: decoded at once,
    a CR before each newline dropped, as `decode_lines` does line by line (the byte order
    mark is already gone); invalid UTF-8 is an error naming `name` and the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = "\n".join(_decode_line(line, name, n) for n, line in enumerate(data.split(b"\n"), first))
    text = text.removesuffix("\n")
    return text.replace("\r\n", "\n").removesuffix("\r") if "\r" in text else text


@dataclass
class CleanChunk:
    """The pairs of a chunk that pass the checks, and what was skipped or changed."""

    src: list[str]
    tgt: list[str]
    numbers: list[int]  # the 0-based line numbers of the kept pairs
    stats: ReadStats


@dataclass
class LineRules:
    """What to do with pairs with an empty side, tabs, control characters (see the top), and
    with a side longer than `max_chars` characters: skipped and counted as too long."""

    empty: str = "skip"
    tabs: str = "space"
    control: str = "skip"
    max_chars: int | None = None

    @property
    def max_line_bytes(self) -> int | None:
        """Lines longer than this many bytes are surely over `max_chars` (UTF-8 spends at most
        4 bytes on a character): the reader drops them unread."""
        return 4 * self.max_chars if self.max_chars is not None else None


def clean_chunk(chunk: RawChunk, src_path: Path, tgt_path: Path, rules: LineRules) -> CleanChunk:
    """A chunk's pairs decoded and checked; empty pairs and pairs with control characters
    skipped (counted) or rejected. A chunk with no tab, control character or blank line (most
    of them) is taken whole, without a look at each line."""
    data = chunk.data()
    texts = (
        decode_chunk(data[0], str(src_path), chunk.first),
        decode_chunk(data[1], str(tgt_path), chunk.first),
    )
    src, tgt = (text.split("\n") for text in texts)
    long = _long_pairs(chunk, src, tgt, rules.max_chars)
    if not long and all(_plain(raw) and _no_blank_line(text) for raw, text in zip(data, texts, strict=True)):
        return CleanChunk(
            src, tgt, list(range(chunk.first - 1, chunk.first - 1 + len(src))), ReadStats(len(src))
        )
    out = CleanChunk([], [], [], ReadStats())
    stats = out.stats
    for number, s, t in zip(range(chunk.first, chunk.first + len(src)), src, tgt, strict=True):
        if number in long:
            stats.skipped_long += 1
            continue
        s = _clean(s, src_path, number, rules.tabs, stats)
        t = _clean(t, tgt_path, number, rules.tabs, stats)
        problem = _control(s, src_path, number) or _control(t, tgt_path, number)
        if problem is not None:
            if rules.control == "reject":
                raise CorpusError(f"{problem} (use --control skip to skip such pairs)")
            stats.skipped_control += 1
            stats.first_control = stats.first_control or problem
            continue
        if not s.strip() or not t.strip():
            if rules.empty == "reject":
                which = src_path if not s.strip() else tgt_path
                raise CorpusError(f"{which}:{number}: empty line (use --empty skip to skip such pairs)")
            stats.skipped_empty += 1
            continue
        out.src.append(s)
        out.tgt.append(t)
        out.numbers.append(number - 1)
    stats.pairs = len(out.src)
    return out


def _long_pairs(chunk: RawChunk, src: list[str], tgt: list[str], limit: int | None) -> set[int]:
    """The 1-based numbers of the chunk's pairs with a side over `limit` characters: cut by the
    reader (read as empty) or found here, before anything is done with their text."""
    long = set(chunk.long_lines)
    if limit is not None and max(map(len, chain(src, tgt))) > limit:
        sides = zip(src, tgt, strict=True)
        long.update(chunk.first + i for i, (s, t) in enumerate(sides) if max(len(s), len(t)) > limit)
    return long


def _plain(data: bytes) -> bool:
    """Whether a chunk's bytes hold no tab and no control character but the CR of CRLF line ends."""
    if b"\t" in data or _C1_BYTES.search(data):
        return False
    controls = len(data) - len(data.translate(None, _C0_BYTES))
    return controls == (data.count(b"\r\n") if controls else 0)


def _no_blank_line(text: str) -> bool:
    """False when a line of a chunk's text may be empty or all whitespace: the first starts
    with whitespace, or another does, or the last is empty."""
    return (
        bool(text)
        and not text[0].isspace()
        and not text.endswith("\n")
        and not _SPACE_AFTER_NEWLINE.search(text)
    )


def _clean(line: str, path: Path, number: int, tabs: str, stats: ReadStats) -> str:
    if "\t" in line:
        if tabs == "reject":
            raise CorpusError(f"{path}:{number}: contains a tab character (use --tabs space to replace)")
        line = line.replace("\t", " ")
        stats.tabs_replaced += 1
    return line


def _control(line: str, path: Path, number: int) -> str | None:
    """'file:line: U+XXXX' for the first control character of a line (tabs are gone), else None."""
    found = CONTROL.search(line)
    if found is None:
        return None
    return f"{path}:{number}: contains control character U+{ord(found.group()):04X}"


def read_parallel(
    src_path: Path, tgt_path: Path, empty: str = "skip", tabs: str = "space", control: str = "skip"
) -> tuple[list[str], list[str], ReadStats]:
    """Validated, aligned source/target segments of two whole files (see `clean_chunk`)."""
    for path in (src_path, tgt_path):
        require_corpus_file(path)
    src: list[str] = []
    tgt: list[str] = []
    stats = ReadStats()
    for chunk in aligned_chunks(src_path, tgt_path, 1 << 16):
        clean = clean_chunk(chunk, src_path, tgt_path, LineRules(empty, tabs, control))
        src += clean.src
        tgt += clean.tgt
        stats.add(clean.stats)
    return src, tgt, stats
