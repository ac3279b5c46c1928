"""transduce's recipes for CPU-sized MT budgets, and one table against the peer toolkits.

    python -m bench.mt.recipes --recipes small small+prenorm --seeds 1 2 --minutes 60   # missing runs
    python -m bench.mt.recipes --report                                        # table and curves only

Data: the offline l10n En->De corpus (bench/data/l10n_corpus.py), prepared once with `transduce
prepare` (one shared sentencepiece vocabulary of --vocab-size pieces) into bench/out/
l10n-de-data (bench/out/l10n-de-data-<N> for another size). A recipe is a preset plus changes
joined by '+': `small` is bench/mt/vs_marian.py's recipe (the small preset: post-norm, 3+3 layers of 256,
dropout 0.1, label smoothing 0.1, 4096-token batches, warmup 400), `small+prenorm+dropout0`
the same with two changes (CHANGES lists them), so that an ablation is a list of recipes that
differ by one change. `small-fast` is the preset of that name with 4,000 pieces (what the README
recommends for CPU-hour runs); its ablation is `small-fast+<change>` for changes that each undo
or vary one of its choices (postnorm, dropout0.1, ls0, lr2, lr4, warmup1000, batch4k, layers3,
width192, vocab2k, vocab8k, avg5), and the Universal Transformer at its budget (ut: one shared
layer per stack at its depth of two; ut4: four steps; act4: ACT with at most four, issue 48;
actmin2: with act4, at least two steps, issue 91; ff1408: the shared layer with the
Transformer's parameters),
each record naming the model's parameters and forward FLOPs per target token. The preset itself
averages its last five checkpoints (train.average_last); the bench's `small-fast` scores its
final weights instead
(train.average_last=null), so at 60 minutes `small-fast+avg5` is the preset as it ships. Each run is
`transduce train` for --minutes of training time on --threads thread(s) (train.max_minutes:
validations are not counted; their wall time is reported), with dev BLEU (greedy, the whole dev set)
every --minutes / --curve-points; then the final weights (or, with `avg5`, the mean of the last five
checkpoints, saved every --minutes / 20, that train.average_last=5 writes at the end) translate the
raw test lines with beam 4 as `transduce translate` does (tokenisation included) and are scored with
sacrebleu against the raw references, as bench/mt/toolkits.py scores the peers. An averaging run's
record also scores its own last checkpoint (test.last_checkpoint: what the averaging bought on one
trajectory); records written before that field get it when their command runs again.

One JSON per run goes to bench/records/mt-compare/ (committed: the grid fills up over several
sessions), named ours-<recipe>-seed<N>-<M>min.json, beside the peers' (bench/mt/toolkits.py
writes there too); runs with a record are skipped, an interrupted run resumes (its run
directory in bench/out/recipes/ is kept). At the end, or with --report alone, the records make
one table (bench/mt/compare.py; docs/results.md shows it too): per system (a toolkit's recipe,
or ours) and budget, the number of seeds, the mean and standard deviation of test BLEU and chrF,
updates and target tokens seen; and curves.png beside the records, dev BLEU against training
minutes for every run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import transduce
from bench.data.l10n_corpus import DEFAULT_BUDGET_MB, prepared
from bench.data.l10n_corpus import build as build_corpus
from bench.mt import compare
from bench.records import BENCH, HOST_HELP, ROOT, cpu_name, host_probe, host_suffix, markdown_table
from transduce.config import ModelConfig, load_config
from transduce.cost import model_cost
from transduce.data.corpus import read_lines
from transduce.fileio import write_text_atomic
from transduce.metrics import BleuReport, corpus_scores
from transduce.store.checkpoint import step_checkpoints
from transduce.store.load import LoadedModel

RECORDS = compare.FOLDER
OUT = BENCH / "out" / "recipes"
SRC, TGT = "en", "de"


@dataclass(frozen=True)
class Change:
    """One change to a recipe: config overrides, whether to average the last checkpoints, and the
    shared vocabulary's size (None: --vocab-size)."""

    overrides: tuple[str, ...]
    average: bool = False
    vocab_size: int | None = None
    why: str = ""


