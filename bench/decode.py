"""Decode speed: transduce vs Hugging Face `generate` vs CTranslate2, same weights, same machine.

    python bench/decode.py                 # presets small and base, 5 interleaved repetitions
    python bench/decode.py --presets small --reps 3

Builds a random-init model per preset (a sentencepiece vocabulary of 8000 learned on generated
text; the BOS embedding zeroed, since CTranslate2 starts Marian decoders from zeros), exports it
to a MarianMTModel directory, converts that to CTranslate2 (float32, int8) inside the peers' own
venv (bench/.peers, created on first use), packs ours for oneDNN (what `transduce translate`
decodes with by default; the unpacked model is timed too) and quantises it to int8
(`--quantize int8`), and times batch-32 decoding of a fixed output length
(EOS blocked until then) with greedy and beam 4, alternating engines within each repetition.
Medians go into bench/RESULTS.md (the decode section, replaced on each run).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from results import write_section

from transduce.config import load_config
from transduce.cpu_memory import retain_freed_memory
from transduce.data.vocab import BOS, EOS, SentencePieceVocab
from transduce.decode.search import beam_search, greedy
from transduce.interop.marian import export_marian, marian_layout
from transduce.model import build_model
from transduce.model.packed import pack_for_cpu
from transduce.model.quantize import quantize_int8
from transduce.store.checkpoint import save_checkpoint, state_tensors
from transduce.store.meta import CheckpointMeta

HERE = Path(__file__).resolve().parent
PEERS = HERE / ".peers"


def ensure_peers(venv: Path = PEERS) -> Path:
    """The Python of the peers' own venv (transformers, CTranslate2), created on first use, so
    that their packages never enter ours."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "torch==2.13.0"], check=True)  # CPU build first, never a CUDA one
        subprocess.run([*pip, "transformers", "ctranslate2", "sentencepiece", "numpy"], check=True)
    return python


def synthetic_text(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    syllables = ["ka", "to", "ri", "men", "sa", "lo", "vi", "ne", "dor", "pu", "shi", "an", "el", "qu", "ber"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(3000)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(5, 30))) for _ in range(n)]


def build(preset: str, out: Path) -> tuple[torch.nn.Module, SentencePieceVocab]:
    vocab_file = out / "vocab" / "src.spm"
    if vocab_file.exists():
        vocab = SentencePieceVocab(vocab_file.read_bytes())
    else:
        vocab = SentencePieceVocab.train(synthetic_text(20000), 8000)
        vocab_file.parent.mkdir(parents=True, exist_ok=True)
        vocab.save(out / "vocab" / "src")
    cfg = load_config(preset, ["model.pos_layout=halves", "model.dropout=0"])
    torch.manual_seed(0)
    model = build_model(cfg.model, len(vocab), len(vocab)).eval()
    with torch.no_grad():  # CTranslate2 starts Marian decoders from a zero embedding
        model.tgt_embed.tokens.weight[BOS].zero_()
    if not (out / "hf" / "config.json").exists():
        save_checkpoint(
            out / "ckpt",
            state_tensors(model),
            cfg,
            CheckpointMeta(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab)),
            [vocab_file],
            force=True,  # the benchmark's own scratch folder
        )
        export_marian(out / "ckpt", out / "hf", force=True)
    return model, vocab


class Peer:
    """A peer script in bench/.peers answering one JSON request per line (decode or train)."""

    def __init__(self, python: Path, script: str, hf_dir: Path, threads: int, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(HERE / script), str(hf_dir), str(threads), *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert json.loads(self.proc.stdout.readline())["ready"]

    def request(self, payload: dict) -> dict:
        self.proc.stdin.write(json.dumps(payload) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


class Peers:
    """One peer.py process per engine (see peer.py: a second CTranslate2 Translator in a process
    slows the first), answering each request from the process of its engine; `engines` are
    request names, "ct2-vmap" served by the "ct2" process."""

    def __init__(self, python: Path, hf_dir: Path, threads: int, engines: set[str]) -> None:
        loaded = sorted({self.process(e) for e in engines})
        self.procs = {e: Peer(python, "peer.py", hf_dir, threads, e) for e in loaded}

    @staticmethod
    def process(engine: str) -> str:
        """The peer process that serves requests for `engine`."""
        return engine.removesuffix("-vmap")

    def request(self, payload: dict) -> dict:
        return self.procs[self.process(payload["engine"])].request(payload)

    def close(self) -> None:
        for proc in self.procs.values():
            proc.close()


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
        model, vocab = build(preset, HERE / "out" / preset)
        variants = {
            "transduce": pack_for_cpu(model),
            "transduce-unpacked": model,
            "transduce-int8": quantize_int8(model),
        }
        text = synthetic_text(args.batch, seed=7)
        src = [[*vocab.encode(t)[:40], EOS] for t in text]
        to_marian = {ours: m for m, ours in enumerate(marian_layout(vocab)[0])}
        peer = Peers(python, HERE / "out" / preset / "hf", args.threads, {"hf", "ct2", "ct2-int8"})
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
    lines = [
        f"## Decoding speed ({time.strftime('%Y-%m-%d')})",
        "",
        f"Command: `python bench/decode.py --presets {' '.join(args.presets)} --reps {args.reps}`  ",
        f"Machine: {platform.processor() or platform.machine()}, {args.threads} threads, "
        f"torch {torch.__version__}, Python {platform.python_version()}.  ",
        f"Batch {args.batch}, {args.length} output tokens per sentence (EOS blocked), random-init "
        "weights exported to Marian; median of interleaved repetitions. transduce is float32 with "
        "weights pre-packed for oneDNN (the default of `transduce translate`), transduce-unpacked "
        "the same model on plain `linear`; transduce-int8 is `--quantize int8`, its tokens compared "
        "with HF's float32 ones.",
        "",
        "| preset | search | engine | s/batch | sentences/s | tokens/s | vs HF | same tokens as HF |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        hf = next(
            x
            for x in rows
            if x["preset"] == r["preset"] and x["search"] == r["search"] and x["engine"] == "hf"
        )
        lines.append(
            f"| {r['preset']} | {r['search']} | {r['engine']} | {r['seconds']:.3f} | {r['sent_s']:.1f} | "
            f"{r['tok_s']:.0f} | {hf['seconds'] / r['seconds']:.2f}x | {'yes' if r['same_as_hf'] else 'no'} |"
        )
    print("\n".join(lines))
    write_section("decode", lines)


if __name__ == "__main__":
    main()
