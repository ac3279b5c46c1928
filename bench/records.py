"""Shared by the benchmarks: writing one section of bench/RESULTS.md (replaced in place on
every run), a mean ± spread cell, the CPU's name and a quick measure of its speed."""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent  # the repository: configs/, docs/
OUT = BENCH / "out"  # what the benchmarks build and train (ignored by git)
RECORDS = BENCH / "records"  # what they measured (committed)
RESULTS = BENCH / "RESULTS.md"


def write_section(name: str, lines: list[str]) -> None:
    """Put `lines` between `<!-- name:start -->` and `<!-- name:end -->` (appended the first time),
    atomically, leaving the rest of the file as it is."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = "\n".join([start, *lines, end])
    current = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    if start in current and end in current:
        head, rest = current.split(start, 1)
        current = head + text + rest.split(end, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n" + text + "\n"
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(current, encoding="utf-8")
    os.replace(tmp, RESULTS)


def spread(values: list[float]) -> str:
    """mean ± standard deviation (population, over seeds), or the one value."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {statistics.pstdev(values):.2f}"


HOST_HELP = (
    "label for a host whose speed differs from the reference runs' (e.g. slower): its runs get their "
    "own rows in the mt-compare table and are paired only with runs of the same label"
)


def host_suffix(host: str | None) -> str:
    """What a run's record name gets for a labelled host (see HOST_HELP)."""
    return f"-{host}-host" if host else ""


def cpu_name() -> str:
    """The CPU model, for the results (platform.processor() is empty on most Linux systems)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def host_probe(seconds: float = 1.0) -> dict[str, float]:
    """One thread's float32 matrix-product GFLOP/s and copy GB/s, a few seconds before a run.

    Hosts with the same CPU name have trained both transduce and OpenNMT-py ~1.5x slower than
    others; runs record this to tell such hosts apart without a calibration run."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.randn(512, 512), torch.randn(512, 512)
        gflops = 2 * 512**3 * _repeat(lambda: a @ b, seconds) / 1e9
        x = torch.randn(16 * 2**20)  # 64 MiB: larger than the caches
        y = torch.empty_like(x)
        gbytes = 2 * x.numel() * x.element_size() * _repeat(lambda: y.copy_(x), seconds) / 1e9
    finally:
        torch.set_num_threads(threads)
    return {"matmul_gflops": round(gflops, 1), "copy_gb_s": round(gbytes, 1)}


def _repeat(work, seconds: float) -> float:
    """Calls of `work` per second over about `seconds`."""
    calls, began = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - began) < seconds:
        work()
        calls += 1
    return calls / elapsed
