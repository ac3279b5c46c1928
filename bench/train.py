"""Training throughput: transduce vs Hugging Face MarianMTModel, same weights, same batches.

    python bench/train.py                      # presets small and base, 5 interleaved repetitions

Target tokens per second for forward + backward + Adam on identical batches of 128 x 32 target
tokens (4096), fp32, 2 threads, dropout 0, label smoothing 0.1 in both; peak RSS of each
process (transduce runs in this process, the peer in bench/.peers). Appends to RESULTS.md.
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import time

import torch
from decode import HERE, Peer, build, ensure_peers

from transduce.data.vocab import EOS, PAD
from transduce.interop.marian import marian_layout
from transduce.train.loss import label_smoothed_loss


def batches(vocab_size: int, rows: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab_size, (rows, length), generator=g)
    tgt = torch.randint(4, vocab_size, (rows, length), generator=g)
    src[:, -1] = EOS
    tgt[:, -1] = EOS
    return src, tgt


def our_steps(model, src, tgt, steps: int, opt) -> list[float]:
    from transduce.data.vocab import BOS

    tgt_in = torch.cat([torch.full((tgt.shape[0], 1), BOS), tgt[:, :-1]], 1)
    times = []
    for _ in range(steps):
        begin = time.perf_counter()
        loss, _ = label_smoothed_loss(model(src, tgt_in), tgt, 0.1, PAD)
        opt.zero_grad(set_to_none=True)
        (loss / tgt.ne(PAD).sum()).backward()
        opt.step()
        times.append(time.perf_counter() - begin)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presets", nargs="+", default=["small", "base"])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    python = ensure_peers()
    rows = []
    for preset in args.presets:
        model, vocab = build(preset, HERE / "out" / preset)
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
        to_marian = {ours: m for m, ours in enumerate(marian_layout(vocab)[0])}
        src, tgt = batches(len(vocab), 128, 32, seed=3)
        peer_src = [[to_marian[int(t)] for t in row] for row in src]
        peer_tgt = [[to_marian[int(t)] for t in row] for row in tgt]
        peer = Peer(python, "peer_train.py", HERE / "out" / preset / "hf", args.threads)
        request = {"src": peer_src, "tgt": peer_tgt, "steps": 1}

        our_steps(model, src, tgt, 3, opt)  # warm-up: allocator and thread pools settle
        peer.request({**request, "steps": 3})
        ours_t, hf_t, hf_rss = [], [], 0.0
        for _ in range(args.reps):
            ours_t += our_steps(model, src, tgt, 1, opt)
            res = peer.request(request)
            hf_t += res["seconds"]
            hf_rss = res["rss_mb"]
        peer.close()
        tokens = int(tgt.ne(PAD).sum())
        ours_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        for engine, values, rss in (("transduce", ours_t, ours_rss), ("hf", hf_t, hf_rss)):
            median = statistics.median(values)
            rows.append(
                {
                    "preset": preset,
                    "engine": engine,
                    "seconds": median,
                    "tok_s": tokens / median,
                    "rss": rss,
                    "vs_hf": statistics.median(hf_t) / median,
                }
            )
    lines = [
        f"\n## Training throughput ({time.strftime('%Y-%m-%d')})\n",
        f"Command: `python bench/train.py --presets {' '.join(args.presets)} --reps {args.reps}`  ",
        f"Machine: {platform.machine()}, {args.threads} threads, torch {torch.__version__}.  ",
        "Forward + backward + Adam on one batch of 128 x 32 target tokens, fp32, dropout 0, label "
        "smoothing 0.1, same weights (Marian export); median of interleaved steps. Peak RSS is per process "
        "(ours includes the benchmark driver).\n",
        "| preset | engine | s/step | target tokens/s | vs HF | peak RSS MB |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['preset']} | {r['engine']} | {r['seconds']:.3f} | {r['tok_s']:.0f} | {r['vs_hf']:.2f}x | "
        f"{r['rss']:.0f} |"
        for r in rows
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    with (HERE / "RESULTS.md").open("a") as f:
        f.write(text)


if __name__ == "__main__":
    main()
