"""Whether a .zst file is whole: zstandard's stream reader reads a file cut inside a frame as a
shorter file (the partial frame dropped, no error), where gzip's and xz's readers raise.

The check walks the frame and block headers (RFC 8878, section 3.1) without decompressing
anything: a few bytes read per block of up to 128 KB.
"""

from __future__ import annotations

import os
from pathlib import Path

MAGIC = 0xFD2FB528
SKIPPABLE = 0x184D2A50  # skippable frames: this magic's upper 28 bits, a 4-byte size, the data
RLE_BLOCK = 1  # a block of one byte repeated: its header's size is the output's, one byte stored
DICTIONARY_ID_BYTES = (0, 1, 2, 4)
CONTENT_SIZE_BYTES = (0, 2, 4, 8)  # flag 0 means 1 byte in a single-segment frame


def incomplete_frame(path: Path) -> int | None:
    """Where the frame starts that the file ends inside (or the bytes that begin no frame), or
    None when the file is whole frames."""
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        at = 0
        while at < size:
            end = _frame_end(f.fileno(), at)
            if end is None or end > size:
                return at
            at = end
    return None


def _frame_end(fd: int, at: int) -> int | None:
    """The offset just past the frame that starts at `at`; None if no frame starts there or the
    file ends inside its headers."""
    head = os.pread(fd, 8, at)
    magic = int.from_bytes(head[:4], "little")
    if magic & 0xFFFFFFF0 == SKIPPABLE and len(head) == 8:
        return at + 8 + int.from_bytes(head[4:8], "little")
    if magic != MAGIC or len(head) < 5:
        return None
    descriptor = head[4]
    single_segment = descriptor >> 5 & 1
    content_size = CONTENT_SIZE_BYTES[descriptor >> 6] or single_segment
    at += 5 + (not single_segment) + DICTIONARY_ID_BYTES[descriptor & 3] + content_size
    while True:
        block = os.pread(fd, 3, at)
        if len(block) < 3:
            return None
        header = int.from_bytes(block, "little")
        at += 3 + (1 if header >> 1 & 3 == RLE_BLOCK else header >> 3)
        if header & 1:  # the frame's last block, then its checksum if it has one
            return at + 4 * (descriptor >> 2 & 1)
