"""retain_freed_memory: a large freed block stays in the process instead of going back to the kernel."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys

import pytest

PROBE = """
import ctypes, json, sys
from transduce.cpu_memory import retain_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
retained = retain_freed_memory() if sys.argv[1] == "retain" else None
size = 24 * 2**20
before = libc.mallinfo2()
block = libc.malloc(size)
during = libc.mallinfo2()
libc.free(block)
after = libc.mallinfo2()
print(json.dumps({"retained": retained, "mmapped": during.hblkhd - before.hblkhd,
                  "free_after": after.fordblks}))
"""


def glibc_with_mallinfo2() -> bool:
    try:
        return hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2")
    except OSError:
        return False


def probe(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(not glibc_with_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2)")
def test_a_freed_large_block_stays_in_the_heap() -> None:
    default = probe("default")
    assert default["mmapped"] >= 24 * 2**20  # glibc's default: a block this large is mmapped ...
    retained = probe("retain")
    assert retained["retained"] is True
    assert retained["mmapped"] == 0  # ... with the setting it comes from the heap
    assert retained["free_after"] >= 24 * 2**20  # and stays there, free for the next step's buffer


RELEASE_PROBE = """
import ctypes, json
from transduce.cpu_memory import release_freed_memory

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
blocks = [libc.malloc(100_000) for _ in range(2000)]  # 200 MB below the mmap threshold: the heap
for b in blocks:
    ctypes.memset(b, 1, 100_000)
for b in blocks[:-1]:  # the last one pins the heap's top: nothing is trimmed by free() itself
    libc.free(b)
held = rss_mb()
released = release_freed_memory()
print(json.dumps({"held": held, "after": rss_mb(), "released": released}))
"""


@pytest.mark.skipif(not glibc_with_mallinfo2(), reason="needs glibc")
def test_release_hands_freed_heap_pages_back() -> None:
    out = subprocess.run([sys.executable, "-c", RELEASE_PROBE], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout)
    assert found["released"] is True
    assert found["held"] - found["after"] >= 150  # MB: the freed blocks below the pinned top
