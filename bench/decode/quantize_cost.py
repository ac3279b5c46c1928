"""What `--quantize int8` costs in quality: BLEU, chrF and sequence accuracy, fp32 vs int8.

    python -m bench.decode.quantize_cost [--run RUN_DIR]

Uses the README's main job (configs/demo.toml: the small preset on `reverse`), trained into
bench/out/demo once if no --run is given. Decodes the dev and test splits with the config's
beam search in float32 and after dynamic int8 quantisation, and writes the scores into
RESULTS.md between the quantisation markers. (Speed is measured by bench/decode/speed.py.)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from bench.records import OUT, ROOT, write_section
from transduce.config import load_config
from transduce.data.tasks import generate_split
from transduce.decode.translate import decode_all
from transduce.metrics import accuracy, corpus_scores
from transduce.model.quantize import quantize_int8
from transduce.store.load import load_model
from transduce.train.trainer import Trainer


def scores(model, loaded, split: str) -> dict:
    pairs = generate_split(loaded.config.data, split)
    sources = [loaded.src_vocab.encode(s) for s, _ in pairs]
    refs = [loaded.tgt_vocab.encode(t) for _, t in pairs]
    begin = time.perf_counter()
    hyps = decode_all(model, sources, loaded.config.decode)
    seconds = time.perf_counter() - begin
    outputs = [h[0].tokens if h else [] for h in hyps]
    bleu = corpus_scores([loaded.tgt_vocab.decode(o) for o in outputs], [t for _, t in pairs])
    return {
        "bleu": bleu.bleu,
        "chrf": bleu.chrf,
        "seq": accuracy(outputs, refs).sequence,
        "seconds": seconds,
        "signature": bleu.bleu_signature,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    run = args.run or OUT / "demo"
    if args.run is None and not (run / "checkpoints").exists():
        Trainer(load_config(str(ROOT / "configs" / "demo.toml")), run, show_progress=True).fit(resume=True)
    torch.set_num_threads(args.threads)
    loaded = load_model(run)
    int8 = quantize_int8(loaded.model)
    rows = []
    for split in ("dev", "test"):
        for name, model in (("float32", loaded.model), ("int8", int8)):
            rows.append({"split": split, "weights": name, **scores(model, loaded, split)})
            print(rows[-1], flush=True)
    lines = [
        f"## int8 quantisation: quality cost ({time.strftime('%Y-%m-%d')})",
        "",
        f"Command: `python -m bench.decode.quantize_cost` (model: {run.name}, the README's main job, "
        f"`reverse` task; beam {loaded.config.decode.beam}, {args.threads} threads). "
        f"BLEU signature: `{rows[0]['signature']}`.",
        "",
        "| split | weights | BLEU | chrF | sequence accuracy | decode s |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r['split']} | {r['weights']} | {r['bleu']:.2f} | {r['chrf']:.2f} | {r['seq']:.3f} | "
            f"{r['seconds']:.2f} |"
            for r in rows
        ),
    ]
    write_section("quantize", lines)


if __name__ == "__main__":
    main()
