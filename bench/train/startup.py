"""Training start-up on large prepared datasets (issue 50): time to the end of a one-step `train`
and peak memory, with the stages that depend on the dataset's size timed on their own.

    python -m bench.train.startup                       # the issue's sizes, 5M and 50M (~11 GB of arrays)
    python -m bench.train.startup --sizes 100000        # a quick check

Datasets are synthetic and written straight as arrays, without text or `prepare` (lengths 3..49
pieces, ids uniform over an 8000-symbol vocabulary), chunk by chunk as `prepare` writes them;
built once into bench/out/train-startup/data-<pairs>/ (delete it to rebuild).

Two child processes per size: `stages` loads the dataset as `train` does and times, with the
resident memory after each (anonymous, and file-backed: pages of the memory-mapped arrays),
`Dataset()` (maps the arrays, checks ids and offsets), the padded lengths, and the sampler's
first epoch of batches (the trainer's own index structures); `fit` runs `Trainer.fit()` for one
step of a tiny model, its start-up being the time and peak memory until it draws its first
batch. Batches hold 4096 tokens (the `small` preset's). Writes
bench/records/train/train-startup-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.records import OUT, ROOT, host_line, write_record

STARTUP = OUT / "train-startup"
VOCAB = 8000
BLOCK = 1_000_000


def synthetic_dataset(folder: Path, pairs: int, seed: int = 0) -> None:
    """A text dataset of `pairs` training pairs and 16 dev pairs (so that the validation after
    the one step is short), written in blocks."""
    from transduce.data.dataset import Split, finish_dataset
    from transduce.data.vocab import SymbolVocab

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    sizes = {}
    for name, size in (("train", pairs), ("dev", 16)):
        for start in range(0, size, BLOCK):
            n = min(BLOCK, size - start)
            sides = []
            for _ in range(2):
                lengths = rng.integers(3, 50, n)
                offsets = np.zeros(n + 1, dtype=np.int64)
                np.cumsum(lengths, out=offsets[1:])
                sides += [rng.integers(4, VOCAB, int(offsets[-1]), dtype=np.int32), offsets]
            block = Split(*sides)
            (block.append_to if start else block.save)(folder, name)
        sizes[name] = size
    vocab = SymbolVocab([f"w{i}" for i in range(VOCAB - 4)])
    finish_dataset(folder, sizes, vocab, None, {"hash": f"synthetic-{pairs}-{seed}", "data_kind": "text"})


def dataset(pairs: int) -> Path:
    folder = STARTUP / f"data-{pairs}"
    if not (folder / "meta.json").exists():
        began = time.perf_counter()
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        synthetic_dataset(tmp, pairs)
        tmp.rename(folder)
        print(f"built {folder} in {time.perf_counter() - began:.0f} s", flush=True)
    return folder


MODEL = [
    "model.d_model=64",
    "model.heads=4",
    "model.d_ff=128",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "data.task=null",
    "data.max_tokens=4096",
    "train.steps=1",
    "train.validate_every=1000000",
    "train.save_every=1000000",
    "train.threads=1",
]

CHILD_STAGES = """
import json, resource, sys, time
from pathlib import Path
from transduce.data.batching import BatchSampler, padded_lengths
from transduce.data.dataset import Dataset

def memory():
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            fields[key] = int(value.split()[0]) / 1024
    return fields

out, clock = {"before": memory()}, time.perf_counter()
def stage(name):
    global clock
    now = time.perf_counter()
    out[name] = {"seconds": now - clock, **memory()}
    clock = time.perf_counter()

data = Dataset(Path(sys.argv[1]))
stage("dataset")
lengths = padded_lengths(data.splits["train"])
stage("lengths")
batches = BatchSampler(lengths, 4096, seed=1).epoch_batches(0)
stage("first_epoch_batches")
out["batches"] = len(batches)
out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""

CHILD_FIT = """
import json, resource, sys, time
from pathlib import Path
from transduce.config import load_config
from transduce.data import batching
from transduce.train.trainer import Trainer
began, first = time.perf_counter(), {}
endless = batching.BatchSampler.__iter__

def timed(self):  # start-up ends when the first batch is drawn
    for batch in endless(self):
        first.setdefault("startup_s", time.perf_counter() - began)
        first.setdefault("startup_max_rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        yield batch

batching.BatchSampler.__iter__ = timed
cfg = load_config("small", [*json.loads(sys.argv[3]), f"data.dataset={sys.argv[1]}"])
Trainer(cfg, Path(sys.argv[2]), show_progress=False).fit()
print(json.dumps({**first, "seconds": time.perf_counter() - began,
    "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(code: str, *args: str) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"child failed ({done.returncode}): {done.stderr[-3000:]}")
    return {"wall_s": time.perf_counter() - began, **json.loads(done.stdout.strip().splitlines()[-1])}


def measure(pairs: int) -> dict:
    """The stages and the one-step run on the dataset of `pairs` pairs: a row of the record."""
    folder = dataset(pairs)
    run = STARTUP / f"run-{pairs}"
    shutil.rmtree(run, ignore_errors=True)
    stages = child(CHILD_STAGES, str(folder))
    fit = child(CHILD_FIT, str(folder), str(run), json.dumps(MODEL))
    row = {
        "pairs": pairs,
        "arrays_gb": round(sum(p.stat().st_size for p in folder.glob("*.npy")) / 2**30, 2),
        "batches": stages["batches"],
        **{
            f"{stage}_{key}": round(stages[stage][field], 2)
            for stage in ("dataset", "lengths", "first_epoch_batches")
            for key, field in (("s", "seconds"), ("anon_mb", "RssAnon"), ("file_mb", "RssFile"))
        },
        "stages_max_rss_mb": round(stages["max_rss_mb"]),
        "startup_s": round(fit["startup_s"], 2),
        "startup_max_rss_mb": round(fit["startup_max_rss_mb"]),
        "fit_one_step_s": round(fit["seconds"], 2),
        "fit_max_rss_mb": round(fit["max_rss_mb"]),
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000_000, 50_000_000])
    args = parser.parse_args()
    load = os.getloadavg()
    write_record(
        "train",
        "train-startup",
        title="Training start-up on large datasets",
        command=f"python -m bench.train.startup --sizes {' '.join(map(str, args.sizes))}",
        host=f"{host_line()}, load average {load[0]:.1f} at the start",
        setup="Synthetic datasets (lengths 3..49, ids uniform over 8000), memory-mapped; stages timed "
        "in one child (Dataset(), padded lengths, the first epoch's batches of 4096 tokens), "
        "Trainer.fit() for one step of a tiny model in another, start-up ending at its first batch.",
        rows=[measure(n) for n in args.sizes],
        model=MODEL,
    )


if __name__ == "__main__":
    main()
