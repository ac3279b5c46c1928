"""Where the real trainer's steps spend their time: `transduce train`'s own optimizer step (the
OptimizerStep a Trainer builds from the config, on the GPU when there is one) on the trainer's own
batch stream (the sampler's order, built ahead on a thread and copied on a side stream, as in
training): the host's wall time per step against the device's busy time per step (the sum of its
kernels' times).

    python3 -m bench.gpu.trainer_profile --dataset /tmp/l10n/l10n-de-data -- train.master_weights=true
    python3 -m bench.gpu.trainer_profile --preset small --dataset DIR -- data.max_tokens=512  # a smoke run

bench.gpu.step_profile profiles the benchmark's step on one random batch shape; the trainer's
batches come in many shapes, and a step that waits for the host (launches, a plan built for a new
shape) shows here as wall time the device was idle. After --warmup steps, --steps steps are timed,
then as many profiled: wall and busy milliseconds per step, how many of the timed steps had a batch
shape not seen before, and the kernels (and host operations) by time. With --out DIR the figures
go to DIR/trainer-profile-<name>.json and the tables to DIR/trainer-profile-<name>.txt.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from torch.profiler import profile

from bench.gpu.step_profile import activities, device_and_host_tables, device_busy_us
from bench.gpu.throughput import sync
from transduce.config import load_config
from transduce.device import attention_kernels
from transduce.train.batches import BatchStream
from transduce.train.build import Distributed
from transduce.train.trainer import Trainer


def measure(args: argparse.Namespace) -> tuple[dict, str]:
    cfg = load_config(args.preset, [f"data.dataset={args.dataset}", *args.overrides])
    trainer = Trainer(cfg, Path(tempfile.mkdtemp()) / "run", Distributed(), show_progress=False)
    step, device = trainer.optimizer_step, trainer.device
    step.start(0, 0, 0)
    seen: set[tuple[int, ...]] = set()

    def run(stream: BatchStream, count: int) -> int:
        """`count` updates; how many batches had a shape not seen before."""
        new = 0
        for _ in range(count):
            prepared = next(stream)
            for batch in prepared.batches:
                shape = (*batch.src.shape, batch.tgt_in.shape[1])
                new += shape not in seen
                seen.add(shape)
            step(prepared.batches)
        return new

    with attention_kernels(device, cfg.train.attention_kernel), trainer.batch_stream() as stream:
        run(stream, args.warmup)
        sync(device)
        began = time.perf_counter()
        new = run(stream, args.steps)
        sync(device)
        wall = (time.perf_counter() - began) / args.steps
        with profile(activities=activities(device)) as prof:
            profiled_new = run(stream, args.steps)
            sync(device)
    events = prof.key_averages()
    busy = device_busy_us(events) / 1e3 / args.steps
    host = sum(e.self_cpu_time_total for e in events) / 1e3 / args.steps
    figures = {
        "overrides": " ".join(args.overrides),
        "attention_kernel": cfg.train.attention_kernel,
        "wall_ms_per_step": 1e3 * wall,
        "device_busy_ms_per_step": busy,
        "host_op_ms_per_step": host,  # under the profiler, which adds to it
        "steps": args.steps,
        "new_shapes_timed": new,
        "new_shapes_profiled": profiled_new,
        "shapes_seen": len(seen),
    }
    return figures, device_and_host_tables(events, device, args.rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="base")
    parser.add_argument("--dataset", type=Path, required=True, help="a prepared dataset (transduce prepare)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=20, help="timed steps, then as many profiled")
    parser.add_argument("--rows", type=int, default=25, help="rows of each table")
    parser.add_argument("--name", default="trainer", help="the output files' name")
    parser.add_argument("--out", type=Path, help="also write the figures and tables into this folder")
    parser.add_argument("overrides", nargs="*", help="config overrides after --, as `transduce train` takes")
    args = parser.parse_args()
    figures, tables = measure(args)
    print(tables)
    print(json.dumps(figures, indent=1))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"trainer-profile-{args.name}.json").write_text(json.dumps(figures, indent=1))
        (args.out / f"trainer-profile-{args.name}.txt").write_text(tables + "\n")


if __name__ == "__main__":
    main()
