"""One multilingual model against bilingual ones at equal training compute (issue 89): English->X
for X in --langs on the l10n corpora (Debian's catalogs, bench/data/l10n_corpus.py), the same
`small-fast` recipe for every model.

    python -m bench.mt.multilingual --langs de fr es --steps 5000 --seeds 1 2 --threads 1
    python -m bench.mt.multilingual --report          # the table of the records only
    python -m bench.mt.multilingual --equal-compute   # the multilingual runs at the bilinguals' FLOPs

`--systems bilingual` and `--systems multilingual` split the work between two invocations (two
cores; each model trains on one thread either way).

Each bilingual model trains for --steps updates on its own pair (4,000 shared pieces, the
recipe's); the multilingual one for --steps x the number of pairs on all of them (`transduce
prepare --pair`: one vocabulary of --multi-vocab pieces, >>xxx<< tags; `data.pair_temperature`
--temperature). The budget is counted in updates of the same model on batches of the same token
budget, so the two sides do the same arithmetic whatever the load on the host (the multilingual
output layer is larger by its vocabulary: the records give each model's parameters, and the
training minutes). Every model is scored on each of its pairs' 2,000-line test set:
`transduce.translate` (beam 4, the multilingual model with `tgt_lang`), sacrebleu BLEU and chrF
against the raw references. One JSON per run in bench/records/mt-multi/ (runs with a record are
skipped; an interrupted run resumes from its run directory in bench/out/multi/).

The corpora are built from the same catalogs, so their English sides overlap: a test sentence of
one pair can be a training source of another (the split keeps no source in two splits of one
pair only). The multilingual model may have read such a source, never its reference.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

import transduce
from bench.data.l10n_corpus import DEFAULT_BUDGET_MB, prepared
from bench.data.l10n_corpus import build as build_corpus
from bench.records import BENCH, OUT, cpu_name, host_line, markdown_table, spread
from transduce.data.corpus import read_lines
from transduce.data.languages import parse_pair
from transduce.data.prepare import PairInput, PrepareOptions, prepare_pairs
from transduce.fileio import write_text_atomic
from transduce.metrics import corpus_scores
from transduce.store.checkpoint import CHECKPOINTS, step_checkpoints

RECORDS = BENCH / "records" / "mt-multi"
RUNS = OUT / "multi"
SRC = "en"
RECIPE = "small-fast"


def corpora(langs: list[str]) -> dict[str, Path]:
    """Each language's raw corpus, built once (minutes and Debian's registry the first time)."""
    return {lang: build_corpus(lang, DEFAULT_BUDGET_MB) for lang in langs}


def multilingual_data(found: dict[str, Path], vocab: int) -> Path:
    """One dataset of every pair, with one shared vocabulary and the pairs' tags."""
    pairs = [PairInput(*parse_pair(f"{SRC}-{lang}={folder}")) for lang, folder in found.items()]
    out = OUT / f"l10n-{'-'.join(found)}-data-{vocab}"
    prepare_pairs(pairs, out, PrepareOptions(SRC, "xx", vocab_size=vocab), show_progress=False)
    return out


def train(name: str, dataset: Path, steps: int, seed: int, args: argparse.Namespace) -> tuple[Path, dict]:
    """`small-fast` on `dataset` for `steps` updates (resumed where a run was cut): the run, and
    its last validation's figures (training minutes among them)."""
    run = RUNS / name
    overrides = [
        f"data.dataset={dataset}",
        f"train.steps={steps}",
        f"train.seed={seed}",
        f"train.threads={args.threads}",
        f"data.pair_temperature={args.temperature}",
        f"train.validate_every={steps}",
    ]
    return run, transduce.fit(RECIPE, run, overrides, progress=False)


def test_scores(run: Path, corpus: Path, lang: str, tagged: bool) -> dict:
    """BLEU and chrF on the test set of English->`lang` (beam 4); `tagged`: a multilingual model,
    asked for `lang` by its tag."""
    model = transduce.load(run, threads=1)
    sources, refs = read_lines(corpus / f"test.{SRC}"), read_lines(corpus / f"test.{lang}")
    began = time.perf_counter()
    outputs = transduce.translate(model, sources, beam=4, tgt_lang=lang if tagged else None)
    scores = corpus_scores(outputs, refs)
    return {"bleu": scores.bleu, "chrf": scores.chrf, "decode_s": time.perf_counter() - began}


def record(name: str, result: dict) -> None:
    RECORDS.mkdir(parents=True, exist_ok=True)
    write_text_atomic(RECORDS / f"{name}.json", json.dumps(result, indent=1) + "\n")


