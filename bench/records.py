"""Shared by the benchmarks: where things go, writing a record of a measurement, a mean ± spread
cell, the host's name and a quick measure of its speed.

A record is one JSON file under bench/records/<topic>/, committed: `write_record` names it
<claim>-<date>.json, so a rerun on another day adds a record and the results page
(`python -m bench.results`) shows the newest one of each claim."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent  # the repository: configs/, docs/
OUT = BENCH / "out"  # what the benchmarks build and train (ignored by git)
RECORDS = BENCH / "records"  # what they measured (committed)


def write_record(
    topic: str,
    claim: str,
    *,
    title: str,
    command: str,
    host: str,
    setup: str,
    rows: list[dict[str, Any]],
    **more: Any,
) -> Path:
    """Write one measurement to bench/records/<topic>/<claim>-<YYYY-MM-DD>.json, atomically (a
    rerun the same day replaces it), and print its main table. `command` reproduces it from the
    repository root, `host` names the machine, `setup` says what was measured; `rows` are the
    main table (one dict per row), `more` any further tables or values."""
    date = time.strftime("%Y-%m-%d")
    record = {"claim": claim, "title": title, "date": date, "command": command, "host": host}
    record |= {"setup": setup, "rows": rows, **more}
    folder = RECORDS / topic
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{claim}-{date}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    print("\n".join([f"{title} ({date})", f"Command: {command}", f"Host: {host}", "", *markdown_table(rows)]))
    print(f"\nrecorded in {path.relative_to(ROOT)}; `python -m bench.results` updates docs/results.md")
    return path


Format = Callable[[Any], str]


def cell(value: Any) -> str:
    """A table cell: numbers as recorded (they are rounded when written), None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def markdown_table(
    rows: list[dict[str, Any]],
    columns: dict[str, str] | None = None,
    formats: dict[str, Format] | None = None,
) -> list[str]:
    """A markdown table of `rows`: `columns` maps a row key to its heading (default: every key of
    the first row, as it is); `formats` gives a key its own cell format."""
    columns = columns or {key: key for key in rows[0]}
    formats = formats or {}
    lines = ["| " + " | ".join(columns.values()) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = (formats.get(key, cell)(row.get(key)) for key in columns)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def host_line(threads: int | None = None) -> str:
    """The host as records name it: the CPU, its cores, the threads used, torch and Python."""
    import torch

    used = f", {threads} thread(s)" if threads is not None else ""
    return (
        f"{cpu_name()}, {os.cpu_count()} CPUs{used}, torch {torch.__version__}, "
        f"Python {platform.python_version()}"
    )


def spread(values: list[float]) -> str:
    """mean ± standard deviation (population, over seeds), or the one value."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {statistics.pstdev(values):.2f}"


def mean_pair(runs: list[dict], first: str = "char", second: str = "seq") -> str:
    """ "mean first / mean second" over runs (character / sequence accuracy over seeds), or "-"
    where there are none or a run lacks them (recorded before they were measured)."""
    if not runs or not all(first in r and second in r for r in runs):
        return "-"
    return f"{statistics.fmean(r[first] for r in runs):.2f} / {statistics.fmean(r[second] for r in runs):.2f}"


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
    import torch

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


def _repeat(work: Callable[[], object], seconds: float) -> float:
    """Calls of `work` per second over about `seconds`."""
    calls, began = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - began) < seconds:
        work()
        calls += 1
    return calls / elapsed
