"""Decoding on a GPU against Hugging Face `generate` on the same weights, in one process.

    python -m bench.gpu.decode --out $OUT                 # what bench/gpu/gpu.sh runs on a device
    python -m bench.gpu.decode --device cpu --presets small --precisions fp32 --sentences 4 --length 4

For each preset x precision x search (greedy, beam 4) x batch (--sentences), on random source
ids of --src-length tokens: our search with the growing cache (`dynamic`), with the static cache
and its replayed CUDA graph (`static`, decode/static.py), and the MarianMTModel export of the
same weights (bench/peers/same_weights.py) through `generate`. Every output is exactly --length
tokens (EOS blocked before, length penalty off), so each engine does the same work. Seconds are
the fastest of --reps timed runs after one untimed run (which captures the graphs); `agree` is
the share of sentences whose output equals HF's (the first --length - 1 tokens: HF may end
with EOS at the last step). --attention-kernel names the kernel our search tries first (default:
PyTorch's own order, as `transduce translate` decodes; several: a row for each); --profile
profiles one more run of each cache per row (wall against device-busy seconds, and the tables).
Writes decode.json to --out.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import profile

from bench.gpu.step_profile import activities, device_and_host_tables, device_busy_us
from bench.gpu.throughput import sync
from bench.peers.same_weights import build
from transduce.data.vocab import EOS, PAD
from transduce.decode.beam import beam_search
from transduce.decode.search import greedy
from transduce.decode.static import StaticDecoder
from transduce.device import ATTENTION_KERNELS, attention_kernels
from transduce.interop.marian import marian_layout

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def timed(
    run: Callable[[], list[list[int]]], device: torch.device, reps: int
) -> tuple[float, list[list[int]]]:
    """The fastest of `reps` runs after an untimed one, and the outputs."""
    outputs = run()
    best = float("inf")
    for _ in range(reps):
        sync(device)
        begin = time.perf_counter()
        outputs = run()
        sync(device)
        best = min(best, time.perf_counter() - begin)
    return best, outputs


def ours(model: torch.nn.Module, src: torch.Tensor, beam: int, length: int, static: bool) -> list[list[int]]:
    searched = StaticDecoder(model, capacity=length + 1) if static else model
    options = {"max_len_a": 0.0, "max_len_b": length, "min_len": length}
    if beam == 1:
        return [h.tokens for h in greedy(searched, src, **options)]
    return [n[0].tokens for n in beam_search(searched, src, beam=beam, alpha=0.0, **options)]


def hugging_face(hf: torch.nn.Module, src: torch.Tensor, beam: int, length: int) -> list[list[int]]:
    """`generate` on Marian's ids, `length` decoder steps as ours; HF allows EOS at the last one
    (min_new_tokens counts it), so outputs are compared on their first length - 1 tokens."""
    pad, eos = hf.config.pad_token_id, hf.config.eos_token_id
    with torch.no_grad():
        out = hf.generate(
            input_ids=src,
            attention_mask=src.ne(pad).long(),
            num_beams=beam,
            do_sample=False,
            min_new_tokens=length,
            max_new_tokens=length,
            length_penalty=0.0,
            early_stopping=True,
        )
    return [[t for t in row[1:].tolist() if t not in (pad, eos)] for row in out]


def compare(
    ours_model: torch.nn.Module,
    hf: torch.nn.Module,
    src: torch.Tensor,
    to_marian: torch.Tensor,
    beam: int,
    kernel: str,
    args,
) -> dict:
    """Seconds of HF and of our two caches on one batch, `kernel` first; our outputs mapped to
    Marian's ids to compare them with HF's."""
    hf_s, reference = timed(
        lambda: hugging_face(hf, to_marian[src], beam, args.length), args.device, args.reps
    )
    row, table = {"hf_s": hf_s}, to_marian.tolist()
    for engine in ("dynamic", "static"):
        with our_kernels(args.device, kernel):
            seconds, outputs = timed(
                lambda static=engine == "static": ours(ours_model, src, beam, args.length, static),
                args.device,
                args.reps,
            )
        same = sum(
            [table[t] for t in a[:-1]] == b[: len(a) - 1] for a, b in zip(outputs, reference, strict=True)
        )
        row |= {
            f"{engine}_s": seconds,
            f"{engine}_vs_hf": hf_s / seconds,
            f"{engine}_agree": same / len(outputs),
        }
    return row


def our_kernels(device: torch.device, kernel: str) -> contextlib.AbstractContextManager:
    """`kernel` first around our search (HF keeps PyTorch's own order)."""
    if kernel == "pytorch":
        return contextlib.nullcontext()
    return attention_kernels(device, kernel)


def profiled(
    model: torch.nn.Module, src: torch.Tensor, beam: int, kernel: str, args: argparse.Namespace, name: str
) -> dict:
    """One more run of each of our caches under torch.profiler: its wall seconds against the device's
    busy seconds (the sum of its kernels' times), and the kernels and host operations by time in
    --out/profile-decode-<name>-<cache>.txt."""
    figures = {}
    for engine in ("dynamic", "static"):
        with our_kernels(args.device, kernel), profile(activities=activities(args.device)) as prof:
            began = time.perf_counter()
            ours(model, src, beam, args.length, engine == "static")
            sync(args.device)
            wall = time.perf_counter() - began
        events = prof.key_averages()
        figures[f"{engine}_profiled_s"] = wall
        figures[f"{engine}_device_busy_s"] = device_busy_us(events) / 1e6
        args.out.mkdir(parents=True, exist_ok=True)
        tables = device_and_host_tables(events, args.device, 25)
        (args.out / f"profile-decode-{name}-{engine}.txt").write_text(tables + "\n")
    return figures


def rows_for(preset: str, args: argparse.Namespace) -> list[dict]:
    import transformers

    model, vocab = build(preset, args.work / preset)
    layout = torch.tensor(marian_layout(vocab)[0])  # Marian id -> ours
    to_marian = torch.full((len(vocab),), -1, dtype=torch.long)
    to_marian[layout] = torch.arange(len(layout))
    rows = []
    for precision in args.precisions:
        dtype = DTYPES[precision]
        ours_model = model.to(args.device, dtype)
        hf = (
            transformers.MarianMTModel.from_pretrained(args.work / preset / "hf")
            .to(args.device, dtype)
            .eval()
        )
        for sentences in args.sentences:
            g = torch.Generator().manual_seed(sentences)
            src = torch.randint(EOS + 1, len(vocab), (sentences, args.src_length + 1), generator=g)
            src[:, -1] = EOS
            assert not src.eq(PAD).any()
            for beam, kernel in itertools.product(args.beams, args.attention_kernel):
                row = {"preset": preset, "precision": precision, "sentences": sentences, "beam": beam}
                row |= {"attention_kernel": kernel}
                row |= compare(
                    ours_model, hf, src.to(args.device), to_marian.to(args.device), beam, kernel, args
                )
                if args.profile:
                    name = f"{preset}-{precision}-{sentences}-beam{beam}" + (
                        "" if kernel == "pytorch" else f"-{kernel}"
                    )
                    row |= profiled(ours_model, src.to(args.device), beam, kernel, args, name)
                print(json.dumps(row), flush=True)
                rows.append(row)
        del hf
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presets", nargs="+", default=["base", "small"])
    parser.add_argument("--precisions", nargs="+", default=["bf16", "fp32"], choices=list(DTYPES))
    parser.add_argument("--sentences", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--beams", type=int, nargs="+", default=[4, 1])
    parser.add_argument("--src-length", type=int, default=24, help="source tokens per sentence (then EOS)")
    parser.add_argument("--length", type=int, default=32, help="output tokens per sentence")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("bench/out/gpu-decode"), help="models and exports")
    parser.add_argument("--out", type=Path, default=Path("bench/out/gpu"))
    parser.add_argument("--device", type=torch.device, default="cuda")
    parser.add_argument(
        "--attention-kernel",
        nargs="+",
        default=["pytorch"],
        choices=["pytorch", *ATTENTION_KERNELS],
        help="the attention kernel our search tries first on CUDA (pytorch: PyTorch's own order); "
        "several: a row for each",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also profile one run of each of our caches per row (profile-decode-*.txt in --out)",
    )
    args = parser.parse_args()
    rows = [row for preset in args.presets for row in rows_for(preset, args)]
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"device": str(args.device), "attention_kernel": args.attention_kernel, "rows": rows}
    (args.out / "decode.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
