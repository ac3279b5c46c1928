"""End-to-end CPU decoding on real text: `transduce translate` vs CTranslate2 vs Hugging Face.

    python -m bench.decode.e2e --checkpoint bench/out/mt/ours-small-seed3 \\
        --test bench/out/l10n-de/test.en --refs bench/out/l10n-de/test.de

The number users quote: raw text lines in, detokenised text out, tokenisation included, model
loading not, for every engine alike. The checkpoint is exported into --work with `transduce
export --format ctranslate2` (float32, and `--quantization int8`) and, when Marian can hold it
(post-norm, pos_layout=halves, tied), `--format marian` for HF (otherwise its rows are left out);
the peers run in their own venv (--peers) behind bench/peers/engines.py. Engines:

  transduce    `transduce.translate` on a model from `transduce.load`, as a user of `import
               transduce` runs it (with --shortlist, which only the command line takes,
               `pipeline.translate_lines` as `transduce translate --shortlist` runs it): float32
               weights pre-packed for oneDNN, or int8; batches of --max-tokens source tokens
  CTranslate2  sentencepiece, `translate_batch` per length-sorted batch of --max-tokens padded
               source tokens (the same batches), float32 or int8 model
  transduce --engine ctranslate2
               `translate_lines` on CTranslate2 (`open_ctranslate2`: the checkpoint's cached
               export, float32 or int8), as `transduce translate --engine ctranslate2` runs it,
               in a process of its own (bench/peers/transduce_engine.py, our venv) as each
               peer engine runs: two Translators, or PyTorch's threads, in one process slow
               each other on 2 threads; its outputs compared with raw CTranslate2's
  HF generate  MarianTokenizer, `generate` on length-sorted batches of --max-tokens padded
               source tokens, batch_decode; float32 only (generate has no int8 CPU path of its
               own; torch's dynamic quantisation is what transduce's int8 already is)

Rows: {all test lines, the --longest longest} x {greedy, beam 4} x {float32, int8} x --threads,
engines interleaved within each of --reps repetitions after a warm-up; medians. Each engine's
output is compared with transduce's for the same lines, search and weights (exact string
match; HF and transduce int8 with transduce float32), and scored with BLEU when --refs is
given. Beam 4 uses --alpha as every engine's length penalty: transduce divides by
((5 + |Y|) / 6)^alpha, CTranslate2 and HF by |Y|^alpha, so beam outputs may differ there
(--alpha 0 makes the search criteria equal). Output lengths follow the checkpoint's
a * |source| + b: per sentence for transduce, per batch (its longest source) for HF and
CTranslate2, which have no per-sentence limit. With --shortlist FILE (`transduce shortlist` of the
model's training data), every row is also run with the shortlist: transduce `--shortlist`,
CTranslate2 with it exported as its vocabulary map (`use_vmap`); those rows compare with
transduce's shortlisted output and speed, and transduce's with its full-vocabulary output, so
the BLEU and the speed a shortlist buys stand side by side. Results go to a record,
bench/records/decode/<--claim>-<date>.json (not with --no-write); outputs to --work/outputs.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import transduce
from bench.peers.venv import PEERS, Peer, Peers, ensure_peers
from bench.records import OUT, host_line, markdown_table, write_record
from transduce.data.corpus import read_lines
from transduce.decode.options import decode_options
from transduce.decode.pipeline import output_rows, translate_lines
from transduce.decode.shortlist import Shortlist
from transduce.interop.ctranslate2 import ExportError, export_ctranslate2
from transduce.interop.marian import MarianError, export_marian
from transduce.metrics import corpus_scores
from transduce.store.load import LoadedModel, load_model

ENGINE_ROW = "transduce --engine ctranslate2"
# engine key (engines.py's names) -> (name shown, weights, the transduce output its text is compared
# with, vocabulary: full, or the --shortlist (ours) and its export as a vocabulary map (CTranslate2))
ENGINES = {
    "transduce": ("transduce", "float32", None, "full"),
    "transduce-int8": ("transduce", "int8", "transduce", "full"),
    "ct2": ("CTranslate2", "float32", "transduce", "full"),
    "ct2-int8": ("CTranslate2", "int8", "transduce-int8", "full"),
    "hf": ("HF generate", "float32", "transduce", "full"),
    "transduce-ct2": (ENGINE_ROW, "float32", "ct2", "full"),
    "transduce-ct2-int8": (ENGINE_ROW, "int8", "ct2-int8", "full"),
}
SHORTLISTED = {
    "transduce-shortlist": ("transduce", "float32", "transduce", "shortlist"),
    "transduce-int8-shortlist": ("transduce", "int8", "transduce-int8", "shortlist"),
    "ct2-vmap": ("CTranslate2", "float32", "transduce-shortlist", "shortlist"),
    "ct2-int8-vmap": ("CTranslate2", "int8", "transduce-int8-shortlist", "shortlist"),
}
WARMUP_LINES = 16


def export(checkpoint: Path, work: Path, shortlist: Shortlist | None) -> str | None:
    """The models the peers load, written by transduce's own exporters (replaced every run, so
    they always match the checkpoint), CTranslate2's with the shortlist as their vocabulary map.
    A model Marian cannot hold (pre-norm, say) gets only its sentencepiece files in work/hf, for
    CTranslate2's tokenisation; returns why HF generate cannot run then (None: it can)."""
    hf = work / "hf"
    try:
        for quantization in ("float32", "int8"):
            vmap = shortlist.vmap if shortlist is not None else None
            export_ctranslate2(checkpoint, work / f"ct2-{quantization}", quantization, True, vmap=vmap)
    except ExportError as exc:
        sys.exit(f"cannot export {checkpoint}: {exc}")
    try:
        export_marian(checkpoint, hf, force=True)
        return None
    except MarianError as exc:
        loaded = load_model(checkpoint)
        shutil.rmtree(hf, ignore_errors=True)
        hf.mkdir(parents=True)
        (hf / "source.spm").write_bytes(loaded.src_vocab.proto)
        (hf / "target.spm").write_bytes(loaded.tgt_vocab.proto)
        return str(exc)


