"""Where `--quantize int8` pays on the torch engine: decoding speed by model width.

    python -m bench.decode.int8_width                     # small-fast, small, base, big; 1 thread
    python -m bench.decode.int8_width --presets base --threads 2

Per preset a random-init model (8,000 target tokens) decodes a batch of --batch sources of 30
tokens to --length output tokens (EOS blocked until then), greedy and beam 4, as: float32 with
weights pre-packed for oneDNN (the default of `transduce translate`), int8 as `--quantize int8`
makes it (linear maps of at least quantize.MIN_WEIGHTS weights in int8, the others packed
float32), and int8 on every linear map (`min_weights=0`, what `--quantize int8` did before).
Variants interleaved within each of --reps repetitions after a warm-up; medians. Speed only: the
weights are random, so output agreement says nothing of quality (bench/decode/quantize_cost.py
and bench/decode/e2e.py measure that on trained models). Results go to
bench/records/decode/int8-width-<date>.json (not with --no-write).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys

import torch

from bench.decode.speed import ours
from bench.records import host_line, write_record
from transduce.config import load_config
from transduce.cpu_memory import retain_freed_memory
from transduce.model import build_model
from transduce.model.packed import pack_for_cpu
from transduce.model.quantize import MIN_WEIGHTS, quantize_int8

VOCAB = 8000


def variants(preset: str) -> dict[str, torch.nn.Module]:
    """The preset's random-init model as float32 packed, int8 by size, and int8 throughout."""
    torch.manual_seed(0)
    model = build_model(load_config(preset, ["model.dropout=0"]).model, VOCAB, VOCAB).eval()
    return {
        "float32": pack_for_cpu(model),
        "int8": quantize_int8(model),
        "int8-all": quantize_int8(model, min_weights=0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presets", nargs="+", default=["small-fast", "small", "base", "big"])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=40, help="output tokens per sentence")
    parser.add_argument("--no-write", action="store_true", help="print, record nothing")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_memory()
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(4, VOCAB, (args.batch, 30), generator=generator).tolist()
    rows = []
    for preset in args.presets:
        models = variants(preset)
        d_model = load_config(preset).model.d_model
        for beam in (1, 4):
            times: dict[str, list[float]] = {name: [] for name in models}
            with torch.inference_mode():
                for model in models.values():
                    ours(model, src[:4], beam, args.length)
                for _ in range(args.reps):
                    for name, model in models.items():
                        times[name].append(ours(model, src, beam, args.length)["seconds"])
            base = statistics.median(times["float32"])
            for name, values in times.items():
                median = statistics.median(values)
                rows.append(
                    {
                        "preset": preset,
                        "d_model": d_model,
                        "search": "greedy" if beam == 1 else f"beam {beam}",
                        "weights": name,
                        "seconds": round(median, 3),
                        "tokens_per_s": round(args.batch * args.length / median),
                        "vs_float32": round(base / median, 2),
                    }
                )
                print(rows[-1], flush=True)
    if args.no_write:
        return
    write_record(
        "decode",
        "int8-width",
        title=f"--quantize int8 by model width (torch engine, CPU, {args.threads} thread(s))",
        command=shlex.join(["python", "-m", "bench.decode.int8_width", *sys.argv[1:]]),
        host=host_line(args.threads),
        setup=f"Random-init models, {VOCAB} target tokens, batch {args.batch} x 30 source tokens, "
        f"{args.length} output tokens (EOS blocked); int8: maps of >= {MIN_WEIGHTS} weights in int8, the "
        f"rest packed float32; int8-all: every linear map in int8; median of {args.reps}",
        rows=rows,
    )


if __name__ == "__main__":
    main()