CHANGES = {
    "prenorm": Change(("model.norm=pre",), why="layer norm before each sublayer: steadier early updates"),
    "dropout0": Change(
        ("model.dropout=0",), why="an hour sees the data about once: no overfitting to regularise"
    ),
    "ls0": Change(("train.label_smoothing=0",), why="label smoothing off"),
    "batch2k": Change(("data.max_tokens=2048",), why="twice the updates of half the size"),
    "batch8k": Change(("data.max_tokens=8192",), why="half the updates of twice the size"),
    "lr2": Change(("train.lr_scale=2",), why="twice the learning rate at every step"),
    "lr0.5": Change(("train.lr_scale=0.5",), why="half the learning rate at every step"),
    "warmup200": Change(("train.warmup=200",), why="a shorter warmup (and a higher peak)"),
    "warmup1000": Change(("train.warmup=1000",), why="a longer warmup (and a lower peak)"),
    "deep": Change(
        ("model.encoder_layers=6", "model.decoder_layers=2"), why="depth to the encoder, 6+2 layers"
    ),
    "shallow": Change(
        ("model.encoder_layers=2", "model.decoder_layers=2"),
        why="2+2 layers of 256: more updates in the same time",
    ),
    "wide": Change(
        (
            "model.d_model=384",
            "model.d_ff=1536",
            "model.heads=6",
            "model.encoder_layers=2",
            "model.decoder_layers=2",
        ),
        why="2+2 layers of 384: fewer, wider layers",
    ),
    "narrow": Change(
        ("model.d_model=128", "model.d_ff=512", "model.heads=4"),
        why="layers of 128 (d_ff 512): a quarter of the multiply work per token, so the hour sees"
        " more data (an hour of one core, ~2e14 FLOPs, is compute-optimal near 1.3M parameters)",
    ),
    "avg5": Change((), average=True, why="the mean of the last five checkpoints (every 1/20 of the budget)"),
    "vocab4k": Change((), vocab_size=4000, why="4,000 shared pieces: cheaper output layer, longer inputs"),
    "vocab16k": Change((), vocab_size=16000, why="16,000 shared pieces: shorter inputs, costlier output"),
    # The ablation of small-fast: each undoes or varies one of its choices.
    "postnorm": Change(("model.norm=post",), why="layer norm after each sublayer (the 2017 paper's)"),
    "dropout0.1": Change(("model.dropout=0.1",), why="dropout 0.1 (the paper's rate for its base model)"),
    "lr4": Change(("train.lr_scale=4",), why="four times the paper's learning rate at every step"),
    "batch4k": Change(("data.max_tokens=4096",), why="4096-token batches: fewer, larger updates"),
    "layers3": Change(
        ("model.encoder_layers=3", "model.decoder_layers=3"), why="3+3 layers: deeper, fewer updates"
    ),
    "width192": Change(
        ("model.d_model=192", "model.d_ff=768"), why="layers of 192 (d_ff 768): wider, fewer updates"
    ),
    "vocab2k": Change((), vocab_size=2000, why="2,000 shared pieces: cheaper output layer, longer inputs"),
    "vocab8k": Change((), vocab_size=8000, why="8,000 shared pieces: shorter inputs, costlier output"),
    # The Universal Transformer at the Transformer's budget (issue 48): one shared layer per stack.
    "ut": Change(
        ("model.arch=universal", "model.encoder_steps=2", "model.decoder_steps=2"),
        why="a Universal Transformer: one shared layer per stack applied twice (small-fast's depth: "
        "its FLOPs per token, fewer parameters)",
    ),
    "ut4": Change(
        ("model.arch=universal", "model.encoder_steps=4", "model.decoder_steps=4"),
        why="a Universal Transformer applying its shared layer four times: twice the FLOPs per token",
    ),
    "act4": Change(
        ("model.arch=universal", "model.act=true", "model.encoder_steps=4", "model.decoder_steps=4"),
        why="a Universal Transformer with ACT, at most four steps per position (tensor2tensor's "
        "adaptive cap for two layers)",
    ),
    "ff1408": Change(
        ("model.d_ff=1408",),
        why="with ut or act4: the shared layer's d_ff at 1,408, which gives the UT the Transformer's"
        " 1.44M parameters (at 1.6x its FLOPs a token): whether parameters are what it lacks",
    ),
    "actmin2": Change(
        ("model.act_min_steps=2",),
        why="with act4: every position takes at least two steps a stack before it may halt (issue 91: "
        "ACT's encoder otherwise halts after one)",
    ),
}
COST_LENGTHS = (32, 32)  # source and target tokens at which a record's FLOPs per token are counted