def peer_versions(python: Path) -> str:
    """The peers' package versions, from their own venv."""
    code = (
        "import ctranslate2, transformers, torch; "
        "print(ctranslate2.__version__, transformers.__version__, torch.__version__)"
    )
    ct2, hf, peer_torch = subprocess.run(
        [str(python), "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    return f"CTranslate2 {ct2}, transformers {hf} (torch {peer_torch})"


def run(
    engine: str,
    lines: list[str],
    beam: int,
    ours: dict[str, LoadedModel | Peer],
    peer: Peers,
    args: argparse.Namespace,
) -> dict:
    """One engine on `lines`, timed from text to text: our torch engine in-process as a user of
    `import transduce` runs it (`transduce.translate`; with the shortlist, which only the command
    line takes, `translate_lines` as `transduce translate --shortlist` runs it), our CTranslate2
    engine and the peers in processes of their own with the same options."""
    decode = ours["transduce"].config.decode
    model = engine.removesuffix("-shortlist")
    if not isinstance(ours.get(model), LoadedModel):
        request = {
            "engine": engine,
            "beam": beam,
            "alpha": args.alpha,
            "max_len_a": decode.max_len_a,
            "max_len_b": decode.max_len_b,
            "max_tokens": args.max_tokens,
            "lines": lines,
        }
        return ours[model].request(request) if model in ours else peer.request(request)
    search = {"greedy": True} if beam == 1 else {"beam": beam, "alpha": args.alpha}
    start = time.perf_counter()
    if engine.endswith("-shortlist"):
        options = decode_options(decode, max_tokens=args.max_tokens, **search)
        found, _ = translate_lines(ours[model], lines, options, shortlist=args.listed, scores=False)
        outputs = output_rows(found)
    else:
        outputs = transduce.translate(ours[model], lines, max_tokens=args.max_tokens, **search)
    return {"seconds": time.perf_counter() - start, "outputs": outputs}


def measure(
    lines: list[str], beam: int, ours: dict[str, LoadedModel | Peer], peer: Peers, args: argparse.Namespace
) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    """Every engine's seconds over --reps rounds, interleaved so that drifts in the machine's speed
    hit all alike, after one warm-up call each; and their outputs."""
    for engine in args.engines:
        run(engine, lines[:WARMUP_LINES], beam, ours, peer, args)
    times: dict[str, list[float]] = {e: [] for e in args.engines}
    outputs: dict[str, list[str]] = {}
    for _ in range(args.reps):
        for engine in args.engines:
            res = run(engine, lines, beam, ours, peer, args)
            times[engine].append(res["seconds"])
            outputs[engine] = res["outputs"]
    return times, outputs


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--checkpoint", type=Path, required=True, help="transduce checkpoint or run directory"
    )
    parser.add_argument("--test", type=Path, required=True, help="source lines, e.g. the l10n test.en")
    parser.add_argument("--refs", type=Path, help="reference lines for BLEU (optional)")
    parser.add_argument("--limit", type=int, help="use only the first N test lines (smoke runs)")
    parser.add_argument("--longest", type=int, default=500, help="size of the longest-lines subset")
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions per row")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts to time")
    parser.add_argument("--alpha", type=float, default=0.6, help="beam length penalty, all engines")
    parser.add_argument("--max-tokens", type=int, default=4096, help="source tokens per batch, all engines")
    parser.add_argument("--work", type=Path, default=OUT / "decode-e2e", help="exports and outputs")
    parser.add_argument("--peers", type=Path, default=PEERS, help="the peers' venv (created when missing)")
    parser.add_argument("--no-write", action="store_true", help="print the results, write no record")
    parser.add_argument(
        "--claim",
        default="decode-e2e",
        help="the record's claim, one per model: bench/records/decode/<claim>-<date>.json",
    )
    parser.add_argument(
        "--shortlist",
        type=Path,
        help="a `transduce shortlist` file: adds rows of transduce with it and CTranslate2 with it as "
        "its vocabulary map (use_vmap)",
    )
    return parser.parse_args()


