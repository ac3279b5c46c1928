"""Keep freed memory in the process for reuse, for CPU decoding under glibc's malloc.

Step-by-step decoding allocates and frees the same large buffers (logits, attention scores, the
beam-reordered cache) at every step. glibc hands blocks above its mmap threshold back to the
kernel when they are freed, and trims the heap's top likewise, so the next step's buffer of the
same size is fresh memory that page-faults on first touch: 15-20% of beam search's time on
this machine's VM (bench/RESULTS.md). Raising the thresholds keeps those pages in the process
(PyTorch's CPU performance guide recommends jemalloc or tcmalloc for the same reason; this
needs no preloaded library). The cost: the process keeps its peak heap instead of shrinking.
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


def retain_freed_memory() -> bool:
    """Set glibc's malloc to reuse freed memory instead of returning it to the kernel; False
    (nothing changed) where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD))
    return all(mallopt(param, value) == 1 for param, value in settings)
