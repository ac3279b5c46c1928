"""Domain adaptation on real data: a general En->De model fine-tuned on Debian package descriptions,
directly and through the OPUS-MT (MarianMTModel) format.

    python -m bench.mt.domain [--general-steps 700] [--finetune-steps 240] [--threads 1]

Stages, each run through the `transduce` command line and skipped when already done (results are
kept in OUT/results.json, OUT = bench/out/domain by default; an interrupted training resumes from
its last checkpoint):

 1. corpora: the l10n corpus (bench/data/l10n_corpus.py, --l10n-budget-mb of .debs) and the DDTP
    package-description corpus (bench/data/ddtp_corpus.py);
 2. `prepare` the l10n corpus (shared BPE, --vocab-size);
 3. `train` the general model: the `small` preset with `model.pos_layout=halves` (with the
    preset's post-norm, sinusoidal positions and tied embeddings it exports to Marian), for
    --general-steps updates of 4096 tokens (dev loss and greedy BLEU every 100);
 4. `prepare` the DDTP corpus with `--vocab-from` the general run;
 5. `translate` + `evaluate --hyp` the general model on both test sets (beam 4, alpha 0.6);
 6. fine-tune: `train GENERAL data.dataset=DDTP --init-from GENERAL` for --finetune-steps
    (fresh optimizer and schedule; dev BLEU every --validate-every steps chooses the best
    checkpoint, `train.patience` stops early), then evaluate its best checkpoint on both tests;
 7. the OPUS-MT path: `export --format marian` of the general model, `import marian` of the
    export, evaluation of the imported model, `prepare --vocab-from` the imported checkpoint
    (and whether its token arrays equal the direct path's), the same fine-tuning from it and its
    evaluation.

Budgets are counted in updates, not minutes: `train.max_minutes` counts wall time, which on a
shared machine measures the other load as much as the work. At one thread on a free core the
`small` preset makes about 19.5 updates a minute (bench/mt/vs_marian.py: 1170-1185 in 60 minutes), so the
defaults are about 35 and 12 CPU minutes; the CPU seconds each stage's commands actually used are
recorded. Every command runs with one thread (`train.threads`, `--threads`, OMP_NUM_THREADS).
Prints a markdown table and the commands, and writes them with the numbers to OUT/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.data.ddtp_corpus import build as build_ddtp
from bench.data.l10n_corpus import build as build_l10n
from bench.records import OUT, host_line, write_record
from transduce.store.checkpoint import step_checkpoints

BIG = 100_000_000


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out: Path = args.out
        self.out.mkdir(parents=True, exist_ok=True)
        self.path = self.out / "results.json"
        self.results = json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else {}
        self.results.setdefault("stages", {})
        self.results.setdefault("commands", [])
        self.env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.results, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def stage(self, name: str, work) -> dict:
        """Run `work()` unless stage `name` finished in an earlier run; keep its result."""
        done = self.results["stages"].get(name)
        if done is not None:
            print(f"[skip] {name}", flush=True)
            return done
        print(f"[run] {name}", flush=True)
        began, cpu = time.time(), children_cpu()
        result = work() or {}
        result["wall_seconds"] = round(time.time() - began, 1)
        result["cpu_seconds"] = round(children_cpu() - cpu, 1)  # of the commands it ran
        self.results["stages"][name] = result
        self.save()
        return result

    def transduce(self, *argv: str | Path, log: str | None = None) -> str:
        """Run `transduce ARGV...`; its stdout (also written to OUT/logs/LOG when given)."""
        cmd = [sys.executable, "-m", "transduce", *map(str, argv)]
        shown = "transduce " + " ".join(shlex.quote(str(a)) for a in argv)
        print(f"  $ {shown}", flush=True)
        if shown not in self.results["commands"]:
            self.results["commands"].append(shown)
        (self.out / "logs").mkdir(exist_ok=True)
        path = self.out / "logs" / (log or "last_command.log")
        with path.open("a" if log else "w", encoding="utf-8") as sink:  # a resumed training appends
            sink.write(f"$ {shown}\n")
            sink.flush()
            code = subprocess.run(cmd, env=self.env, stdout=sink, stderr=subprocess.STDOUT).returncode
        output = path.read_text(encoding="utf-8")
        if code != 0:
            sys.exit(f"failed ({code}): {shown}\n{output[-3000:]}")
        return output.split(f"$ {shown}\n")[-1]

    # ---------------------------------------------------------------- stages
    def evaluate(self, name: str, model: Path, corpus: Path, label: str) -> dict:
        hyp_dir = self.out / "hyp"
        hyp_dir.mkdir(exist_ok=True)
        hyp = hyp_dir / f"{name}.{label}.de"
        self.transduce(
            "translate", model, "-i", corpus / "test.en", "-o", hyp,
            "--beam", "4", "--alpha", "0.6", "--threads", self.args.threads,
        )  # fmt: skip
        report = self.transduce("evaluate", "--hyp", hyp, "--ref", corpus / "test.de")
        bleu = re.search(r"^BLEU ([\d.]+)\s+\((.*)\)", report, re.M)
        chrf = re.search(r"^chrF ([\d.]+)\s+\((.*)\)", report, re.M)
        return {
            "bleu": float(bleu.group(1)),
            "chrf": float(chrf.group(1)),
            "bleu_signature": bleu.group(2),
            "chrf_signature": chrf.group(2),
            "segments": sum(1 for _ in hyp.open(encoding="utf-8")),
        }

    def train(self, config: Path | str, run: Path, overrides: list[str], init: Path | None, log: str) -> dict:
        argv = ["train", config, *overrides, "--run-dir", run]
        if init is not None:
            argv += ["--init-from", init]
        self.transduce(*argv, log=log)
        return run_summary(run)


def children_cpu() -> float:
    """User + system CPU seconds of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_summary(run: Path) -> dict:
    """Steps, training minutes and validation history of a finished run, and its best step."""
    last = step_checkpoints(run / "checkpoints")[-1]
    state = json.loads((last / "trainer.json").read_text(encoding="utf-8"))["state"]
    best = json.loads((run / "best.json").read_text(encoding="utf-8")) if (run / "best.json").exists() else {}
    history = [
        {k: h[k] for k in ("step", "train_minutes", "dev_loss", "dev_bleu", "dev_chrf") if k in h}
        for h in state["history"]
    ]
    return {
        "steps": state["step"],
        "train_minutes": state["train_seconds"] / 60,
        "best": best,
        "history": history,
    }