@dataclass(frozen=True)
class Recipe:
    """What a recipe name stands for: a preset, overrides to it, whether to average the last
    checkpoints, and the shared vocabulary's size (None: --vocab-size)."""

    preset: str
    overrides: tuple[str, ...] = ()
    average: bool = False
    vocab_size: int | None = None


BASE = {
    "small": Recipe("small", ("train.warmup=400", "model.pos_layout=halves")),  # bench.mt.vs_marian's recipe
    "small-fast": Recipe("small-fast", vocab_size=4000),  # the preset as the README recommends it
}


def recipe(name: str) -> Recipe:
    """The preset, overrides, averaging and vocabulary of a recipe name such as
    `small+prenorm+dropout0` (the last change that sets a vocabulary size wins, else the base's)."""
    base, *changes = name.split("+")
    if base not in BASE:
        raise SystemExit(f"unknown base recipe {base!r}; allowed: {', '.join(BASE)}")
    unknown = [c for c in changes if c not in CHANGES]
    if unknown:
        raise SystemExit(f"unknown change(s) {', '.join(unknown)}; allowed: {', '.join(CHANGES)}")
    start = BASE[base]
    sizes = [start.vocab_size, *(CHANGES[c].vocab_size for c in changes)]
    sizes = [size for size in sizes if size is not None]
    return Recipe(
        start.preset,
        (*start.overrides, *(o for c in changes for o in CHANGES[c].overrides)),
        start.average or any(CHANGES[c].average for c in changes),
        sizes[-1] if sizes else None,
    )


def corpus_and_data(corpus: Path | None, vocab_size: int) -> tuple[Path, Path]:
    """The corpus (raw text; by default the l10n corpus, built when missing) and its prepared
    dataset with a shared vocabulary of `vocab_size`."""
    corpus = corpus.resolve() if corpus is not None else build_corpus(TGT, DEFAULT_BUDGET_MB)
    return corpus, prepared(corpus, SRC, TGT, vocab_size)


def train_command(chosen: Recipe, seed: int, args: argparse.Namespace, data: Path, run: Path) -> list[str]:
    average = chosen.average
    settings = [
        *chosen.overrides,
        f"data.dataset={data}",
        "train.steps=100000000",
        f"train.max_minutes={args.minutes}",
        f"train.validate_every_minutes={args.minutes / args.curve_points}",
        "train.validate_every=100000000",
        f"train.save_every_minutes={args.minutes / (20 if average else 4)}",
        "train.save_every=100000000",
        f"train.keep_last={5 if average else 1}",
        f"train.average_last={5 if average else 'null'}",
        f"train.threads={args.threads}",
        "train.log_every=100",
        f"train.seed={seed}",
    ]
    load_config(chosen.preset, settings)  # a bad recipe fails here, not in the background
    return [sys.executable, "-m", "transduce", "train", chosen.preset, *settings, "--run-dir", str(run)]


