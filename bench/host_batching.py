"""What the trainer's batching costs on the host: batches drawn by the training sampler
(data.max_tokens tokens, padded lengths) and collated into tensors, one thread, no model.
Compare the milliseconds per batch with a GPU step's time (bench/RESULTS.md, "GPU").

    python bench/host_batching.py bench/out/l10n-de-data --max-tokens 25000 --batches 100
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from transduce.data.batching import BatchSampler, collate, padded_lengths
from transduce.data.dataset import Dataset
from transduce.data.vocab import PAD


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", type=Path, help="a directory from `transduce prepare`")
    parser.add_argument("--max-tokens", type=int, default=25000)
    parser.add_argument("--batches", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    split = Dataset(args.dataset).splits["train"]
    sampler = BatchSampler(padded_lengths(split, False), args.max_tokens, seed=1)
    stream = iter(sampler)
    next(stream)  # the epoch's batch list, made once per epoch
    times, sentences, tokens, padded = [], [], [], []
    for _ in range(args.batches):
        began = time.perf_counter()
        batch = collate(split, next(stream))
        times.append(time.perf_counter() - began)
        sentences.append(batch.tgt_out.shape[0])
        tokens.append(int(batch.tgt_out.ne(PAD).sum()))
        padded.append(batch.tgt_out.numel())
    print(
        f"{1000 * np.median(times):.1f} ms a batch (median of {args.batches}; "
        f"mean {1000 * np.mean(times):.1f}), "
        f"{np.mean(sentences):.0f} sentences, {np.mean(tokens):.0f} target tokens "
        f"({np.mean(padded):.0f} with padding)"
    )


if __name__ == "__main__":
    main()