def dataset_facts(data: Path) -> dict:
    meta = json.loads((data / "meta.json").read_text(encoding="utf-8"))
    return {"sizes": meta["sizes"], "src_vocab_size": meta["src_vocab_size"], "report": meta.get("report")}


def same_arrays(a: Path, b: Path) -> bool:
    """Whether two prepared datasets hold the same token arrays (file by file)."""
    names = sorted(p.name for p in a.glob("*.npy"))
    if names != sorted(p.name for p in b.glob("*.npy")):
        return False
    return all(np.array_equal(np.load(a / n), np.load(b / n)) for n in names)


def finetune_overrides(args: argparse.Namespace, data: Path) -> list[str]:
    """The whole fine-tuning recipe, stated in full so that both paths (our checkpoint's saved
    config and the imported one's defaults) train with the same settings."""
    return [
        f"data.dataset={data}",
        "data.max_tokens=4096",
        "data.seed=1234",
        "model.dropout=0.1",
        f"train.steps={args.finetune_steps}",
        "train.max_minutes=null",
        f"train.warmup={args.finetune_warmup}",
        f"train.lr_scale={args.finetune_lr_scale}",
        "train.label_smoothing=0.1",
        f"train.validate_every={args.validate_every}",
        "train.validate_every_minutes=null",
        "train.save_every_minutes=null",
        f"train.save_every={args.validate_every}",
        "train.best_metric=bleu",
        f"train.patience={args.patience}",
        "train.keep_last=2",
        "train.seed=1",
        f"train.threads={args.threads}",
        "train.log_every=25",
        "decode.beam=4",
        "decode.alpha=0.6",
        "decode.max_len_a=1.0",
        "decode.max_len_b=50",
    ]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=OUT / "domain", help="runs, data and results")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--l10n-budget-mb", type=int, default=300, help="size of the l10n corpus (.debs read)"
    )
    parser.add_argument("--vocab-size", type=int, default=8000, help="shared BPE of the general model")
    parser.add_argument(
        "--general-steps",
        type=int,
        default=700,
        help="updates of the general model (~35 min of one free core)",
    )
    parser.add_argument("--general-warmup", type=int, default=400)
    parser.add_argument(
        "--general-seed",
        type=int,
        default=3,
        help="train.seed of the general model (initial weights, dropout)",
    )
    parser.add_argument(
        "--finetune-steps", type=int, default=240, help="fine-tuning updates (~12 min of one free core)"
    )
    parser.add_argument("--finetune-warmup", type=int, default=200)
    parser.add_argument("--finetune-lr-scale", type=float, default=0.5)
    parser.add_argument("--validate-every", type=int, default=50, help="fine-tuning: steps between dev BLEU")
    parser.add_argument(
        "--patience", type=int, default=4, help="fine-tuning: validations without a better BLEU"
    )
    return parser.parse_args()


