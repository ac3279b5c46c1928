"""Does compiling the decoding step close the CPU gap to CTranslate2? (issue 24)

    python bench/decode_compile.py CHECKPOINT [--lines 500] [--repeats 5]

Beam search (the checkpoint's decode settings) over the first --lines of the l10n test set on
one thread, timed --repeats times in one process, three ways: `eager` (what `transduce
translate` runs: oneDNN-packed linears), `plain` (the unpacked model) and `compiled`
(`torch.compile(model.decode, dynamic=True)` with inductor's weight freezing and C++ wrapper,
on the plain model: the packed oneDNN op has no compile support). Each way runs in its own
process; the first repeat includes compilation. Prints one line per repeat and the first output.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
WAYS = ("eager", "plain", "compiled")


def run_way(checkpoint: Path, way: str, lines: int, repeats: int) -> None:
    import torch._inductor.config as inductor

    from transduce.data.corpus import read_lines
    from transduce.decode.pipeline import translate_lines
    from transduce.store.load import load_for_decoding, load_model

    sources = read_lines(HERE / "out" / "l10n-de" / "test.en")[:lines]
    loaded = load_for_decoding(checkpoint, "none", 1)
    if way != "eager":
        loaded.model = load_model(checkpoint, torch.device("cpu")).model.eval()
    if way == "compiled":
        inductor.freezing = True
        inductor.cpp_wrapper = True
        loaded.model.decode = torch.compile(loaded.model.decode, dynamic=True)
    for repeat in range(repeats):
        began = time.perf_counter()
        with torch.no_grad():
            outputs, _ = translate_lines(loaded, sources, loaded.config.decode)
        print(f"{way} repeat {repeat}: {time.perf_counter() - began:.2f} s", flush=True)
    print(f"{way} first output: {outputs[0]}")


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)  # one way, in a child process
    args = parser.parse_args()
    if args.way:
        run_way(args.checkpoint, args.way, args.lines, args.repeats)
        return
    for way in WAYS:
        command = [sys.executable, __file__, str(args.checkpoint), "--lines", str(args.lines)]
        subprocess.run([*command, "--repeats", str(args.repeats), "--way", way], check=True)


if __name__ == "__main__":
    main()