def model_size(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> dict:
    """Parameters and forward FLOPs per target token (transduce.cost, at COST_LENGTHS; a model
    with ACT at its step cap, an upper bound), for comparing architectures at equal time."""
    report = model_cost(cfg, src_vocab, tgt_vocab, *COST_LENGTHS)
    return {
        "params": report.total_params,
        "forward_flops_per_token": report.forward_flops,
        "cost_lengths": list(COST_LENGTHS),
    }


def final_weights(run: Path, average: bool) -> Path:
    """The run's last checkpoint, or the average of its last five (train.average_last wrote it)."""
    return run / "averaged" if average else step_checkpoints(run / "checkpoints")[-1]


def test_scores(
    weights: Path, sources: list[str], refs: list[str], threads: int
) -> tuple[LoadedModel, BleuReport, float]:
    """Translate the test sources with `weights` as a user of `import transduce` does (the
    checkpoint's decoding settings) and score them: the loaded model, the scores and the decoding
    seconds."""
    loaded = transduce.load(weights, threads=threads)
    began = time.monotonic()
    outputs = transduce.translate(loaded, sources)
    seconds = time.monotonic() - began
    return loaded, corpus_scores(outputs, refs), seconds


def last_checkpoint_score(last: Path, sources: list[str], refs: list[str], threads: int) -> dict:
    """The test scores of an averaging run's own last checkpoint: what the averaging itself
    bought, on one training trajectory."""
    _, scores, _ = test_scores(last, sources, refs, threads)
    return {"weights": last.name, "bleu": scores.bleu, "chrf": scores.chrf}


def add_last_checkpoint_score(record: Path, run: Path, args: argparse.Namespace) -> None:
    """Give an averaging run's record, written before it carried one, its last checkpoint's
    test scores (atomically; a record whose run directory is gone is left as it is)."""
    result = json.loads(record.read_text(encoding="utf-8"))
    if "last_checkpoint" in result["test"] or not (run / "checkpoints").is_dir():
        return
    corpus, _ = corpus_and_data(args.corpus, result["vocab_size"])
    lines = result["test"]["lines"]
    sources = read_lines(corpus / f"test.{SRC}")[:lines]
    refs = read_lines(corpus / f"test.{TGT}")[:lines]
    last = step_checkpoints(run / "checkpoints")[-1]
    score = result["test"]["last_checkpoint"] = last_checkpoint_score(last, sources, refs, args.threads)
    write_text_atomic(record, json.dumps(result, indent=1))
    print(f"{record.stem}: its last checkpoint alone, test BLEU {score['bleu']:.2f}")


def run_one(name: str, seed: int, args: argparse.Namespace) -> Path:
    """Train, decode and score one (recipe, seed); its record's path."""
    label = f"ours-{name}-seed{seed}-{args.minutes:g}min" + host_suffix(args.host)
    record = args.records / f"{label}.json"
    chosen = recipe(name)
    if record.exists():
        if chosen.average:
            add_last_checkpoint_score(record, OUT / label, args)
        return record
    vocab_size = chosen.vocab_size or args.vocab_size
    corpus, data = corpus_and_data(args.corpus, vocab_size)
    run = OUT / label
    command = train_command(chosen, seed, args, data, run)
    probe = host_probe()
    wall = time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)  # resumes an interrupted run
    wall_minutes = (time.monotonic() - wall) / 60
    load = os.getloadavg()[2]  # what else ran: a time budget buys fewer updates on a busy machine
    last = step_checkpoints(run / "checkpoints")[-1]
    state = json.loads((last / "trainer.json").read_text(encoding="utf-8"))["state"]
    weights = final_weights(run, chosen.average)
    sources = read_lines(corpus / f"test.{SRC}")[: args.test_lines]
    refs = read_lines(corpus / f"test.{TGT}")[: args.test_lines]
    loaded, scores, decode_seconds = test_scores(weights, sources, refs, args.threads)
    unaveraged = {}
    if chosen.average:  # what the averaging itself bought: the same run's last checkpoint alone
        unaveraged["last_checkpoint"] = last_checkpoint_score(last, sources, refs, args.threads)
    result = {
        "toolkit": "transduce",
        "recipe": name,
        "seed": seed,
        "direction": f"{SRC}-{TGT}",
        "vocab_size": vocab_size,
        "date": time.strftime("%Y-%m-%d"),  # when the record was written (the results page shows it)
        "budget_minutes": args.minutes,
        "threads": args.threads,
        "minutes": state["train_seconds"] / 60,
        "wall_minutes_this_invocation": wall_minutes,
        "machine": {"cpu": cpu_name(), "cpus": os.cpu_count(), "probe_before_training": probe},
        **({"host": args.host} if args.host else {}),
        "load_average_15min_at_end": load,
        "updates": state["step"],
        "target_tokens": state.get("tokens"),
        "model": model_size(loaded.config.model, len(loaded.src_vocab), len(loaded.tgt_vocab)),
        "test": {
            "lines": len(refs),
            "beam": loaded.config.decode.beam,
            "alpha": loaded.config.decode.alpha,
            "weights": weights.name,
            "bleu": scores.bleu,
            "chrf": scores.chrf,
            "bleu_signature": scores.bleu_signature,
            "chrf_signature": scores.chrf_signature,
            "decode_seconds": decode_seconds,
            **unaveraged,
        },
        "curve": [
            {
                "minutes": h["train_minutes"],
                "step": h["step"],
                "dev_bleu": h["dev_bleu"],
                "dev_ppl": h["dev_ppl"],
            }
            for h in state["history"]
            if "dev_bleu" in h
        ],
        "curve_note": "dev: the whole dev set, greedy (BLEU) and teacher-forced (perplexity); "
        "minutes of training (validations not counted)",
        "commands": [" ".join(map(str, command))],
    }
    args.records.mkdir(parents=True, exist_ok=True)
    write_text_atomic(record, json.dumps(result, indent=1))
    print(f"{label}: {result['updates']} updates, test BLEU {scores.bleu:.2f} chrF {scores.chrf:.2f}")
    return record