def general_settings(args: argparse.Namespace, l10n_data: Path) -> list[str]:
    """The general model's overrides of the `small` preset."""
    return [
        "model.pos_layout=halves",
        f"data.dataset={l10n_data}",
        "data.max_tokens=4096",
        f"train.steps={args.general_steps}",
        "train.max_minutes=null",
        "train.validate_every_minutes=null",
        "train.validate_every=100",
        "train.save_every=100",
        "train.save_every_minutes=null",
        f"train.warmup={args.general_warmup}",
        f"train.threads={args.threads}",
        "train.log_every=100",
        f"train.seed={args.general_seed}",
    ]


def run_stages(bench: Bench, args: argparse.Namespace) -> None:
    """Every stage, each skipped where an earlier invocation finished it."""
    out = args.out
    l10n = build_l10n("de", args.l10n_budget_mb)
    ddtp = OUT / "ddtp"
    bench.stage("ddtp_corpus", lambda: build_ddtp(ddtp, dev_size=500, test_size=1000, refetch=False))

    l10n_data, ddtp_data = out / "l10n-data", out / "ddtp-data"
    general, direct = out / "general", out / "ft-direct"
    hf, imported = out / "general-marian", out / "general-imported"
    ddtp_data_m, via_marian = out / "ddtp-data-marian", out / "ft-marian"

    def prepare_l10n():
        bench.transduce(
            "prepare", l10n, "--src", "en", "--tgt", "de", "-o", l10n_data, "--vocab-size", args.vocab_size
        )
        return dataset_facts(l10n_data)

    bench.stage("prepare_l10n", prepare_l10n)
    general_overrides = general_settings(args, l10n_data)
    bench.stage(
        "train_general", lambda: bench.train("small", general, general_overrides, None, "train_general.log")
    )

    def prepare_ddtp(vocab: Path, data: Path):
        bench.transduce("prepare", ddtp, "--src", "en", "--tgt", "de", "-o", data, "--vocab-from", vocab)
        return dataset_facts(data)

    bench.stage("prepare_ddtp", lambda: prepare_ddtp(general, ddtp_data))
    bench.stage("eval_general_ddtp", lambda: bench.evaluate("general", general, ddtp, "ddtp"))
    bench.stage("eval_general_l10n", lambda: bench.evaluate("general", general, l10n, "l10n"))

    budget = finetune_overrides(args, ddtp_data)
    bench.stage("finetune_direct", lambda: bench.train(general, direct, budget, general, "ft_direct.log"))
    bench.stage("eval_direct_ddtp", lambda: bench.evaluate("ft-direct", direct, ddtp, "ddtp"))
    bench.stage("eval_direct_l10n", lambda: bench.evaluate("ft-direct", direct, l10n, "l10n"))

    bench.stage(
        "export_marian", lambda: {"out": bench.transduce("export", general, "--format", "marian", "-o", hf)}
    )
    bench.stage("import_marian", lambda: {"out": bench.transduce("import", "marian", hf, "-o", imported)})
    bench.stage("eval_imported_ddtp", lambda: bench.evaluate("imported", imported, ddtp, "ddtp"))
    bench.stage("eval_imported_l10n", lambda: bench.evaluate("imported", imported, l10n, "l10n"))

    def prepare_marian():
        facts = prepare_ddtp(imported, ddtp_data_m)
        facts["same_token_arrays_as_direct"] = same_arrays(ddtp_data, ddtp_data_m)
        return facts

    bench.stage("prepare_ddtp_marian", prepare_marian)
    same = finetune_overrides(args, ddtp_data_m)
    bench.stage("finetune_marian", lambda: bench.train(imported, via_marian, same, imported, "ft_marian.log"))
    bench.stage("eval_marian_ddtp", lambda: bench.evaluate("ft-marian", via_marian, ddtp, "ddtp"))
    bench.stage("eval_marian_l10n", lambda: bench.evaluate("ft-marian", via_marian, l10n, "l10n"))


