"""Where a training step's GPU time goes: torch.profiler over a few steps of bench/gpu/throughput.py's
training step (random batch, label smoothing 0.1, fused Adam), the kernels sorted by CUDA time.

    python3 -m bench.gpu.step_profile --preset base --precision bf16 --tokens 24576
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from bench.gpu.throughput import DTYPES, random_batch, training_step
from transduce.config import load_config
from transduce.data.vocab import PAD
from transduce.model import build_model


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="base")
    parser.add_argument("--precision", default="bf16", choices=list(DTYPES))
    parser.add_argument("--tokens", type=int, default=24576, help="target tokens per batch")
    parser.add_argument("--length", type=int, default=32, help="target (and source) tokens per sentence")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--steps", type=int, default=3, help="profiled steps (after as many warm-up steps)")
    parser.add_argument("--rows", type=int, default=30, help="table rows")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("error: bench/gpu/step_profile.py needs a CUDA device")
    device = torch.device("cuda")
    cfg = load_config(args.preset, [])
    model = build_model(cfg.model, args.vocab, args.vocab, PAD).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    batch = random_batch(args.tokens // (args.length + 1), args.length, args.vocab, device)
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
    step = training_step(model, optimizer, scaler, batch, args.precision)
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows, max_name_column_width=60))


if __name__ == "__main__":
    main()