def report(records: list[dict], folder: Path) -> list[str]:
    """One table over every recorded run, grouped by system and budget, and the curves' PNG."""
    grouped = compare.groups(records)
    signatures = sorted({r["test"]["bleu_signature"] for r in records})
    shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder
    lines = [
        "MT per unit of compute: our recipes and the peer toolkits'",
        "",
        "Commands: `python -m bench.mt.recipes ...` (ours) and `python -m bench.mt.toolkits ...` (peers); "
        f"each run's exact commands are in its record, `{shown}/`. Data: the offline l10n En->De corpus "
        "(bench/data/l10n_corpus.py); test: its raw test lines, beam 4, scored with sacrebleu against "
        "the raw references. Budget: ours, training time (validations not counted); peers, the wall time "
        "of the toolkit's training process (start-up and its own validations included).",
        "",
        *markdown_table(compare.rows(grouped), compare.COLUMNS),
        "",
        "Mean ± standard deviation over seeds. Dev perplexity: ours on the whole dev set at the "
        "end of training, a peer's at its last own validation (the first 500 dev lines); only "
        "comparable between runs of one vocabulary. BLEU signature(s): "
        + "; ".join(f"`{s}`" for s in signatures)
        + f". Learning curves (dev BLEU against minutes, every run): `{shown / 'curves.png'}`. "
        "Recipes: " + "; ".join(f"`{k}` {c.why}" for k, c in CHANGES.items()) + ".",
    ]
    plot(grouped, folder / "curves.png")
    return lines


def plot(groups: dict[tuple[str, float], list[dict]], path: Path) -> None:
    """Dev BLEU against training minutes, one panel per budget (the 60-minute comparison apart
    from the shorter screens), one colour and marker per system, the legend under each panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = sorted({budget for _, budget in groups}, reverse=True)
    most = max(sum(b == budget for _, b in groups) for budget in budgets)
    height = 5 + 0.15 * most  # room for the legends
    fig, axes = plt.subplots(1, len(budgets), figsize=(7 * len(budgets), height), squeeze=False)
    for ax, budget in zip(axes[0], budgets, strict=True):
        names = sorted(name for name, b in groups if b == budget)
        for k, name in enumerate(names):
            style = {"color": plt.get_cmap("tab20")(k % 20), "marker": "osD^v<>"[k // 20 % 7]}
            for i, r in enumerate(groups[(name, budget)]):
                points = [p for p in r["curve"] if "dev_bleu" in p]
                ax.plot(
                    [p["minutes"] for p in points],
                    [p["dev_bleu"] for p in points],
                    "-",
                    label=name if i == 0 else None,
                    **style,
                )
        ax.set_title(f"{budget:g}-minute runs (every seed)")
        ax.set_xlabel("training minutes")
        ax.set_ylabel("dev BLEU")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--recipes", nargs="*", default=["small"], help="recipe names: a base, then +change..."
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="train.seed of each run")
    parser.add_argument("--minutes", type=float, default=60.0, help="training-time budget of a run")
    parser.add_argument("--curve-points", type=int, default=4, help="dev validations during training")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--vocab-size", type=int, default=8000, help="shared sentencepiece pieces")
    parser.add_argument("--test-lines", type=int, help="the first N test lines only (smoke runs)")
    parser.add_argument(
        "--corpus",
        type=Path,
        help="raw train/dev/test.{en,de} to use instead of the l10n corpus (smoke runs)",
    )
    parser.add_argument("--records", type=Path, default=RECORDS, help="where the runs' JSON records go")
    parser.add_argument("--host", help=HOST_HELP)
    parser.add_argument("--report", action="store_true", help="train nothing: the table from the records")
    args = parser.parse_args()
    for name in args.recipes:
        recipe(name)  # every name checked before the first hour is spent
    if not args.report:
        for seed in args.seeds:  # seed by seed: a partial grid already covers every recipe once
            for name in args.recipes:
                run_one(name, seed, args)
    records = [json.loads(f.read_text(encoding="utf-8")) for f in sorted(args.records.glob("*.json"))]
    if not records:
        raise SystemExit(f"no records in {args.records}")
    print("\n".join(report(records, args.records)))
    print("\n`python -m bench.results` updates docs/results.md from the records")


if __name__ == "__main__":
    main()
