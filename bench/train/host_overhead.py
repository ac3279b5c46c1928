"""What the trainer adds per step on the host (issue 86): `Trainer.fit` against a bare loop of the
same optimizer step on the same batch stream, on a model so small that the host's work dominates.
On a GPU the host's time per step is what starves the device; this measures it on the CPU, where it
can be rerun whenever the training loop changes.

    python -m bench.train.host_overhead                  # 3 interleaved rounds, 1 thread
    python -m bench.train.host_overhead --rounds 1 --steps 50 250    # a quick look

The model: 1+1 layers of width 32, 2 heads, d_ff 64, on the generated `copy` task (lengths up to
8, batches of 256 tokens), prepared once into a temporary folder. Each side runs twice, for the
two step counts of --steps, in fresh run directories; the time per step is the difference of the
two runs' seconds over the difference of their steps, so start-up, the final validation and the
final checkpoint (the same for both counts) cancel; one untimed run of each side comes first.
The trainer: `Trainer.fit` with logging every --log-every steps and validation and checkpoints
past the run's end. The bare loop: the same Trainer's `OptimizerStep` over its own
`batch_stream()`, nothing else. Writes bench/records/train/host-overhead-<date>.json: both
sides' microseconds per step and steps/s, and their difference, the host time the trainer adds
per step.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from bench.records import host_line, write_record
from transduce.config import load_config
from transduce.data.dataset import prepare_task
from transduce.train.build import Distributed
from transduce.train.trainer import Trainer

MODEL = [
    *("model.d_model=32", "model.heads=2", "model.d_ff=64"),
    *("model.encoder_layers=1", "model.decoder_layers=1", "model.dropout=0.0"),
]


def settings(dataset: Path, steps: int, log_every: int) -> list[str]:
    return [
        *MODEL,
        f"data.dataset={dataset}",
        "data.max_tokens=256",
        f"train.steps={steps}",
        f"train.log_every={log_every}",
        f"train.validate_every={10 * steps}",
        f"train.save_every={10 * steps}",
        "train.keep_last=1",
    ]


def prepared(folder: Path) -> Path:
    """The `copy` task's dataset, short sequences, few dev examples (the final validation is short)."""
    cfg = load_config("small", ["data.task=copy", "data.task_train_max_len=8", "data.task_eval_size=16"])
    prepare_task(cfg.data, folder)
    return folder


def trainer_seconds(dataset: Path, steps: int, log_every: int) -> float:
    """Wall seconds of `Trainer.fit` for `steps` updates, start-up included."""
    cfg = load_config("small", settings(dataset, steps, log_every))
    began = time.perf_counter()
    Trainer(cfg, Path(tempfile.mkdtemp()) / "run", Distributed(), show_progress=False).fit()
    return time.perf_counter() - began


def bare_seconds(dataset: Path, steps: int, log_every: int) -> float:
    """Wall seconds of the same Trainer's optimizer step on its batch stream, `steps` times, the
    Trainer's construction included (as in `trainer_seconds`, so that it cancels)."""
    cfg = load_config("small", settings(dataset, steps, log_every))
    began = time.perf_counter()
    trainer = Trainer(cfg, Path(tempfile.mkdtemp()) / "run", Distributed(), show_progress=False)
    step = trainer.optimizer_step
    step.start(0, 0, 0)
    with trainer.batch_stream() as stream:
        for _ in range(steps):
            step(next(stream).batches)
    return time.perf_counter() - began


def per_step_us(run, dataset: Path, counts: tuple[int, int], log_every: int) -> float:
    """Microseconds a step: the difference of two runs over the difference of their steps."""
    short, long = (run(dataset, n, log_every) for n in counts)
    return 1e6 * (long - short) / (counts[1] - counts[0])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, nargs=2, default=[200, 1200], help="the two step counts")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians)")
    parser.add_argument("--log-every", type=int, default=50, help="the trainer's train.log_every")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    counts = tuple(args.steps)
    dataset = prepared(Path(tempfile.mkdtemp()) / "copy")
    sides = {"trainer": trainer_seconds, "bare loop": bare_seconds}
    for run in sides.values():  # untimed: imports, the first allocations
        run(dataset, counts[0], args.log_every)
    measured: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, run in sides.items():
            measured[name].append(per_step_us(run, dataset, counts, args.log_every))
            print(f"{name}: {measured[name][-1]:.0f} µs a step", flush=True)
    median = {name: statistics.median(values) for name, values in measured.items()}
    rows = [
        {
            "loop": name,
            "µs a step": round(median[name]),
            "steps/s": round(1e6 / median[name]),
            "rounds (µs)": " ".join(f"{v:.0f}" for v in measured[name]),
        }
        for name in sides
    ]
    added = median["trainer"] - median["bare loop"]
    write_record(
        "train",
        "host-overhead",
        title="What the trainer adds per step on the host, against a bare loop of the same step",
        command=f"python -m bench.train.host_overhead --steps {counts[0]} {counts[1]} --rounds {args.rounds} "
        f"--log-every {args.log_every} --threads {args.threads}",
        host=host_line(args.threads),
        setup="A 1+1-layer model of width 32 on the copy task (256-token batches), where the host's "
        "work dominates a step. Each side's time per step is the difference of a run of "
        f"{counts[1]} and one of {counts[0]} steps over {counts[1] - counts[0]} (start-up, the final "
        "validation and checkpoint cancel); medians over interleaved rounds. The trainer: Trainer.fit "
        f"(logging every {args.log_every} steps); the bare loop: the same OptimizerStep on the same "
        "batch_stream.",
        rows=rows,
        added_us_per_step=round(added),
        added_share=round(added / median["trainer"], 3),
    )


if __name__ == "__main__":
    main()