def open_ours(checkpoint: Path, threads: int) -> dict[str, LoadedModel | Peer]:
    """Our engines on `threads` threads: the torch engine loaded as `transduce.load` does (float32
    and int8), the CTranslate2 engine in processes of their own."""
    return {
        "transduce": transduce.load(checkpoint, quantize="none", threads=threads),
        "transduce-int8": transduce.load(checkpoint, quantize="int8", threads=threads),
        "transduce-ct2": Peer(Path(sys.executable), "transduce_engine.py", checkpoint, threads, "none"),
        "transduce-ct2-int8": Peer(Path(sys.executable), "transduce_engine.py", checkpoint, threads, "int8"),
    }


def engine_rows(
    lines: list[str],
    refs: list[str] | None,
    outputs: dict[str, list[str]],
    times: dict[str, list[float]],
    *,
    subset: str,
    search: str,
    threads: int,
    args: argparse.Namespace,
) -> list[dict]:
    """A row per engine of one subset, search and thread count; each engine's outputs to a file."""
    rows = []
    for engine, values in times.items():
        name, weights, base, vocabulary = args.engines[engine]
        seconds = statistics.median(values)
        same = None
        if base is not None:
            same = sum(a == b for a, b in zip(outputs[engine], outputs[base], strict=True))
        file = args.work / "outputs" / f"{subset}.{search}.{engine}".replace(" ", "_")
        file.write_text("".join(f"{line}\n" for line in outputs[engine]), encoding="utf-8")
        rows.append(
            {
                "subset": subset,
                "lines": len(lines),
                "search": search,
                "weights": weights,
                "vocabulary": vocabulary,
                "threads": threads,
                "engine": name,
                "seconds": seconds,
                "same": None if same is None else same / len(lines),
                "words": sum(len(line.split()) for line in outputs[engine]),
                "bleu": corpus_scores(outputs[engine], refs).bleu if refs else None,
            }
        )
        print(
            f"{threads} threads, {subset}, {search}, {name} {weights}, {vocabulary} "
            f"vocabulary: {seconds:.2f} s"
        )
    return rows


