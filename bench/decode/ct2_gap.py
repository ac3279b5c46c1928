"""Where `--engine ctranslate2` spends time that raw CTranslate2 does not: one process, interleaved.

    python -m bench.decode.ct2_gap --checkpoint bench/out/e2e/small-fast-4300 \\
        --test bench/out/l10n-de/test.en --beam 4 --longest 500

bench/decode/e2e.py times each engine in a process of its own, where the 2-core host's drift between
processes is as large as the gap it looks for (5%). This puts our engine (`translate_lines` on the
checkpoint's cached export, one-best text, no scores: as `transduce translate --engine ctranslate2`
runs) and raw CTranslate2 (bench/peers/engines.py's `translate_ct2`: sentencepiece,
`translate_batch` per length-sorted batch under its longest source's limit) on the same Translator
files, the same threads and the same lines, alternating within each of --reps rounds after a warm-up.
On one thread the two Translators do not slow each other (on two they do: use e2e.py there).

It prints the medians, their ratio, the share of lines whose text is the same (ours limits each
sentence's output to a * |x| + b, raw each batch's), and from one profiled run of ours the seconds
in the batches' first calls and in the calls that search again the sentences that reached their own
length limit (bench/decode/e2e.py's docstring and `ctranslate2_engine`'s say why). --per-line
translates each line in a call of its own, as a server's one-line requests are: what a call
costs beyond its search.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import ctranslate2
import sentencepiece

from bench.decode.e2e import ENGINE_ROW, WARMUP_LINES
from bench.peers.engines import translate_ct2
from bench.records import host_line
from transduce.data.corpus import read_lines
from transduce.decode.ctranslate2_engine import open_ctranslate2
from transduce.decode.options import decode_options
from transduce.decode.pipeline import output_rows, translate_lines
from transduce.interop.ctranslate2 import tokenizers

SEARCH_PARTS = {
    "_under_longest_limit": "first calls",
    "_under_own_limits": "searched again",
    "_translate": "translate_batch in all",
}


def profiled_parts(run: Callable[[], object]) -> dict[str, tuple[int, float]]:
    """Calls and cumulative seconds of the engine's two search steps, and of all its
    translate_batch calls, in one profiled run."""
    profile = cProfile.Profile()
    profile.runcall(run)
    found: dict[str, tuple[int, float]] = {}
    for (_, _, name), (_, calls, _, cumulative, _) in pstats.Stats(profile).stats.items():
        if name in SEARCH_PARTS:
            found[SEARCH_PARTS[name]] = (calls, cumulative)
    return found


def each_line(run: Callable[[list[str]], list[str]], lines: list[str]) -> Callable[..., list[str]]:
    """`run` on each line alone, as a server's one-line requests: what a call costs beyond its search."""
    return lambda part=lines: [run([line])[0] for line in part]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--checkpoint", type=Path, required=True, help="transduce checkpoint or run directory"
    )
    parser.add_argument("--test", type=Path, required=True, help="raw source lines")
    parser.add_argument("--beam", type=int, default=4, help="beam size (1: greedy search)")
    parser.add_argument("--alpha", type=float, default=0.6, help="length penalty, both engines")
    parser.add_argument("--longest", type=int, help="only the N longest lines (by characters)")
    parser.add_argument("--quantize", choices=("none", "int8"), default="none", help="weights")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of each Translator")
    parser.add_argument("--max-tokens", type=int, default=4096, help="padded source tokens a batch")
    parser.add_argument("--reps", type=int, default=5, help="interleaved rounds (medians)")
    parser.add_argument("--first", type=int, help="only the first N lines")
    parser.add_argument(
        "--per-line",
        action="store_true",
        help="each line in a call of its own, as a server's one-line requests",
    )
    args = parser.parse_args()

    lines = [line for line in read_lines(args.test) if line.strip()][: args.first]
    if args.longest:
        lines = sorted(lines, key=len, reverse=True)[: args.longest]
    ours = open_ctranslate2(args.checkpoint, args.quantize, args.threads, "cpu")
    folder = ours.engine.translator.folder
    settings = ours.engine.translator.settings
    raw = ctranslate2.Translator(str(folder), **settings)
    source = sentencepiece.SentencePieceProcessor(model_file=str(tokenizers(folder)[0]))
    target = sentencepiece.SentencePieceProcessor(model_file=str(tokenizers(folder)[1]))
    decode = ours.config.decode
    search = {"greedy": True} if args.beam == 1 else {"beam": args.beam, "alpha": args.alpha}
    options = decode_options(decode, max_tokens=args.max_tokens, **search)
    request = {
        "beam": args.beam,
        "alpha": args.alpha,
        "max_tokens": args.max_tokens,
        "max_len_a": decode.max_len_a,
        "max_len_b": decode.max_len_b,
        "engine": "ct2",
    }

    def run_ours(part: list[str] = lines) -> list[str]:
        outputs, _ = translate_lines(ours, part, options, scores=False)
        return output_rows(outputs)

    def run_raw(part: list[str] = lines) -> list[str]:
        return translate_ct2(raw, source, target, {**request, "lines": part})

    engines = {ENGINE_ROW: run_ours, "CTranslate2": run_raw}
    if args.per_line:
        engines = {name: each_line(run, lines) for name, run in engines.items()}
    texts = {name: run(lines[:WARMUP_LINES]) for name, run in engines.items()}  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.reps):
        for name, run in engines.items():
            start = time.perf_counter()
            texts[name] = run()
            seconds[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    same = sum(a == b for a, b in zip(*texts.values(), strict=True)) / len(lines)
    search = "greedy" if args.beam == 1 else f"beam {args.beam}"
    calls = "a call each" if args.per_line else "in batches"
    settings = f"{search}, {args.quantize} weights, {args.threads} thread(s)"
    print(f"{len(lines)} lines ({calls}), {settings}; {host_line()}")
    for name, values in seconds.items():
        print(f"  {name}: median {medians[name]:.3f} s ({' '.join(f'{v:.3f}' for v in values)})")
    ratio = medians[ENGINE_ROW] / medians["CTranslate2"]
    print(f"  ratio {ratio:.3f}; the same text on {same:.1%} of lines")
    if args.beam > 1:
        for part, (calls, cumulative) in profiled_parts(run_ours).items():
            print(f"  profiled: {part}: {calls} call(s), {cumulative:.3f} s")


if __name__ == "__main__":
    main()
