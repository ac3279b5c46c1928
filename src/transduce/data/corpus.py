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
"""

from __future__ import annotations

import os
import select
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


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
    kept_lines: list[int] = field(default_factory=list)  # 0-based line numbers of the kept pairs


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
    lines = []
    for number, line in enumerate(raw, first_line):
        try:
            lines.append(line.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError as exc:
            raise CorpusError(
                f"{name}:{number}: invalid UTF-8 at byte {exc.start} of the line ({exc.reason})"
            ) from None
    return lines


def read_input(path: Path | None) -> list[str]:
    """Lines of a file, or of standard input when `path` is None, decoded as `read_lines` does."""
    return read_lines(path) if path is not None else decode_lines(sys.stdin.buffer.read(), "<stdin>")


def stream_input(fd: int, name: str = "<stdin>", max_lines: int = 64) -> Iterator[list[str]]:
    """Lines of a file descriptor (stdin) in groups as they arrive: a group holds the complete
    lines already available, up to `max_lines`, so an interactive line is answered at once while
    piped input is still batched. Decoded as `decode_lines` does; UTF-8 errors name the line."""
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
    end = -1
    for _ in range(n):
        found = data.find(b"\n", end + 1)
        if found < 0:
            break
        end = found
    return end


def _clean(line: str, path: Path, number: int, tabs: str, stats: ReadStats) -> str:
    if "\t" in line:
        if tabs == "reject":
            raise CorpusError(f"{path}:{number}: contains a tab character (use --tabs space to replace)")
        line = line.replace("\t", " ")
        stats.tabs_replaced += 1
    return line


def _control(line: str, path: Path, number: int) -> str | None:
    """'file:line: U+XXXX' for the first control character of a line, else None."""
    for ch in line:
        if unicodedata.category(ch) == "Cc":
            return f"{path}:{number}: contains control character U+{ord(ch):04X}"
    return None


def read_parallel(
    src_path: Path, tgt_path: Path, empty: str = "skip", tabs: str = "space", control: str = "skip"
) -> tuple[list[str], list[str], ReadStats]:
    """Validated, aligned source/target segments; empty pairs and pairs with control
    characters skipped (counted) or rejected."""
    for path in (src_path, tgt_path):
        require_corpus_file(path)
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise CorpusError(f"line counts differ: {src_path} has {len(src)} lines, {tgt_path} has {len(tgt)}")
    stats = ReadStats()
    out_src, out_tgt = [], []
    for number, (s, t) in enumerate(zip(src, tgt, strict=True), 1):
        s = _clean(s, src_path, number, tabs, stats)
        t = _clean(t, tgt_path, number, tabs, stats)
        problem = _control(s, src_path, number) or _control(t, tgt_path, number)
        if problem is not None:
            if control == "reject":
                raise CorpusError(f"{problem} (use --control skip to skip such pairs)")
            stats.skipped_control += 1
            stats.first_control = stats.first_control or problem
            continue
        if not s.strip() or not t.strip():
            if empty == "reject":
                which = src_path if not s.strip() else tgt_path
                raise CorpusError(f"{which}:{number}: empty line (use --empty skip to skip such pairs)")
            stats.skipped_empty += 1
            continue
        out_src.append(s)
        out_tgt.append(t)
        stats.kept_lines.append(number - 1)
    stats.pairs = len(out_src)
    return out_src, out_tgt, stats
