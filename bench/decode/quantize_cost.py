"""What `--quantize int8` costs in quality: BLEU, chrF and sequence accuracy, fp32 vs int8.

    python -m bench.decode.quantize_cost [--run RUN_DIR]

Uses the length-generalisation example (configs/reverse.toml, `make demo-reverse`: the small
preset on `reverse`), trained into bench/out/demo once if no --run is given. Decodes the dev and
test splits with the config's beam search in float32 and after dynamic int8 quantisation, and
records the scores (bench/records/decode/quantize-<date>.json). (Speed is measured by bench/decode/speed.py.)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from bench.records import OUT, ROOT, host_line, write_record
from transduce.config import load_config
from transduce.data.tasks import generate_split
from transduce.decode.torch_engine import decode_all
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
        Trainer(load_config(str(ROOT / "configs" / "reverse.toml")), run, show_progress=True).fit(resume=True)
    torch.set_num_threads(args.threads)
    loaded = load_model(run)
    int8 = quantize_int8(loaded.model)
    rows = []
    for split in ("dev", "test"):
        for name, model in (("float32", loaded.model), ("int8", int8)):
            rows.append({"split": split, "weights": name, **scores(model, loaded, split)})
            print(rows[-1], flush=True)
    write_record(
        "decode",
        "quantize",
        title="What int8 decoding costs in quality",
        command="python -m bench.decode.quantize_cost" + (f" --run {args.run}" if args.run else ""),
        host=host_line(args.threads),
        setup=(
            f"Model: {run.name} (configs/reverse.toml, the small preset on the `reverse` task); beam "
            f"{loaded.config.decode.beam}; float32 against dynamic int8 quantisation of every linear map. "
            f"BLEU signature: {rows[0]['signature']}."
        ),
        rows=[
            {
                "split": r["split"],
                "weights": r["weights"],
                "bleu": round(r["bleu"], 2),
                "chrf": round(r["chrf"], 2),
                "seq_acc": round(r["seq"], 3),
                "decode_s": round(r["seconds"], 2),
            }
            for r in rows
        ],
    )


if __name__ == "__main__":
    main()
