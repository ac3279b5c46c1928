"""Real-data MT benchmark: transduce vs a Hugging Face MarianMTModel trained with the same recipe.

    python -m bench.mt.vs_marian --minutes 60 --threads 1 [--preset base] [--seed 2]

Data: the offline English->German corpus (bench/data/l10n_corpus.py, 563k pairs), one shared
sentencepiece BPE vocabulary of 8000 (`transduce prepare`). Both systems start from the same
weights (our initial model of --preset with Marian's sinusoid layout, exported to a
MarianMTModel), see the same batches in the same order (4096 tokens, padding included), use
the same recipe (Adam 0.9/0.98/1e-9, inverse-sqrt warmup, label smoothing 0.1, dropout 0.1)
and get the same budget of training time, run side by side (one process each, --threads
each). Dev BLEU is measured every --curve-minutes (greedy, whole dev set, not counted in the
budget); test BLEU at the end with beam 4, alpha 0.6 (Hugging Face applies its own length
penalty, |Y|^alpha). The scores, curves and sacrebleu signature go to a record
(bench/records/mt/mt-<preset>-<date>.json), the curves' plot to bench/records/mt/curves_<preset>.png.
--seed replicates the run with other initial weights and dropout masks (train.seed for transduce,
torch.manual_seed for the peer; the batches stay the same); a seed other than 1 writes its own
record, curves and run directory (suffix -seed<N>).

A killed run resumes at its first unfinished phase: a finished transduce run (bench/out/mt/
ours-<name>, same configuration, budget spent) is not retrained, and the peer's trained weights
and learning curve are kept in bench/out/mt/peer-<name> (written atomically after its training)
so only the test decoding is redone. Delete those folders to train again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from bench.data.l10n_corpus import DEFAULT_BUDGET_MB, prepared
from bench.data.l10n_corpus import build as build_corpus
from bench.peers.venv import Peer, ensure_peers
from bench.records import BENCH, RECORDS, ROOT, host_line, write_record
from transduce.config import load_config
from transduce.data.batching import BatchSampler, padded_lengths
from transduce.data.dataset import Dataset
from transduce.data.vocab import EOS, PAD
from transduce.decode.torch_engine import decode_all
from transduce.fileio import atomic_directory
from transduce.interop.marian import export_marian, marian_layout
from transduce.metrics import corpus_scores
from transduce.model import build_model
from transduce.store.checkpoint import save_checkpoint, state_tensors, step_checkpoints, vocab_files
from transduce.store.load import load_model
from transduce.store.meta import CheckpointMeta
from transduce.train.schedule import inverse_sqrt_lr

OUT = BENCH / "out" / "mt"


def overrides(args: argparse.Namespace, data: Path) -> list[str]:
    return [
        "model.pos_layout=halves",
        f"data.dataset={data}",
        "data.max_tokens=4096",
        "train.steps=100000000",
        f"train.max_minutes={args.minutes}",
        f"train.validate_every_minutes={args.curve_minutes}",
        "train.validate_every=100000000",
        "train.save_every=100000000",
        f"train.warmup={args.warmup}",
        f"train.threads={args.threads}",
        "train.log_every=100",
        f"train.seed={args.seed}",
    ]


def initial_model(cfg, data: Dataset, name: str) -> Path:
    """The weights both systems start from, as the trainer builds them, exported for the peer."""
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, len(data.src_vocab), len(data.tgt_vocab), PAD)
    meta = CheckpointMeta(src_vocab_size=len(data.src_vocab), tgt_vocab_size=len(data.tgt_vocab))
    save_checkpoint(OUT / f"init-{name}", state_tensors(model), cfg, meta, vocab_files(data.dir), force=True)
    export_marian(OUT / f"init-{name}", OUT / f"init-{name}-hf", force=True)  # the benchmark's scratch
    return OUT / f"init-{name}-hf"


def start_training(preset: str, settings: list[str], run: Path) -> subprocess.Popen:
    """`transduce train` in a fresh run directory, in the background."""
    shutil.rmtree(run, ignore_errors=True)
    return subprocess.Popen(
        [sys.executable, "-m", "transduce", "train", preset, *settings, "--run-dir", str(run), "--no-resume"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def peer_train(args, cfg, data: Dataset, hf_dir: Path, python: Path, keep: Path) -> dict:
    """Drive the peer through the same batches for the same training time; keep its weights and
    dev curve in `keep` (atomically) and return the curve and step count."""
    split = data.splits["train"]
    sampler = BatchSampler(padded_lengths(split), cfg.data.max_tokens, cfg.data.seed)
    peer = Peer(python, "marian_mt.py", hf_dir, args.threads, str(args.seed))
    marian = MarianIds(data)
    refs = references(data, "dev", args.eval_size)
    dev_src = marian.sources(data.splits["dev"], len(refs))
    seconds, step, curve, next_eval = 0.0, 0, [], args.curve_minutes * 60
    stream = iter(sampler)
    while seconds < args.minutes * 60:
        pairs = [split.pair(i) for i in next(stream)]
        step += 1
        lr = inverse_sqrt_lr(step, cfg.model.d_model, cfg.train.warmup, cfg.train.lr_scale)
        res = peer.request(
            {
                "op": "train",
                "src": [marian.ids(s) for s, _ in pairs],
                "tgt": [marian.ids(t) for _, t in pairs],
                "lr": lr,
            }
        )
        seconds += res["seconds"]
        if seconds >= next_eval or seconds >= args.minutes * 60:
            bleu = corpus_scores(marian.decode(peer, dev_src, 1, 0.0), refs).bleu
            curve.append({"train_minutes": seconds / 60, "step": step, "dev_bleu": bleu})
            print("peer", curve[-1], flush=True)
            next_eval += args.curve_minutes * 60
    result = {"curve": curve, "steps": step, "args": vars(args)}
    with atomic_directory(keep, "bench mt", force=True) as tmp:
        peer.request({"op": "save", "dir": str(tmp)})
        (tmp / "result.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    peer.close()
    return result


def peer_test(args, data: Dataset, keep: Path, python: Path, refs: list[str]) -> object:
    """Beam-4 scores of the peer's trained weights on the first len(refs) test pairs."""
    marian = MarianIds(data)
    peer = Peer(python, "marian_mt.py", keep, args.threads, str(args.seed))
    outputs = marian.decode(peer, marian.sources(data.splits["test"], len(refs)), 4, 0.6)
    peer.close()
    return corpus_scores(outputs, refs)


