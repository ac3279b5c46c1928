"""Shared by the benchmarks: writing one section of bench/RESULTS.md (replaced in place on
every run), a mean ± spread cell, and the CPU's name."""

from __future__ import annotations

import os
import platform
import statistics
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


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
