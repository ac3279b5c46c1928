"""Several grid cells at once: each cell a process of its own (`python -m bench.algorithmic.grid ...
--cell TASK:MODEL:POSITIONS:SEED`), N of them at a time: on the CPU each with its own threads, on
one GPU all sharing it (tiny models leave a GPU mostly idle). Each cell writes its record as it
finishes, so a deadline or a crash loses only the cells under way (their checkpoints resume).

`--jobs-probe 1,2,4,8` measures the N that maximises cells per minute on this machine: for each N,
one wave of N short cells (the UT on copy, --probe-steps updates, the grid's sizes) in a scratch
folder, and cells per minute = N / the wave's wall minutes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

GRID = [sys.executable, "-m", "bench.algorithmic.grid"]
POOL_OPTIONS = {"--jobs": 1, "--jobs-probe": 1, "--cell": 1, "--minutes": 1}  # options a cell does not get


def cell_argv(argv: Sequence[str]) -> list[str]:
    """The grid's arguments without the ones that drive the pool (a cell runs one cell)."""
    out, skip = [], 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in POOL_OPTIONS:
            skip = 0 if "=" in arg else POOL_OPTIONS[name]
            continue
        out.append(arg)
    return out


def cell_env(device: str, threads: int) -> dict[str, str]:
    """A cell's environment: its thread count, and no GPU in sight when it must run on the CPU."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


@dataclass
class Finished:
    name: str
    status: int  # the cell's exit status; -2 when the deadline interrupted it
    minutes: float


class Pool:
    """Runs cell commands `jobs` at a time; after `deadline` (monotonic seconds), or on Ctrl-C, it
    starts no new cell and interrupts the running ones (SIGINT: the trainer saves a checkpoint on
    its way out)."""

    def __init__(self, jobs: int, env: dict[str, str], logs: Path, deadline: float | None = None) -> None:
        self.jobs, self.env, self.logs, self.deadline = jobs, env, logs, deadline
        self.running: set[subprocess.Popen] = set()
        logs.mkdir(parents=True, exist_ok=True)

    def run(self, cells: list[tuple[str, list[str]]]) -> list[Finished]:
        """Every cell's outcome; a KeyboardInterrupt passes on once the running cells have stopped."""
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            futures = [pool.submit(self._one, *cell) for cell in cells]
            try:
                return [future.result() for future in futures]
            except KeyboardInterrupt:
                self.deadline = time.monotonic()
                for proc in list(self.running):
                    proc.send_signal(signal.SIGINT)
                raise

    def _one(self, name: str, command: list[str]) -> Finished:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return Finished(name, -2, 0.0)
        began = time.monotonic()
        with open(self.logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env)
            self.running.add(proc)
            status = self._wait(proc)
            self.running.discard(proc)
        done = Finished(name, status, (time.monotonic() - began) / 60)
        print(
            f"cell {name}: exit {status} after {done.minutes:.1f} min (log {self.logs / name}.log)",
            flush=True,
        )
        return done

    def _wait(self, proc: subprocess.Popen) -> int:
        while True:
            left = None if self.deadline is None else self.deadline - time.monotonic()
            try:
                return proc.wait(timeout=None if left is None else max(left, 0.1))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
                proc.wait()
                return -2


def probe(argv: Sequence[str], counts: list[int], steps: int, env: dict[str, str], root: Path) -> list[dict]:
    """Cells per minute at each N of `counts`: a wave of N UT-on-copy cells of `steps` updates."""
    rows = []
    for jobs in counts:
        scratch = Path(tempfile.mkdtemp(prefix=f"probe{jobs}-", dir=root))
        base = [*GRID, *cell_argv(argv), "--steps", str(steps), "--eval-size", "10", "--lengths"]
        base += ["--records", str(scratch / "records"), "--out", str(scratch / "out")]
        cells = [(f"probe{jobs}-{k}", [*base, "--cell", f"copy:ut:none:{k}"]) for k in range(1, jobs + 1)]
        began = time.monotonic()
        finished = Pool(jobs, env, scratch / "logs").run(cells)
        minutes = (time.monotonic() - began) / 60
        failed = [f.name for f in finished if f.status != 0]
        if failed:
            print(
                f"error: probe cells failed: {', '.join(failed)} (logs in {scratch / 'logs'})",
                file=sys.stderr,
            )
            sys.exit(2)
        rows.append({"jobs": jobs, "cells": jobs, "wall_minutes": round(minutes, 3)})
        rows[-1]["cells_per_minute"] = round(jobs / minutes, 2)
        print(f"jobs {jobs}: {rows[-1]['cells_per_minute']} cells/min", flush=True)
        shutil.rmtree(scratch)
    return rows
