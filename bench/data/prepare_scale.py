"""`transduce prepare` at scale (issue 50): peak memory and pairs/s for 1 and 2 worker processes,
against sentencepiece's own encoder run in a loop on the same cores (the floor: no checking, no
writing, nothing but encoding).

    python -m bench.data.prepare_scale                                 # 0.5M, 5M and 20M pairs
    python -m bench.data.prepare_scale --sizes 50000 --workers 1 2     # a quick check (~1 min)

Corpora are synthetic and deterministic (`synthetic_corpus`: Zipf-distributed pseudo-words, a
word-for-word "translation" into another pseudo-language, 1-13 words a line, about 50 bytes a
side like the l10n corpus), built once into bench/out/prepare-scale/. fairseq-preprocess, the
other reference, does not install (the fairseq 0.12.2 sdist fails to build its metadata on
Python 3.11 and has no wheel), so the floor is sentencepiece alone.

Each run is a child process; its peak memory is measured two ways: per process, the main one's
and the largest worker's (each its VmHWM, the kernel's high-water mark since it started; not
getrusage, whose maximum counts the parent's pages in a child started by vfork and exec), and
the sum over the process and its workers (sampled from /proc every 0.1 s). Wall times are what
the targets are about; CPU seconds (all processes) are recorded too, as they say more than wall
times on a machine that others share. Writes bench/records/data/prepare-scale-<date>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.records import OUT, ROOT, host_line, write_record

SCALE = OUT / "prepare-scale"
WORDS = 30_000
_CONSONANTS = [
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "z",
    "st",
    "sch",
    "tr",
]
_VOWELS = ["a", "e", "i", "o", "u", "ei", "au", "ie", "ä", "ö", "ü"]
_WIDTH = 32  # bytes a word (with its space) may take in the rendering table


def _pseudo_words(count: int, rng: np.random.Generator) -> list[str]:
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    words: dict[str, None] = {}
    while len(words) < count:
        parts = rng.integers(0, len(syllables), int(rng.integers(1, 5)))
        words.setdefault("".join(syllables[int(i)] for i in parts))
    return list(words)


def _table(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each word and a space as a row of bytes, and the row lengths."""
    encoded = [w.encode() + b" " for w in words]
    rows = np.zeros((len(encoded), _WIDTH), dtype=np.uint8)
    for i, e in enumerate(encoded):
        rows[i, : len(e)] = np.frombuffer(e, dtype=np.uint8)
    return rows, np.array([len(e) for e in encoded], dtype=np.int64)


def _render(tokens: np.ndarray, lengths: np.ndarray, table: tuple[np.ndarray, np.ndarray]) -> bytes:
    """Lines of `lengths` words (ids `tokens`, one after another), space-separated, without a
    Python loop over words: rows gathered, padding masked out, each line's last space a newline."""
    rows, sizes = table
    width = sizes[tokens]
    text = rows[tokens][np.arange(_WIDTH) < width[:, None]]
    text[np.cumsum(width)[np.cumsum(lengths) - 1] - 1] = ord("\n")
    return text.tobytes()


def synthetic_corpus(folder: Path, pairs: int, seed: int = 0, block: int = 200_000) -> None:
    """train/dev/test .en/.de files: `pairs` training pairs, 3000 dev and test pairs."""
    rng = np.random.default_rng(seed)
    src, tgt = _table(_pseudo_words(WORDS, rng)), _table(_pseudo_words(WORDS, rng))
    zipf = np.repeat(np.arange(WORDS), np.maximum(1, (2e6 / np.arange(1, WORDS + 1)).astype(np.int64)))
    translation = rng.permutation(WORDS)
    folder.mkdir(parents=True, exist_ok=True)
    for split, size in (("train", pairs), ("dev", 3000), ("test", 3000)):
        with open(folder / f"{split}.en", "wb") as en, open(folder / f"{split}.de", "wb") as de:
            for start in range(0, size, block):
                lengths = rng.integers(1, 14, min(block, size - start))
                words = zipf[rng.integers(0, len(zipf), int(lengths.sum()))]
                en.write(_render(words, lengths, src))
                de.write(_render(translation[words], lengths, tgt))


def corpus(pairs: int) -> Path:
    folder = SCALE / f"corpus-{pairs}"
    if not (folder / "test.de").exists():
        began = time.perf_counter()
        synthetic_corpus(folder.with_name(folder.name + ".tmp"), pairs)
        folder.with_name(folder.name + ".tmp").rename(folder)
        print(f"built {folder} in {time.perf_counter() - began:.0f} s", flush=True)
    return folder


CHILD_PREPARE = """
import json, resource, sys, time
from pathlib import Path
from transduce.data.prepare import PrepareOptions, prepare_text
corpus, out, workers, vocab = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
began = time.perf_counter()
report = prepare_text(corpus, out, PrepareOptions("en", "de", vocab_size=vocab), False, workers=workers)
wall = time.perf_counter() - began
pairs = report["splits"]["train"]["pairs"]
cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    for f in ("ru_utime", "ru_stime"))
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "phases_s": report["seconds"], "train_pairs": pairs,
    "max_rss_self_mb": hwm / 1024}))
"""

CHILD_FLOOR = """
import json, sys, time
import sentencepiece as spm
files, model, threads, batch = sys.argv[1:3], sys.argv[3], int(sys.argv[4]), 20000
sp = spm.SentencePieceProcessor(model_file=model)
read = encode = cpu = 0.0
lines = 0
for name in files:
    with open(name, encoding="utf-8") as f:
        while True:
            began = time.perf_counter()
            chunk = [line.rstrip("\\n") for _, line in zip(range(batch), f)]
            read += time.perf_counter() - began
            if not chunk:
                break
            began, used = time.perf_counter(), time.process_time()
            sp.encode(chunk, num_threads=threads)
            encode += time.perf_counter() - began
            cpu += time.process_time() - used
            lines += len(chunk)
print(json.dumps({"read_s": read, "encode_s": encode, "encode_cpu_s": cpu, "lines": lines}))
"""


