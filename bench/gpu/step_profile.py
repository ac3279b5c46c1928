"""Where a training step's GPU time goes: torch.profiler over a few steps of bench/gpu/throughput.py's
training step (random batch, label smoothing 0.1, fused Adam), the kernels sorted by CUDA time.

    python3 -m bench.gpu.step_profile --preset base --precision bf16-master --tokens 24576 --vocab 8000
    python3 -m bench.gpu.step_profile --device cpu --preset small --tokens 256   # a smoke run here

With --out DIR the table also goes to DIR/profile-<preset>-<precision>.txt (the session's stage).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList
from torch.profiler import ProfilerActivity, profile

from bench.gpu.throughput import DTYPES, MASTER, add_kernel_option, preset_step, sync
from transduce.device import attention_kernels


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="base")
    parser.add_argument("--precision", default="bf16", choices=[*DTYPES, MASTER])
    parser.add_argument("--tokens", type=int, default=24576, help="target tokens per batch")
    parser.add_argument("--length", type=int, default=32, help="target (and source) tokens per sentence")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--steps", type=int, default=3, help="profiled steps (after as many warm-up steps)")
    parser.add_argument("--rows", type=int, default=30, help="table rows")
    parser.add_argument("--device", type=torch.device, default="cuda", help="cpu: a smoke run of this script")
    parser.add_argument("--out", type=Path, help="also write the table into this folder")
    add_kernel_option(parser)
    args = parser.parse_args()
    if args.device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: bench.gpu.step_profile needs a CUDA device (or --device cpu, a smoke run)")
    with attention_kernels(args.device, args.attention_kernel):
        table = profiled(args)
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"profile-{args.preset}-{args.precision}.txt").write_text(table + "\n")


def activities(device: torch.device) -> list[ProfilerActivity]:
    """What torch.profiler records: the host's operations, and on CUDA the device's kernels."""
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])


def device_busy_us(events: EventList) -> float:
    """The device's busy time in microseconds: its kernels' and copies' own times added up, as the
    profiler's table totals them. The host operations that launched them carry the same time
    again (an H200 session counted it twice, and decoding came out busier than its wall time)."""
    return sum(
        e.self_device_time_total
        for e in events
        if e.device_type != DeviceType.CPU and not getattr(e, "is_user_annotation", False)
    )


def device_and_host_tables(events: EventList, device: torch.device, rows: int) -> str:
    """Two tables: operations by their own device time (host time on the CPU), then by host time."""
    first = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return "\n\n".join(
        events.table(sort_by=key, row_limit=rows, max_name_column_width=60)
        for key in (first, "self_cpu_time_total")
    )


def profiled(args: argparse.Namespace) -> str:
    """The kernels of --steps training steps after as many warm-up steps, by CUDA time."""
    step, _ = preset_step(args.preset, args.precision, args.tokens, False, args)
    for _ in range(args.steps):
        step()
    sync(args.device)
    with profile(activities=activities(args.device)) as prof:
        for _ in range(args.steps):
            step()
        sync(args.device)
    key = "cuda_time_total" if args.device.type == "cuda" else "cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=args.rows, max_name_column_width=60)


if __name__ == "__main__":
    main()