def main() -> None:
    args = parse_args()
    args.listed = Shortlist.load(args.shortlist) if args.shortlist else None
    args.engines = {**ENGINES, **(SHORTLISTED if args.listed else {})}

    sources = read_lines(args.test)
    refs = read_lines(args.refs) if args.refs else None
    if refs is not None and len(refs) != len(sources):
        sys.exit(f"{args.test} has {len(sources)} lines, {args.refs} {len(refs)}")
    keep = [i for i, line in enumerate(sources) if line.strip()][: args.limit]  # peers cannot skip blanks
    longest = sorted(sorted(keep, key=lambda i: -len(sources[i]))[: args.longest])
    subsets = {f"all {len(keep)}": keep, f"{len(longest)} longest": longest}

    args.no_hf = export(args.checkpoint, args.work, args.listed)
    if args.no_hf:
        del args.engines["hf"]
        print(f"HF generate left out: {args.no_hf}")
    python = ensure_peers(args.peers)
    (args.work / "outputs").mkdir(exist_ok=True)
    rows = []
    for threads in args.threads:
        ours = open_ours(args.checkpoint, threads)
        peer_engines = {e for e in args.engines if not e.startswith("transduce")}
        peer = Peers(python, args.work / "hf", threads, peer_engines)
        for subset, index in subsets.items():
            lines = [sources[i] for i in index]
            subset_refs = [refs[i] for i in index] if refs else None
            for beam in (1, 4):
                search = "greedy" if beam == 1 else f"beam {beam}"
                times, outputs = measure(lines, beam, ours, peer, args)
                rows += engine_rows(
                    lines,
                    subset_refs,
                    outputs,
                    times,
                    subset=subset,
                    search=search,
                    threads=threads,
                    args=args,
                )
        peer.close()
        for process in ("transduce-ct2", "transduce-ct2-int8"):
            ours[process].close()
    report(rows, args, python, ours["transduce"])


def same_cell(rows: list[dict], r: dict, engine: str) -> dict:
    """`engine`'s row for r's lines, search, weights, vocabulary and threads."""
    return next(
        x
        for x in rows
        if x["engine"] == engine
        and all(x[k] == r[k] for k in ("subset", "search", "weights", "vocabulary", "threads"))
    )


def base_of(rows: list[dict], r: dict) -> dict:
    """transduce's own row (float32, or int8 against int8) for r's cell."""
    return same_cell(rows, r, "transduce")


def setup_text(rows: list[dict], args: argparse.Namespace, loaded: LoadedModel) -> str:
    """Every setting a reader needs to repeat the rows."""
    m, d = loaded.config.model, loaded.config.decode
    return (
        f"Model: {args.checkpoint} (d_model {m.d_model}, {m.encoder_layers}+{m.decoder_layers} layers, "
        f"d_ff {m.d_ff}, {m.norm}-norm, {len(loaded.src_vocab)} pieces), exported with `transduce export "
        "--format ctranslate2` (`--quantization int8` for CTranslate2's int8 rows) and `--format marian` "
        f"for HF{f' (not possible: {args.no_hf}; no HF rows)' if args.no_hf else ''}. "
        f"Test: {args.test}, blank lines left out: {' and '.join(dict.fromkeys(r['subset'] for r in rows))} "
        "lines (the longest by characters). "
        "Timed: raw lines in, detokenised text out (model loading not timed, for any engine); median of "
        f"{args.reps} repetitions, engines interleaved, after a warm-up. transduce: `transduce.translate` "
        'after `transduce.load` (float32 weights pre-packed for oneDNN; int8 = `quantize="int8"`; '
        "with the shortlist `translate_lines` as `transduce translate --shortlist` runs it). "
        "CTranslate2: sentencepiece, `translate_batch` per length-sorted batch of <= "
        f"{args.max_tokens} padded source tokens, `inter_threads=1, intra_threads=threads`. HF: "
        f"MarianTokenizer, `generate` on length-sorted batches of <= {args.max_tokens} padded source "
        "tokens, `batch_decode`; no int8 rows (generate has no int8 CPU path beyond torch's dynamic "
        "quantisation, which is what transduce's int8 is). transduce batches by the same "
        f"{args.max_tokens} source tokens. "
        f"Search: greedy, or beam 4 with length penalty alpha = {args.alpha} for every engine: transduce "
        "divides by ((5 + |Y|) / 6)^alpha, CTranslate2 and HF by |Y|^alpha (no exact counterpart). "
        f"Maximum output length {d.max_len_a} x |source| + {d.max_len_b}: per sentence (transduce), per "
        "batch's longest source (HF and CTranslate2, which have no per-sentence limit). Beam stopping is "
        'each engine\'s default; "words": output words, the work each engine did. "same": share of '
        "lines whose text equals transduce's for the same lines, "
        "search and weights (HF's against transduce float32, transduce int8's against transduce float32, "
        f"{ENGINE_ROW}'s against raw CTranslate2's; its time is also shown as vs_ctranslate2)."
    )


