"""`--engine torch` against `--engine ctranslate2`: sentences/s on the CPU at one thread.

    python -m bench.decode.engines

A short run (about two minutes on a 2-core host): a model of the `small-fast` width (d_model
256, 3 + 3 layers, sentencepiece) trained for --steps updates on a synthetic word -> upper-case
corpus (enough that outputs end where the source does, as a real model's do), then the same
--lines sentences translated by `pipeline.translate_lines` on each engine, greedy and beam 4
(alpha 0, so both engines search by the same criterion), float32, one thread; tokenisation and
rendering included, model loading and the one-time export not. Each engine runs --reps times
after a warm-up, interleaved; medians. The outputs of the two engines are compared string by
string. Results go to bench/records/decode/engines-<date>.json (not with --no-write).
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from bench.records import OUT, host_line, write_record
from transduce.config import DecodeConfig, load_config
from transduce.data.prepare import PrepareOptions, prepare_text
from transduce.decode.ctranslate2_engine import open_ctranslate2
from transduce.decode.options import decode_options
from transduce.decode.pipeline import translate_lines
from transduce.store.load import LoadedModel, load_for_decoding
from transduce.train.trainer import Trainer

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "ran",
    "on",
    "under",
    "mat",
    "far",
    "away",
    "and",
    "then",
    "home",
    "old",
    "young",
    "big",
    "small",
    "red",
    "blue",
]
MODEL = [
    "model.d_model=256",
    "model.heads=4",
    "model.d_ff=1024",
    "model.encoder_layers=3",
    "model.decoder_layers=3",
    "data.max_tokens=1500",
    "train.warmup=40",
]


def trained(work: Path, steps: int) -> Path:
    """The benchmark's model, trained once into work/run."""
    run = work / "run"
    if (run / "best.json").exists():
        return run
    rng = random.Random(0)
    for split, size in (("train", 3000), ("dev", 50)):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 20))) for _ in range(size)]
        (work / f"{split}.en").write_text("".join(f"{line}\n" for line in lines))
        (work / f"{split}.up").write_text("".join(f"{line.upper()}\n" for line in lines))
    prepare_text(work, work / "data", PrepareOptions("en", "up", vocab_size=500), show_progress=False)
    overrides = [*MODEL, f"data.dataset={work / 'data'}", f"train.steps={steps}"]
    overrides += [f"train.save_every={steps}", f"train.validate_every={steps}"]
    Trainer(load_config("small", overrides), run, show_progress=False).fit()
    return run


def timed(
    loaded: LoadedModel, lines: list[str], options: DecodeConfig, greedy: bool
) -> tuple[float, list[str]]:
    """Seconds to translate `lines`, and the best outputs."""
    start = time.perf_counter()
    outputs, _ = translate_lines(loaded, lines, options, greedy)
    return time.perf_counter() - start, [o[0].text for o in outputs]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=OUT / "engines")
    parser.add_argument("--steps", type=int, default=150, help="training updates of the model")
    parser.add_argument("--lines", type=int, default=100, help="sentences translated per run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print, record nothing")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    run = trained(args.work, args.steps)
    rng = random.Random(1)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 20))) for _ in range(args.lines)]
    engines = {
        "torch": load_for_decoding(run, "none", 1, "cpu"),
        "ctranslate2": open_ctranslate2(run, "none", 1, "cpu"),
    }
    rows = []
    for search, greedy, settings in (("greedy", True, {}), ("beam 4", False, {"beam": 4, "alpha": 0.0})):
        options = decode_options(engines["torch"].config.decode, **settings)
        times: dict[str, list[float]] = {name: [] for name in engines}
        texts = {name: timed(loaded, lines[:10], options, greedy)[1] for name, loaded in engines.items()}
        for _ in range(args.reps):
            for name, loaded in engines.items():
                seconds, texts[name] = timed(loaded, lines, options, greedy)
                times[name].append(seconds)
        same = sum(a == b for a, b in zip(texts["torch"], texts["ctranslate2"], strict=True))
        speed = {name: len(lines) / statistics.median(t) for name, t in times.items()}
        for name in engines:
            rows.append(
                {
                    "search": search,
                    "engine": name,
                    "sentences_per_s": round(speed[name], 1),
                    "speedup": round(speed[name] / speed["torch"], 2),
                    "same_as_torch": f"{same}/{len(lines)}",
                }
            )
    record = dict(
        title="--engine torch vs --engine ctranslate2 (CPU, 1 thread, float32)",
        command=shlex.join(["python", "-m", "bench.decode.engines", *sys.argv[1:]]),
        host=host_line(1),
        setup=f"d_model 256, 3+3 layers, {args.steps} updates on word -> upper case; "
        f"{args.lines} sentences of 3-20 words, median of {args.reps}; greedy and beam 4 at alpha 0",
        rows=rows,
    )
    if args.no_write:
        print(rows)
        return
    write_record("decode", "engines", **record)


if __name__ == "__main__":
    main()
