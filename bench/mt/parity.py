"""Is the MT benchmark's recipe really the same? Train both systems without dropout and compare.

    python -m bench.mt.parity --steps 40

With dropout 0 nothing random is left: the same initial weights, the same batches and the
same Adam steps must give the same training loss at every step, up to float rounding that
grows slowly. `transduce train` (the real trainer, in a subprocess) and the Hugging Face
peer run side by side on the l10n corpus prepared by bench/mt/vs_marian.py; the per-step losses and
their largest difference go to a record (bench/records/mt/mt-parity-<preset>-<date>.json).
"""

from __future__ import annotations

import argparse
import re
import sys

from bench.mt.vs_marian import OUT, initial_model, start_training
from bench.peers.venv import Peer, ensure_peers
from bench.records import BENCH, host_line, write_record
from transduce.config import load_config
from transduce.data.batching import BatchSampler, padded_lengths
from transduce.data.dataset import Dataset
from transduce.data.vocab import EOS
from transduce.interop.marian import marian_layout
from transduce.train.schedule import inverse_sqrt_lr

LOSS = re.compile(r"step (\d+): train/loss=([0-9.]+)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="small")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=400)
    args = parser.parse_args()
    data_dir = BENCH / "out" / "l10n-de-data"
    if not (data_dir / "meta.json").exists():
        sys.exit(
            "prepare the corpus first: python -m bench.mt.vs_marian "
            "(or python -m bench.data.l10n_corpus and transduce prepare)"
        )
    data = Dataset(data_dir)
    overrides = [
        "model.pos_layout=halves",
        "model.dropout=0.0",
        f"data.dataset={data_dir}",
        "data.max_tokens=4096",
        f"train.steps={args.steps}",
        f"train.warmup={args.warmup}",
        "train.validate_every=100000000",
        "train.save_every=100000000",
        "train.threads=1",
        "train.log_every=1",
    ]
    cfg = load_config(args.preset, overrides)
    hf_dir = initial_model(cfg, data, f"{args.preset}-nodropout")
    run = OUT / f"parity-{args.preset}"
    ours = start_training(args.preset, overrides, run)
    to_marian = {o: m for m, o in enumerate(marian_layout(data.src_vocab)[0])}
    split = data.splits["train"]
    peer = Peer(ensure_peers(), "marian_mt.py", hf_dir, 1, "1")
    stream = iter(BatchSampler(padded_lengths(split), cfg.data.max_tokens, cfg.data.seed))
    hf_losses = []
    for step in range(1, args.steps + 1):
        pairs = [split.pair(i) for i in next(stream)]
        res = peer.request(
            {
                "op": "train",
                "src": [[to_marian[t] for t in s.tolist()] + [to_marian[EOS]] for s, _ in pairs],
                "tgt": [[to_marian[t] for t in t_.tolist()] + [to_marian[EOS]] for _, t_ in pairs],
                "lr": inverse_sqrt_lr(step, cfg.model.d_model, cfg.train.warmup, cfg.train.lr_scale),
            }
        )
        hf_losses.append(res["loss"])
    peer.close()
    if ours.wait() != 0:
        sys.exit(f"our training failed; see {run / 'train.log'}")
    our_losses = {int(m[1]): float(m[2]) for m in LOSS.finditer((run / "train.log").read_text())}
    rows = [(s, our_losses[s], hf_losses[s - 1]) for s in range(1, args.steps + 1) if s in our_losses]
    worst = max(abs(a - b) for _, a, b in rows)
    shown = [r for r in rows if r[0] in (1, 2, 5) or r[0] % 10 == 0]
    write_record(
        "mt",
        f"mt-parity-{args.preset}",
        title="The MT benchmark's recipe, checked without dropout",
        command=f"python -m bench.mt.parity --preset {args.preset} --steps {args.steps} "
        f"--warmup {args.warmup}",
        host=host_line(1),
        setup=(
            "The `mt` benchmark's setup with dropout 0 (nothing random left): `transduce train` and the "
            "Hugging Face peer from the same initial weights on the same l10n batches with the same schedule."
        ),
        rows=[{"step": step, "transduce_loss": round(a, 4), "hf_loss": round(b, 4)} for step, a, b in shown],
        steps=len(rows),
        max_difference=round(worst, 4),
    )


if __name__ == "__main__":
    main()
