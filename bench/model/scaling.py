"""Encoder forward time and memory against sequence length: full vs local attention.

    python -m bench.model.scaling                       # base preset, lengths 64..4096, radius 64

Each (attention, length) point runs in its own process: build the encoder, one warm-up pass,
then the median of --reps timed passes (batch 1, fp32, --threads threads, no grad). Memory is
the process's peak RSS during the passes minus its RSS before them. Writes a PNG
(bench/records/scaling/scaling.png) and a record (bench/records/scaling/scaling-<date>.json).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.records import RECORDS, ROOT, host_line, write_record


def point(preset: str, length: int, radius: int | None, reps: int, threads: int) -> dict:
    """Runs inside the child process."""
    import torch

    from transduce.config import load_config
    from transduce.model import build_model

    torch.set_num_threads(threads)
    overrides = ["model.dropout=0"] + ([f"model.local_window={radius}"] if radius is not None else [])
    model = build_model(load_config(preset, overrides).model, 1000, 1000).eval()
    src = torch.randint(4, 1000, (1, length))
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand freed build-time memory back first
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS mark (Linux)
    before = _status_kb("VmRSS")
    with torch.no_grad():
        model.encode(src)
        extra = (_status_kb("VmHWM") - before) / 1024
        times = []
        for _ in range(reps):
            begin = time.perf_counter()
            model.encode(src)
            times.append(time.perf_counter() - begin)
    return {"seconds": statistics.median(times), "extra_mb": extra}


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for kind in ("full", "local"):
        pts = [r for r in rows if r["attention"] == kind]
        lengths = [r["length"] for r in pts]
        axes[0].plot(lengths, [r["seconds"] for r in pts], "o-", label=kind)
        axes[1].plot(lengths, [r["peak_mb"] for r in pts], "o-", label=kind)
    for ax, label in zip(axes, ("forward time (s)", "peak memory (MB)"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("encoder forward: full vs local attention (radius 64)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write_results(rows: list[dict], args: argparse.Namespace, command: str) -> None:
    by = {(r["attention"], r["length"]): r for r in rows}
    write_record(
        "scaling",
        "scaling",
        title="Encoder time and memory against length, full and local attention",
        command=command,
        host=host_line(args.threads),
        setup=(
            f"`{args.preset}` encoder, batch 1, fp32, median of {args.reps}; local attention of radius "
            f"{args.radius}; memory = peak RSS growth during one forward pass (MB). Plot: "
            "bench/records/scaling/scaling.png."
        ),
        rows=[
            {
                "length": n,
                "full_s": round(by[("full", n)]["seconds"], 3),
                "local_s": round(by[("local", n)]["seconds"], 3),
                "full_mb": round(by[("full", n)]["peak_mb"]),
                "local_mb": round(by[("local", n)]["peak_mb"]),
            }
            for n in args.lengths
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="base")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048, 4096])
    parser.add_argument("--radius", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        length, radius = json.loads(args.child)
        print(json.dumps(point(args.preset, length, radius, args.reps, args.threads)))
        return
    rows = []
    for n in args.lengths:
        for kind, radius in (("full", None), ("local", args.radius)):
            cmd = [
                sys.executable,
                "-m",
                "bench.model.scaling",
                "--preset",
                args.preset,
                "--reps",
                str(args.reps),
                "--threads",
                str(args.threads),
                "--child",
                json.dumps([n, radius]),
            ]
            child = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
            result = json.loads(child.stdout)
            rows.append(
                {"attention": kind, "length": n, "seconds": result["seconds"], "peak_mb": result["extra_mb"]}
            )
            print(rows[-1], flush=True)
    plot(rows, RECORDS / "scaling" / "scaling.png")
    command = (
        f"python -m bench.model.scaling --preset {args.preset} --lengths {' '.join(map(str, args.lengths))} "
        f"--radius {args.radius} --reps {args.reps} --threads {args.threads}"
    )
    write_results(rows, args, command)


if __name__ == "__main__":
    main()
