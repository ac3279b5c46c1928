"""Training throughput: transduce vs Hugging Face MarianMTModel, same weights, same batches.

    python -m bench.train.throughput        # presets small and base, fp32, 7 interleaved repetitions
    python -m bench.train.throughput --precision fp32 bf16 --profile

Target tokens per second for forward + backward + Adam on identical batches of 128 x 32 target
tokens (4096), 2 threads, dropout 0, label smoothing 0.1 in both; peak RSS of each process
(transduce runs in this process, the peer in bench/.peers). bf16 runs the forward pass and the
loss of both under CPU autocast. --profile adds one torch.profiler step of each and a table of
self time per operator, the profile behind the ratio. Writes bench/records/train/train-<date>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import time

import torch

from bench.peers.same_weights import build
from bench.peers.venv import Peer, ensure_peers
from bench.records import OUT, host_line, write_record
from transduce.data.vocab import BOS, EOS, PAD
from transduce.interop.marian import marian_layout
from transduce.train.loss import label_smoothed_loss

MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def batches(vocab_size: int, rows: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab_size, (rows, length), generator=g)
    tgt = torch.randint(4, vocab_size, (rows, length), generator=g)
    src[:, -1] = EOS
    tgt[:, -1] = EOS
    return src, tgt


def our_step(model, opt, src: torch.Tensor, tgt: torch.Tensor, bf16: bool) -> None:
    """The trainer's step: forward and loss (under autocast for bf16), backward, Adam."""
    tgt_in = torch.cat([torch.full((tgt.shape[0], 1), BOS), tgt[:, :-1]], 1)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with autocast:
        loss, _ = label_smoothed_loss(model(src, tgt_in), tgt, 0.1, PAD)
    opt.zero_grad(set_to_none=True)
    (loss / tgt.ne(PAD).sum()).backward()
    opt.step()


def timed(steps: int, *args) -> list[float]:
    times = []
    for _ in range(steps):
        begin = time.perf_counter()
        our_step(*args)
        times.append(time.perf_counter() - begin)
    return times


def our_profile(*args) -> dict[str, float]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        our_step(*args)
    return {e.key: e.self_cpu_time_total / 1e6 for e in prof.key_averages()}


def profile_rows(ours: dict[str, float], hf: dict[str, float], top: int = 12) -> list[dict]:
    """Self seconds per operator: all of them, the matrix multiplies summed, the largest others."""

    def split(ops: dict[str, float]) -> tuple[float, float]:
        return sum(v for k, v in ops.items() if k in MATMUL), sum(ops.values())

    (o_mm, o_all), (h_mm, h_all) = split(ours), split(hf)
    rest = sorted(
        (k for k in set(ours) | set(hf) if k not in MATMUL),
        key=lambda k: -max(ours.get(k, 0.0), hf.get(k, 0.0)),
    )[:top]
    matmuls = f"matrix multiplies ({', '.join(m.split('::')[1] for m in MATMUL)})"
    return [
        {"operator": "all operators", "transduce": round(o_all, 3), "hf": round(h_all, 3)},
        {"operator": matmuls, "transduce": round(o_mm, 3), "hf": round(h_mm, 3)},
        *(
            {"operator": k, "transduce": round(ours.get(k, 0.0), 3), "hf": round(hf.get(k, 0.0), 3)}
            for k in rest
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presets", nargs="+", default=["small", "base"])
    parser.add_argument("--precision", nargs="+", choices=["fp32", "bf16"], default=["fp32"])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="add a per-operator profile of each")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    python = ensure_peers()
    rows, profiles = [], []
    for preset in args.presets:
        model, vocab = build(preset, OUT / preset)
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
        to_marian = {ours: m for m, ours in enumerate(marian_layout(vocab)[0])}
        src, tgt = batches(len(vocab), 128, 32, seed=3)
        peer = Peer(python, "marian_steps.py", OUT / preset / "hf", args.threads)
        tokens = int(tgt.ne(PAD).sum())
        for precision in args.precision:
            bf16 = precision == "bf16"
            ours_args = (model, opt, src, tgt, bf16)
            request = {
                "src": [[to_marian[int(t)] for t in row] for row in src],
                "tgt": [[to_marian[int(t)] for t in row] for row in tgt],
                "steps": 1,
                "precision": precision,
            }
            timed(3, *ours_args)  # warm-up: allocator and thread pools settle
            peer.request({**request, "steps": 3})
            ours_t, hf_t, hf_rss = [], [], 0.0
            for _ in range(args.reps):
                ours_t += timed(1, *ours_args)
                res = peer.request(request)
                hf_t += res["seconds"]
                hf_rss = res["rss_mb"]
            if args.profile:
                hf_ops = peer.request({**request, "steps": 0, "profile": True})["ops"]
                operators = profile_rows(our_profile(*ours_args), hf_ops)
                profiles.append({"preset": preset, "precision": precision, "rows": operators})
            ours_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            for engine, values, rss in (("transduce", ours_t, ours_rss), ("hf", hf_t, hf_rss)):
                median = statistics.median(values)
                rows.append(
                    {
                        "preset": preset,
                        "precision": precision,
                        "engine": engine,
                        "seconds_per_step": round(median, 3),
                        "tokens_per_s": round(tokens / median),
                        "peak_rss_mb": round(rss),
                    }
                )
        peer.close()
    write_record(
        "train",
        "train",
        title="Training throughput, CPU",
        command=f"python -m bench.train.throughput --presets {' '.join(args.presets)} --precision "
        f"{' '.join(args.precision)} --reps {args.reps}{' --profile' if args.profile else ''}",
        host=host_line(args.threads),
        setup=(
            "Forward + backward + Adam on one batch of 128 x 32 target tokens, dropout 0, label smoothing "
            "0.1, same weights (Marian export); median of interleaved steps. Peak RSS is per process (ours "
            "includes the benchmark driver). Profiles: torch.profiler, self CPU seconds per operator."
        ),
        rows=rows,
        profiles=profiles,
    )


if __name__ == "__main__":
    main()