def count_identical(bench: Bench, out: Path) -> None:
    """How many test lines the Marian round trip leaves as they were, before and after fine-tuning."""
    for a, b in (("general", "imported"), ("ft-direct", "ft-marian")):
        for label in ("ddtp", "l10n"):
            ha, hb = out / "hyp" / f"{a}.{label}.de", out / "hyp" / f"{b}.{label}.de"
            pairs = zip(ha.open(encoding="utf-8"), hb.open(encoding="utf-8"), strict=True)
            same_lines = sum(x == y for x, y in pairs)
            bench.results[f"identical_lines_{a}_vs_{b}_{label}"] = same_lines


def write_domain_record(bench: Bench, args: argparse.Namespace) -> None:
    """The record: each model's updates, CPU time and test scores on both domains."""
    s = bench.results["stages"]
    rows = [
        ("general (l10n only)", s["train_general"], "general"),
        ("+ fine-tuned on DDTP", s["finetune_direct"], "direct"),
        ("general, export marian + import marian", None, "imported"),
        ("+ fine-tuned on DDTP (from the import)", s["finetune_marian"], "marian"),
    ]
    table = []
    for title, run, key in rows:
        d, g = s[f"eval_{key}_ddtp"], s[f"eval_{key}_l10n"]
        table.append(
            {
                "model": title,
                "updates": run["steps"] if run else None,
                "cpu_seconds": run["cpu_seconds"] if run else None,
                "ddtp_bleu": round(d["bleu"], 2),
                "ddtp_chrf": round(d["chrf"], 2),
                "l10n_bleu": round(g["bleu"], 2),
                "l10n_chrf": round(g["chrf"], 2),
            }
        )
    write_record(
        "mt",
        "domain",
        title="Domain adaptation: l10n En-De fine-tuned on Debian package descriptions",
        command="python -m bench.mt.domain " + " ".join(sys.argv[1:]),
        host=host_line(args.threads),
        setup=(
            f"General: `small` with pos_layout=halves, {args.general_steps} updates of 4,096 tokens on the "
            f"l10n corpus; fine-tuned: `train GENERAL data.dataset=DDTP --init-from GENERAL`, "
            f"{args.finetune_steps} updates, the best dev-BLEU checkpoint tested; the OPUS-MT path: "
            "`export --format marian`, `import marian`, the same fine-tuning. Test BLEU / chrF, beam 4."
        ),
        rows=table,
        commands=bench.results["commands"],
    )


def main() -> None:
    args = parse_args()
    # started in the background by a shell, we inherit SIGINT ignored; so would every command we
    # run, and Ctrl-C or `kill -INT` could not stop a training (which saves its steps on SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    bench = Bench(args)
    bench.results["args"] = {k: str(v) for k, v in vars(args).items()}
    run_stages(bench, args)
    count_identical(bench, args.out)
    bench.save()
    write_domain_record(bench, args)
    print("\ncommands:\n" + "\n".join(bench.results["commands"]))


if __name__ == "__main__":
    main()
