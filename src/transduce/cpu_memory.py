"""Keep freed memory in the process for reuse, for CPU decoding under glibc's malloc.

Step-by-step decoding allocates and frees the same large buffers (logits, attention scores, the
beam-reordered cache) at every step. glibc hands blocks above its mmap threshold back to the
kernel when they are freed, and trims the heap's top likewise, so the next step's buffer of the
same size is fresh memory that page-faults on first touch: 15-20% of beam search's time on
this machine's VM (docs/results/decoding.md). Raising the thresholds keeps those pages in the process
(PyTorch's CPU performance guide recommends jemalloc or tcmalloc for the same reason; this
needs no preloaded library). The cost: the process keeps its peak heap instead of shrinking.

The opposite, for work that frees much at once and then needs memory of another kind (prepare's
vocabulary sample, then sentencepiece's training): hand the freed pages back now.
"""

from __future__ import annotations

import ctypes
import sys

# mallopt parameters (glibc malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 * 2**20  # glibc's largest allowed value: blocks up to 32 MiB come from the heap
TRIM_THRESHOLD = 2**30  # free heap top kept up to 1 GiB before it is returned
TOP_PAD = 64 * 2**20  # extra heap requested per growth (address space; pages are touched on use)


def _glibc() -> ctypes.CDLL | None:
    """The C library, where it is glibc (whose malloc these functions tune)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 (both must be there)
    except (OSError, AttributeError):
        return None
    return libc


def retain_freed_memory() -> bool:
    """Set glibc's malloc to reuse freed memory instead of returning it to the kernel; False
    (nothing changed) where the C library is not glibc."""
    libc = _glibc()
    if libc is None:
        return False
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD))
    return all(libc.mallopt(param, value) == 1 for param, value in settings)


def release_freed_memory() -> bool:
    """Return the free pages inside the heap to the kernel now (glibc's malloc_trim): blocks of
    a few MB freed among live ones leave holes that glibc keeps, so a process's resident memory
    stays at its high-water mark; False where the C library is not glibc."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