def _tree_memory_mb(root: int) -> tuple[float, dict[int, float]]:
    """Resident memory of a process and all its descendants, from /proc, and each descendant's
    peak so far (VmHWM: its own since it started, unlike getrusage's, which counts the parent's
    pages in a child started by vfork and exec)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    family, grew = {root}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in family} - family
        family |= more
        grew = bool(more)
    total, peaks = 0.0, {}
    for pid in family:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
            status = dict(line.split(":", 1) for line in lines if ":" in line)
            total += int(status["VmRSS"].split()[0]) / 1024
            if pid != root:
                peaks[pid] = int(status["VmHWM"].split()[0]) / 1024
        except (OSError, KeyError, ValueError):
            continue
    return total, peaks


def run_child(code: str, *args: str) -> dict:
    """Run a Python child, sampling its process tree's memory; its last stdout line is JSON."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, env=env)
    peak, workers = 0.0, 0.0
    while child.poll() is None:
        total, peaks = _tree_memory_mb(child.pid)
        peak, workers = max(peak, total), max([workers, *peaks.values()])
        time.sleep(0.1)
    output = child.stdout.read() if child.stdout else ""
    if child.returncode != 0:
        raise SystemExit(f"child failed ({child.returncode}): {output[-2000:]}")
    result = json.loads(output.strip().splitlines()[-1])
    result["peak_rss_all_processes_mb"] = peak
    result["max_rss_workers_mb"] = workers
    return result


def arrays_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.npy")) + sorted(folder.glob("*.spm")):
        h.update(path.name.encode())
        with path.open("rb") as f:  # in blocks: this process's memory is what its children inherit
            while block := f.read(1 << 24):
                h.update(block)
    return h.hexdigest()


def measure(pairs: int, workers: int, vocab: int) -> dict:
    """One run of prepare on the corpus of `pairs` pairs with `workers` processes, and the floor
    on the same cores: a row of the record."""
    folder = corpus(pairs)
    out = SCALE / f"data-{pairs}-w{workers}"
    shutil.rmtree(out, ignore_errors=True)  # an up-to-date dataset would be a no-op
    run = run_child(CHILD_PREPARE, str(folder), str(out), str(workers), str(vocab))
    floor = run_child(
        CHILD_FLOOR, str(folder / "train.en"), str(folder / "train.de"), str(out / "src.spm"), str(workers)
    )
    phases, kept = run["phases_s"], run["train_pairs"]
    floor_rate = pairs / floor["encode_s"]
    row = {
        "pairs": pairs,
        "workers": workers,
        "corpus_mb": round(sum(f.stat().st_size for f in folder.iterdir()) / 2**20, 1),
        "train_pairs": kept,
        "wall_s": round(run["wall_s"], 2),
        "cpu_s": round(run["cpu_s"], 2),
        **{f"{phase}_s": round(t, 2) for phase, t in phases.items()},
        "pairs_per_s": round(kept / run["wall_s"]),
        "encoding_pairs_per_s": round(kept / phases["encoding"]),
        "peak_mb_all_processes": round(run["peak_rss_all_processes_mb"]),
        "peak_mb_main_process": round(run["max_rss_self_mb"]),
        "peak_mb_largest_worker": round(run["max_rss_workers_mb"]) if workers > 1 else None,
        "floor_pairs_per_s": round(floor_rate),
        "floor_cpu_s": round(floor["encode_cpu_s"], 2),
        "encoding_vs_floor": round(kept / phases["encoding"] / floor_rate, 3),
        "digest": arrays_digest(out),
    }
    print(json.dumps(row), flush=True)
    return row


def compared(rows: list[dict]) -> list[dict]:
    """Per corpus size: whether 1 and 2 workers wrote the same dataset, and the speed-up."""
    out = []
    for pairs in dict.fromkeys(r["pairs"] for r in rows):
        runs = {r["workers"]: r for r in rows if r["pairs"] == pairs}
        if 1 in runs and 2 in runs:
            one, two = runs[1], runs[2]
            out.append(
                {
                    "pairs": pairs,
                    "same_output": one["digest"] == two["digest"],
                    "speedup_2_workers": round(one["wall_s"] / two["wall_s"], 2),
                    "speedup_2_workers_encoding": round(one["encoding_s"] / two["encoding_s"], 2),
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[500_000, 5_000_000, 20_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--vocab-size", type=int, default=8000)
    args = parser.parse_args()
    load = os.getloadavg()
    rows = [measure(n, k, args.vocab_size) for n in args.sizes for k in args.workers]
    write_record(
        "data",
        "prepare-scale",
        title="prepare at scale",
        command=f"python -m bench.data.prepare_scale --sizes {' '.join(map(str, args.sizes))} "
        f"--workers {' '.join(map(str, args.workers))} --vocab-size {args.vocab_size}",
        host=f"{host_line()}, load average {load[0]:.1f} at the start",
        setup=f"transduce prepare (--vocab-size {args.vocab_size}) on synthetic corpora, each run a "
        "child process; peak memory summed over its processes (sampled), of the main process and "
        "of the largest worker (each its own VmHWM from /proc); the floor "
        "is sentencepiece's encoder alone over the same training files.",
        rows=rows,
        compared=compared(rows),
    )


if __name__ == "__main__":
    main()
