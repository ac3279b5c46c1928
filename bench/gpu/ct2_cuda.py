"""CTranslate2 on the GPU: `--engine ctranslate2` against raw CTranslate2 and our torch engine on
the same model, lines and device, interleaved in one process (issue 86).

    python -m bench.gpu.ct2_cuda --checkpoint RUN --test test.en --out DIR        # on the device
    python -m bench.gpu.ct2_cuda --checkpoint RUN --test test.en --sentences 8 --device cpu \\
        --compute-types float32 --out DIR                                          # a smoke run

CTranslate2 4.8.5's CUDA build links no CUDA library: it carries the CUDA 12 runtime and opens
`libcublas.so.12` (and `libcublasLt.so.12`) by name when a Translator starts on a GPU. An image
with CUDA 13 has `libcublas.so.13` only. Where no `libcublas.so.12` can be loaded, this script
makes a folder of links named for CUDA 12's libraries to the CUDA 13 ones that PyTorch's wheels
bring, puts it on LD_LIBRARY_PATH and starts itself again (the dynamic loader reads that variable
once, at a process's start): CTranslate2 looks its cuBLAS functions up by name, and those it calls
kept their names and signatures in cuBLAS 13. Whether it runs is what this measures; an error is
recorded as it is raised.

For each compute type (--compute-types: an export of the checkpoint in that type, the export's
own type then run on the device) and search (beam 4, greedy): our engine (`translate_lines` on the
export, one-best text, no scores, as `transduce translate --engine ctranslate2`), raw CTranslate2
(bench/peers/engines.py's `translate_ct2`: sentencepiece, `translate_batch` per length-sorted
batch), alternating within --reps rounds after a warm-up, medians; the share of lines whose text
is the same. Then our torch engine on the checkpoint, in fp32 (as `transduce translate` decodes)
and bf16 (the model cast), the same lines and settings. Beam 4 rows also count and time, in one
profiled run of ours, the batches' first calls and the searches again of sentences that reached
their own length limit (`ours_calls`); every row, from one more run of each, the seconds inside
translate_batch and outside it (`split`: the host's work around the calls). Writes ct2.json to --out.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

SHIM = Path("/tmp/cublas12")
LIBRARIES = ("libcublas", "libcublasLt")


def cublas12_loadable() -> bool:
    try:
        ctypes.CDLL("libcublas.so.12")
        return True
    except OSError:
        return False


def cuda13_cublas() -> dict[str, str]:
    """The CUDA 13 cuBLAS libraries on this Python's path (PyTorch's nvidia wheels), by name."""
    found = {}
    for folder in sys.path:
        for name in LIBRARIES:
            for path in glob.glob(f"{folder}/nvidia/**/{name}.so.13*", recursive=True):
                found.setdefault(name, path)
    return found


def with_cublas12_links() -> str | None:
    """Start again with the links on LD_LIBRARY_PATH where CUDA 12's cuBLAS is missing; what was
    done, or None when nothing was needed (or this is the restarted process)."""
    if os.environ.get("TRANSDUCE_CUBLAS12") or cublas12_loadable():
        return os.environ.get("TRANSDUCE_CUBLAS12")
    found = cuda13_cublas()
    if set(found) != set(LIBRARIES):
        return f"no libcublas.so.12 and no CUDA 13 cuBLAS to link ({found})"
    SHIM.mkdir(parents=True, exist_ok=True)
    for name, target in found.items():
        link = SHIM / f"{name}.so.12"
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    done = f"linked {', '.join(f'{n}.so.12 -> {t}' for n, t in found.items())}"
    env = {
        **os.environ,
        "TRANSDUCE_CUBLAS12": done,
        "LD_LIBRARY_PATH": f"{SHIM}:{os.environ.get('LD_LIBRARY_PATH', '')}",
    }
    os.execve(sys.executable, [sys.executable, "-m", "bench.gpu.ct2_cuda", *sys.argv[1:]], env)
    return done  # not reached


def interleaved(engines: dict[str, Callable[[], list[str]]], reps: int) -> tuple[dict, dict]:
    """Median seconds of each engine over `reps` alternating rounds, and its last texts."""
    texts = {name: run() for name, run in engines.items()}  # warm-up: graphs, plans, allocations
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(reps):
        for name, run in engines.items():
            start = time.perf_counter()
            texts[name] = run()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}, texts


class CallTimer:
    """A CTranslate2 Translator whose translate_batch is timed: the seconds and calls inside it, so
    that the rest of a run is the host work around it (ours: encoding, batching, rendering; raw:
    sentencepiece and batching)."""

    def __init__(self, translator: Any) -> None:
        self.translator, self.seconds, self.calls = translator, 0.0, 0

    def translate_batch(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.translator.translate_batch(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.translator, name)


def split(run: Callable[[], object], timer: CallTimer) -> dict:
    """One more run of `run`, whose translator `timer` wraps: its seconds inside translate_batch
    and outside it."""
    start = time.perf_counter()
    run()
    total = time.perf_counter() - start
    return {"calls": timer.calls, "translate_batch_s": timer.seconds, "outside_s": total - timer.seconds}


def same(a: list[str], b: list[str]) -> float:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def ct2_row(args: argparse.Namespace, lines: list[str], compute: str, options: Any, request: dict) -> dict:
    """Our engine against raw CTranslate2 on the export in `compute`: medians of interleaved runs,
    then one more run of each split at translate_batch, and beam search's calls profiled."""
    import ctranslate2
    import sentencepiece

    from bench.decode.ct2_gap import profiled_parts
    from bench.peers.engines import translate_ct2
    from transduce.decode.ctranslate2_engine import open_ctranslate2
    from transduce.decode.pipeline import output_rows, translate_lines
    from transduce.interop.ctranslate2 import tokenizers

    folder = args.work / f"export-{compute}"
    ours = open_ctranslate2(folder, "none", None, args.device)
    raw = ctranslate2.Translator(str(folder), device=args.device, compute_type="default")
    source, target = (sentencepiece.SentencePieceProcessor(model_file=str(f)) for f in tokenizers(folder))
    work = {**request, "lines": lines}
    engines = {
        "ours": lambda: output_rows(translate_lines(ours, lines, options, scores=False)[0]),
        "raw": partial(translate_ct2, raw, source, target, work),
    }
    medians, texts = interleaved(engines, args.reps)
    holder, raw_timer = ours.engine.translator, CallTimer(raw)
    holder.translator = ours_timer = CallTimer(holder.translator)
    splits = {  # one more run each: inside translate_batch and outside
        "ours": split(engines["ours"], ours_timer),
        "raw": split(partial(translate_ct2, raw_timer, source, target, work), raw_timer),
    }
    holder.translator = ours_timer.translator
    beam = request["beam"]
    return {
        "compute_type": compute,
        "beam": beam,
        "ours_s": medians["ours"],
        "raw_s": medians["raw"],
        "ours_vs_raw": medians["ours"] / medians["raw"],
        "same_text": same(texts["ours"], texts["raw"]),
        "split": splits,
        # beam search's calls: the batches' first, and the sentences that reached their own length
        # limit searched again (one profiled run; bench/decode/ct2_gap.py)
        "ours_calls": {
            part: {"calls": calls, "seconds": spent}
            for part, (calls, spent) in profiled_parts(engines["ours"]).items()
        }
        if beam > 1
        else None,
    }