def references(data: Dataset, split: str, size: int | None) -> list[str]:
    """The first `size` (all when None) target sentences of a split, as text."""
    pairs = data.splits[split]
    n = min(size or len(pairs), len(pairs))
    return [data.tgt_vocab.decode(pairs.pair(i)[1].tolist()) for i in range(n)]


class MarianIds:
    """Our token ids <-> the exported MarianMTModel's (its vocabulary puts EOS and PAD first)."""

    def __init__(self, data: Dataset) -> None:
        self.to_marian = {ours: m for m, ours in enumerate(marian_layout(data.src_vocab)[0])}
        self.from_marian = {m: ours for ours, m in self.to_marian.items()}
        self.vocab = data.tgt_vocab

    def ids(self, tokens: torch.Tensor) -> list[int]:
        return [self.to_marian[t] for t in tokens.tolist()] + [self.to_marian[EOS]]

    def sources(self, split, n: int) -> list[list[int]]:
        return [self.ids(split.pair(i)[0]) for i in range(n)]

    def decode(self, peer: Peer, sources: list[list[int]], beam: int, alpha: float) -> list[str]:
        outputs = []
        for start in range(0, len(sources), 64):
            chunk = sources[start : start + 64]
            res = peer.request({"op": "decode", "src": chunk, "beam": beam, "alpha": alpha, "max_new": 100})
            outputs += res["outputs"]
        return [self.vocab.decode([self.from_marian[t] for t in o]) for o in outputs]


def reusable_peer(keep: Path, args: argparse.Namespace) -> dict | None:
    """The kept peer result of an earlier run with the same arguments, if there is one."""
    result = keep / "result.json"
    if not result.exists():
        return None
    kept = json.loads(result.read_text(encoding="utf-8"))
    return kept if kept["args"] == vars(args) else None


def finished_run(run: Path, cfg) -> bool:
    """Whether `run` holds a transduce run with this configuration whose budget is spent."""
    saved = step_checkpoints(run / "checkpoints") if (run / "checkpoints").is_dir() else []
    if not saved:
        return False
    meta = json.loads((saved[-1] / "config.json").read_text(encoding="utf-8"))
    spent = meta.get("metrics", {}).get("train_minutes", 0.0) >= cfg.train.max_minutes
    return spent and meta["config"] == cfg.model_dump(mode="json")