def run_seed(found: dict[str, Path], multi: Path, seed: int, args: argparse.Namespace) -> None:
    """The bilingual models and the multilingual one of one seed, each unless recorded."""
    steps = args.steps
    common = {"seed": seed, "recipe": RECIPE, "host": host_line(args.threads), "cpu": cpu_name()}
    common |= {"date": time.strftime("%Y-%m-%d"), "command": args.command}
    for lang, corpus in found.items():
        name = f"bilingual-{SRC}-{lang}-seed{seed}-{steps}steps"
        if "bilingual" in args.systems and not (RECORDS / f"{name}.json").exists():
            run, metrics = train(name, prepared(corpus, SRC, lang, vocab_size=4000), steps, seed, args)
            pairs = {lang: test_scores(run, corpus, lang, False)}
            record(
                name, {**common, "system": "bilingual", "steps": steps, "pairs": pairs, **facts(run, metrics)}
            )
    name = f"multilingual-{SRC}-{'-'.join(found)}-T{args.temperature:g}-seed{seed}-{steps * len(found)}steps"
    if "multilingual" in args.systems and not (RECORDS / f"{name}.json").exists():
        run, metrics = train(name, multi, steps * len(found), seed, args)
        pairs = {lang: test_scores(run, corpus, lang, True) for lang, corpus in found.items()}
        extra = {"temperature": args.temperature, "vocab": args.multi_vocab, **facts(run, metrics)}
        record(
            name, {**common, "system": "multilingual", "steps": steps * len(found), "pairs": pairs, **extra}
        )


def flops_per_token(run: Path) -> float:
    """Training FLOPs per target token, as the run's log reports them (train/tflops over
    train/tokens_per_s, the median over its lines): the arithmetic of the model on its data."""
    found = [
        float(m.group(2)) * 1e12 / float(m.group(1))
        for line in (run / "train.log").read_text(encoding="utf-8").splitlines()
        if (m := re.search(r"train/tokens_per_s=([\d.e+]+) train/tflops=([\d.e+-]+)", line))
    ]
    return statistics.median(found)


def equal_compute(name: str, found: dict[str, Path]) -> None:
    """A multilingual record gets the scores of its checkpoint whose training FLOPs come nearest
    the bilingual models' of its seed, all three together: the comparison at equal compute
    (equal updates give the multilingual model more: its output layer is larger)."""
    result = json.loads((RECORDS / f"{name}.json").read_text(encoding="utf-8"))
    bilingual = [
        f"bilingual-{SRC}-{lang}-seed{result['seed']}-{result['steps'] // len(found)}steps" for lang in found
    ]
    budget = sum(
        flops_per_token(RUNS / b)
        * json.loads((RECORDS / f"{b}.json").read_text(encoding="utf-8"))["train_tokens"]
        for b in bilingual
    )
    per_token = flops_per_token(RUNS / name)
    kept = [
        (json.loads((c / "trainer.json").read_text(encoding="utf-8"))["state"], c)
        for c in step_checkpoints(RUNS / name / CHECKPOINTS)
    ]
    state, checkpoint = min(kept, key=lambda k: abs(per_token * k[0]["tokens"] - budget))
    pairs = {lang: test_scores(checkpoint, corpus, lang, True) for lang, corpus in found.items()}
    result["equal_compute"] = {"step": state["step"], "flops_ratio": per_token * state["tokens"] / budget}
    result["equal_compute"] |= {"train_minutes": state["train_seconds"] / 60, "pairs": pairs}
    record(name, result)


def facts(run: Path, metrics: dict) -> dict:
    """What a record says of the training: minutes, target tokens, parameters."""
    model = transduce.load(run)
    parameters = sum(p.numel() for p in model.model.parameters())
    return {
        "train_minutes": metrics.get("train_minutes"),
        "train_tokens": metrics.get("train_tokens"),
        "parameters": parameters,
    }


def table() -> list[dict]:
    """Per system and pair: seeds, mean and spread of test BLEU and chrF."""
    runs = [json.loads(p.read_text()) for p in sorted(RECORDS.glob("*.json"))]
    cells: dict[tuple[str, str, float], list[dict]] = {}
    for r in runs:
        for lang, s in r["pairs"].items():
            cells.setdefault((r["system"], lang, r["steps"]), []).append(s)
    return [
        {"system": system, "pair": f"{SRC}-{lang}", "updates": f"{steps:,}", "seeds": len(found)}
        | {"BLEU": spread([s["bleu"] for s in found]), "chrF": spread([s["chrf"] for s in found])}
        for (system, lang, steps), found in sorted(cells.items())
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--langs", nargs="+", default=["de", "fr", "es"])
    parser.add_argument("--steps", type=int, default=5000, help="each bilingual model's updates")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="the multilingual model's data.pair_temperature"
    )
    parser.add_argument("--multi-vocab", type=int, default=8000, help="the multilingual vocabulary's pieces")
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=["bilingual", "multilingual"],
        default=["bilingual", "multilingual"],
        help="the models to train (two invocations, one each, share two cores)",
    )
    parser.add_argument(
        "--equal-compute",
        action="store_true",
        help="score each recorded multilingual run's checkpoint nearest the training FLOPs of its seed's "
        "bilingual models, all three together (its run directory's checkpoints), into its record",
    )
    parser.add_argument("--report", action="store_true", help="print the records' table only")
    args = parser.parse_args()
    args.command = "python -m bench.mt.multilingual " + " ".join(
        f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
        for k, v in vars(args).items()
        if k not in ("report", "systems", "equal_compute")
    )
    if args.equal_compute:
        found = corpora(args.langs)
        for path in sorted(RECORDS.glob("multilingual-*-seed*.json")):
            if "equal_compute" not in json.loads(path.read_text(encoding="utf-8")):
                equal_compute(path.stem, found)
    elif not args.report:
        found = corpora(args.langs)
        multi = multilingual_data(found, args.multi_vocab)
        for seed in args.seeds:
            run_seed(found, multi, seed, args)
    print("\n".join(markdown_table(table())))


if __name__ == "__main__":
    main()