def measure(args: argparse.Namespace, lines: list[str], rows: list[dict]) -> None:
    """Append each row to `rows` as it is measured (a later failure keeps the earlier rows)."""
    import torch

    from transduce.decode.options import decode_options
    from transduce.decode.pipeline import output_rows, translate_lines
    from transduce.interop.ctranslate2 import export_ctranslate2
    from transduce.store.load import load_model

    torch_model = load_model(args.checkpoint, torch.device(args.device))
    decode = torch_model.config.decode
    for beam in (4, 1):
        search = {"greedy": True} if beam == 1 else {"beam": beam}
        options = decode_options(decode, max_tokens=args.max_tokens, **search)
        request = {
            "beam": beam,
            "alpha": decode.alpha,
            "max_tokens": args.max_tokens,
            "max_len_a": decode.max_len_a,
            "max_len_b": decode.max_len_b,
            "engine": "ct2",
        }
        for compute in args.compute_types:
            if beam == 4:  # once per compute type, replacing an earlier session's
                export_ctranslate2(args.checkpoint, args.work / f"export-{compute}", compute, force=True)
            rows.append(ct2_row(args, lines, compute, options, request))
            print(json.dumps(rows[-1]), flush=True)
        for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            torch_model.model.to(dtype)
            medians, _ = interleaved(
                {
                    "torch": lambda opt=options: output_rows(
                        translate_lines(torch_model, lines, opt, scores=False)[0]
                    )
                },
                args.reps,
            )
            rows.append(
                {"engine": "torch", "precision": precision, "beam": beam, "seconds": medians["torch"]}
            )
            print(json.dumps(rows[-1]), flush=True)
        torch_model.model.to(torch.float32)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", type=Path, required=True, help="a checkpoint or run directory")
    parser.add_argument("--test", type=Path, required=True, help="raw source lines")
    parser.add_argument("--sentences", type=int, default=1024, help="the first N non-empty lines")
    parser.add_argument("--compute-types", nargs="+", default=["float16", "bfloat16", "int8_float16"])
    parser.add_argument("--max-tokens", type=int, default=4096, help="padded source tokens a batch")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ct2-exports"), help="the exports")
    args = parser.parse_args()
    shim = with_cublas12_links() if args.device == "cuda" else None
    args.out.mkdir(parents=True, exist_ok=True)
    from transduce.data.corpus import read_lines

    lines = [line for line in read_lines(args.test) if line.strip()][: args.sentences]
    result: dict = {"sentences": len(lines), "cublas": shim or "libcublas.so.12 found", "rows": []}
    try:
        import ctranslate2

        result["ctranslate2"] = ctranslate2.__version__
        result["cuda_devices"] = ctranslate2.get_cuda_device_count()
        measure(args, lines, result["rows"])
    except Exception as exc:  # the record says what failed, whatever it was
        result["error"] = f"{type(exc).__name__}: {exc}"
        print(f"error: {result['error']}", file=sys.stderr)
    (args.out / "ct2.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
