"""Decode speed: transduce vs Hugging Face `generate` vs CTranslate2, same weights, same machine.

    python -m bench.decode.speed                 # presets small and base, 5 interleaved repetitions
    python -m bench.decode.speed --presets small --reps 3

Builds a random-init model per preset (a sentencepiece vocabulary of 8000 learned on generated
text; the BOS embedding zeroed, since CTranslate2 starts Marian decoders from zeros), exports it
to a MarianMTModel directory, converts that to CTranslate2 (float32, int8) inside the peers' own
venv (bench/.peers, created on first use), packs ours for oneDNN (what `transduce translate`
decodes with by default; the unpacked model is timed too) and quantises it to int8
(`--quantize int8`), and times batch-32 decoding of a fixed output length
(EOS blocked until then) with greedy and beam 4, alternating engines within each repetition.
Medians go to a record, bench/records/decode/decode-<date>.json.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bench.peers.same_weights import build, synthetic_text
from bench.peers.venv import Peers, ensure_peers
from bench.records import OUT, host_line, write_record
from transduce.cpu_memory import retain_freed_memory
from transduce.data.vocab import EOS
from transduce.decode.beam import beam_search
from transduce.decode.search import greedy
from transduce.interop.marian import marian_layout
from transduce.model.packed import pack_for_cpu
from transduce.model.quantize import quantize_int8


def ours(model, src: list[list[int]], beam: int, length: int) -> dict:
    width = max(len(s) for s in src)
    ids = torch.tensor([s + [0] * (width - len(s)) for s in src])
    start = time.perf_counter()
    if beam == 1:
        out = [h.tokens for h in greedy(model, ids, max_len_a=0.0, max_len_b=length, min_len=length)]
    else:
        out = [
            h[0].tokens
            for h in beam_search(
                model, ids, beam=beam, alpha=0.0, max_len_a=0.0, max_len_b=length, min_len=length
            )
        ]
    return {"seconds": time.perf_counter() - start, "outputs": out}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presets", nargs="+", default=["small", "base"])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=40, help="output tokens per sentence")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_memory()  # as load_for_decoding does for `transduce translate` on the CPU
    python = ensure_peers()
    rows = []
    for preset in args.presets:
        model, vocab = build(preset, OUT / preset)
        variants = {
            "transduce": pack_for_cpu(model),
            "transduce-unpacked": model,
            "transduce-int8": quantize_int8(model),
        }
        text = synthetic_text(args.batch, seed=7)
        src = [[*vocab.encode(t)[:40], EOS] for t in text]
        to_marian = {ours: m for m, ours in enumerate(marian_layout(vocab)[0])}
        peer = Peers(python, OUT / preset / "hf", args.threads, {"hf", "ct2", "ct2-int8"})
        for beam in (1, 4):
            engines = (*variants, "hf", "ct2", "ct2-int8")
            times: dict[str, list[float]] = {e: [] for e in engines}
            outputs: dict[str, list] = {}
            for variant in variants.values():  # warm-up
                ours(variant, src, beam, args.length)
            for engine in ("hf", "ct2", "ct2-int8"):
                peer.request({"engine": engine, "beam": beam, "src": src, "length": args.length})
            for _ in range(args.reps):
                for engine in times:
                    if engine in variants:
                        res = ours(variants[engine], src, beam, args.length)
                        res["outputs"] = [[to_marian[t] for t in row] for row in res["outputs"]]
                    else:
                        marian_src = [[to_marian[t] for t in s] for s in src]
                        res = peer.request(
                            {"engine": engine, "beam": beam, "src": marian_src, "length": args.length}
                        )
                    times[engine].append(res["seconds"])
                    outputs[engine] = res["outputs"]
            for engine, values in times.items():
                median = statistics.median(values)
                rows.append(
                    {
                        "preset": preset,
                        "search": "greedy" if beam == 1 else f"beam {beam}",
                        "engine": engine,
                        "seconds": median,
                        "sent_s": args.batch / median,
                        "tok_s": args.batch * args.length / median,
                        "same_as_hf": outputs[engine] == outputs["hf"],
                    }
                )
        peer.close()
    write_results(rows, args)


def write_results(rows: list[dict], args: argparse.Namespace) -> None:
    write_record(
        "decode",
        "decode",
        title="Decoding speed, batch 32, CPU",
        command=f"python -m bench.decode.speed --presets {' '.join(args.presets)} --reps {args.reps}",
        host=host_line(args.threads),
        setup=(
            f"Batch {args.batch}, {args.length} output tokens per sentence (EOS blocked), random-init "
            "weights exported to Marian; median of interleaved repetitions. transduce is float32 with "
            "weights pre-packed for oneDNN (the default of `transduce translate`), transduce-unpacked the "
            "same model on plain `linear`; transduce-int8 is `--quantize int8`, its tokens compared with "
            "HF's float32 ones."
        ),
        rows=[
            {
                "preset": r["preset"],
                "search": r["search"],
                "engine": r["engine"],
                "seconds": round(r["seconds"], 3),
                "sentences_per_s": round(r["sent_s"], 1),
                "tokens_per_s": round(r["tok_s"]),
                "same_tokens_as_hf": r["same_as_hf"],
            }
            for r in rows
        ],
    )


if __name__ == "__main__":
    main()