def recorded_rows(rows: list[dict]) -> list[dict]:
    """The rows as the record keeps them, with each one's time against transduce's and (for our
    CTranslate2 engine) against raw CTranslate2's."""
    return [
        {
            "lines": r["subset"],
            "search": r["search"],
            "weights": r["weights"],
            "vocabulary": r["vocabulary"],
            "threads": r["threads"],
            "engine": r["engine"],
            "seconds": round(r["seconds"], 2),
            "sentences_per_s": round(r["lines"] / r["seconds"], 1),
            "vs_transduce": None
            if r is base_of(rows, r)
            else round(r["seconds"] / base_of(rows, r)["seconds"], 2),
            "vs_ctranslate2": round(r["seconds"] / same_cell(rows, r, "CTranslate2")["seconds"], 2)
            if r["engine"] == ENGINE_ROW
            else None,
            "same": None if r["same"] is None else round(r["same"], 3),
            "words": r["words"],
            "bleu": None if r["bleu"] is None else round(r["bleu"], 1),
        }
        for r in rows
    ]


def print_targets(rows: list[dict]) -> None:
    """The targets' verdicts: against CTranslate2, HF generate, and raw CTranslate2 for ours on it."""
    ct2 = [r["seconds"] / base_of(rows, r)["seconds"] for r in rows if r["engine"] == "CTranslate2"]
    hf = [
        r["seconds"] / base_of(rows, r)["seconds"]
        for r in rows
        if r["engine"] == "HF generate" and r["search"] == "beam 4"
    ]
    versus_hf = (
        f"beam 4 float32 vs HF generate {min(hf):.2f}x to {max(hf):.2f}x (target >= 2x)"
        if hf
        else "no HF rows for this model"
    )
    engine = [
        r["seconds"] / same_cell(rows, r, "CTranslate2")["seconds"] for r in rows if r["engine"] == ENGINE_ROW
    ]
    print(
        f"Targets: ahead of CTranslate2 in {sum(x > 1 for x in ct2)} of {len(ct2)} rows (same weights; "
        f"ratios {min(ct2):.2f}x to {max(ct2):.2f}x); {versus_hf}; --engine ctranslate2 within 5% of raw "
        f"CTranslate2 in {sum(x <= 1.05 for x in engine)} of {len(engine)} rows (time ratios "
        f"{min(engine):.2f}x to {max(engine):.2f}x)."
    )


def report(rows: list[dict], args: argparse.Namespace, python: Path, loaded: LoadedModel) -> None:
    """The record of the rows, the targets' verdicts and every setting a reader needs to repeat them."""
    recorded = recorded_rows(rows)
    if not args.no_write:
        write_record(
            "decode",
            args.claim,
            title="End-to-end decoding of text, CPU",
            command=f"python -m bench.decode.e2e {shlex.join(sys.argv[1:])}",
            host=f"{host_line()}; peers: {peer_versions(python)}",
            setup=setup_text(rows, args, loaded),
            rows=recorded,
        )
    else:
        print("\n".join(markdown_table(recorded)))
    print_targets(rows)


if __name__ == "__main__":
    main()