def our_test(run: Path, data: Dataset, refs: list[str]) -> object:
    """Scores of our trained run (its decode settings: beam 4) on the first len(refs) test pairs."""
    loaded = load_model(run)
    test = data.splits["test"]
    sources = [test.pair(i)[0].tolist() for i in range(len(refs))]
    hyps = decode_all(loaded.model, sources, loaded.config.decode)
    outputs = [data.tgt_vocab.decode(h[0].tokens) if h else "" for h in hyps]
    return corpus_scores(outputs, refs)


def plot(ours: list[dict], peer: list[dict], preset: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in (("transduce", ours), ("HF MarianMTModel", peer)):
        ax.plot([c["train_minutes"] for c in curve], [c["dev_bleu"] for c in curve], "o-", label=name)
    ax.set_xlabel("training minutes")
    ax.set_ylabel("dev BLEU (greedy)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title(f"En-De l10n corpus, {preset} preset, same batches and recipe")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="small", help="the transduce preset both systems are built from")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--curve-minutes", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=400, help="steps; CPU budgets give few thousand steps")
    parser.add_argument("--seed", type=int, default=1, help="initial weights and dropout masks of both")
    parser.add_argument(
        "--eval-size", type=int, default=None, help="peer dev and both test sets (smoke runs)"
    )
    args = parser.parse_args()
    data_dir = prepared(build_corpus("de", DEFAULT_BUDGET_MB), "en", "de")
    data = Dataset(data_dir)
    OUT.mkdir(parents=True, exist_ok=True)
    cfg = load_config(args.preset, overrides(args, data_dir))
    name = args.preset + ("" if args.seed == 1 else f"-seed{args.seed}")
    hf_dir = initial_model(cfg, data, name)
    run, keep = OUT / f"ours-{name}", OUT / f"peer-{name}"
    ours = None if finished_run(run, cfg) else start_training(args.preset, overrides(args, data_dir), run)
    python = ensure_peers()
    peer = reusable_peer(keep, args) or peer_train(args, cfg, data, hf_dir, python, keep)
    if ours is not None and ours.wait() != 0:
        sys.exit(f"our training failed; see {run / 'train.log'}")
    test_refs = references(data, "test", args.eval_size)
    peer_report = peer_test(args, data, keep, python, test_refs)
    last = step_checkpoints(run / "checkpoints")[-1]
    state = json.loads((last / "trainer.json").read_text())
    our_curve = [
        {"train_minutes": h["train_minutes"], "step": h["step"], "dev_bleu": h["dev_bleu"]}
        for h in state["state"]["history"]
    ]
    our_report = our_test(run, data, test_refs)
    curves = RECORDS / "mt" / f"curves_{name}.png"
    plot(our_curve, peer["curve"], name, curves)
    write_record(
        "mt",
        f"mt-{name}",
        title="transduce against a Hugging Face MarianMTModel, same recipe",
        command=f"python -m bench.mt.vs_marian --preset {args.preset} --minutes {args.minutes} "
        f"--curve-minutes {args.curve_minutes} --threads {args.threads} --warmup {args.warmup} "
        f"--seed {args.seed}",
        host=host_line(args.threads),
        setup=(
            f"Each system one process with {args.threads} thread(s), run side by side. Data: offline "
            f"l10n En->De corpus ({len(data.splits['train'])} training pairs after filtering), shared BPE "
            f"8000. `{args.preset}` preset, same initial weights, same batches, same recipe, {args.minutes} "
            f"minutes of training time each. Test: {len(test_refs)} pairs, beam 4. BLEU signature: "
            f"{our_report.bleu_signature}. Curves: dev BLEU (greedy) against training minutes, "
            f"{curves.relative_to(ROOT)}."
        ),
        rows=[
            {
                "system": "transduce",
                "steps": our_curve[-1]["step"],
                "bleu": round(our_report.bleu, 2),
                "chrf": round(our_report.chrf, 2),
            },
            {
                "system": "HF MarianMTModel",
                "steps": peer["steps"],
                "bleu": round(peer_report.bleu, 2),
                "chrf": round(peer_report.chrf, 2),
            },
        ],
        curve=[
            {
                "minutes_ours": round(a["train_minutes"], 1),
                "bleu_ours": round(a["dev_bleu"], 2),
                "minutes_hf": round(b["train_minutes"], 1),
                "bleu_hf": round(b["dev_bleu"], 2),
            }
            for a, b in zip(our_curve, peer["curve"], strict=False)
        ],
    )


if __name__ == "__main__":
    main()
