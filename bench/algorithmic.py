"""Length generalisation on the UT paper's algorithmic tasks: Transformer vs UT vs UT+ACT.

    python bench/algorithmic.py                          # copy, reverse, addition; 3 models each
    python bench/algorithmic.py --tasks copy --steps 300 # a quicker look

Every model gets the same budget: the same training steps on the same seeded batches, the same
width, and the same maximum depth (Transformer L layers = UT T steps = UT+ACT's step limit).
Models train on lengths 1..--train-len and are tested on --train-len+1..--test-len (the
`test_long` split) with greedy decoding; character and sequence accuracy as in the paper.
Each run's result is kept in bench/out/algorithmic/, so an interrupted benchmark resumes where
it stopped; the table is written into RESULTS.md between the algorithmic markers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch
from results import write_section

from transduce.config import load_config
from transduce.train.trainer import Trainer

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "algorithmic"
MODELS = {
    "Transformer": ["model.arch=transformer"],
    "UT": ["model.arch=universal", "model.act=false"],
    "UT+ACT": ["model.arch=universal", "model.act=true"],
}


def overrides(args: argparse.Namespace, task: str, model: str) -> list[str]:
    depth = args.depth
    return [
        f"model.d_model={args.width}",
        "model.heads=4",
        f"model.d_ff={4 * args.width}",
        f"model.encoder_layers={depth}",
        f"model.decoder_layers={depth}",
        f"model.encoder_steps={depth}",
        f"model.decoder_steps={depth}",
        "model.dropout=0.1",
        *MODELS[model],
        f"data.task={task}",
        f"data.task_train_max_len={args.train_len}",
        f"data.task_test_max_len={args.test_len}",
        "data.task_train_size=20000",
        f"data.task_eval_size={args.eval_size}",
        "data.max_tokens=2048",
        f"train.steps={args.steps}",
        "train.warmup=400",
        "train.lr_scale=0.5",
        f"train.validate_every={args.steps}",
        f"train.save_every={args.steps}",
        f"train.threads={args.threads}",
        "train.log_every=100",
        "decode.max_len_a=1.0",
        f"decode.max_len_b={args.test_len}",
    ]


def run(args: argparse.Namespace, task: str, model: str) -> dict:
    """Train one model on one task (or reuse its stored result)."""
    setting = (
        f"len{args.train_len}-{args.test_len}_steps{args.steps}_d{args.width}x{args.depth}_n{args.eval_size}"
    )
    result_file = OUT / setting / f"{task}-{model}.json"
    if result_file.exists():
        return json.loads(result_file.read_text())
    cfg = load_config("small", overrides(args, task, model))
    begin = time.monotonic()
    metrics = Trainer(cfg, OUT / setting / f"{task}-{model}", show_progress=args.progress).fit(resume=True)
    result = {
        "task": task,
        "model": model,
        "minutes": (time.monotonic() - begin) / 60,
        **{k: v for k, v in metrics.items() if isinstance(v, int | float)},
    }
    result_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = result_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, result_file)
    print(json.dumps(result), flush=True)
    return result


def table(results: list[dict], args: argparse.Namespace, command: str) -> list[str]:
    lines = [
        f"## Algorithmic tasks: length generalisation ({time.strftime('%Y-%m-%d')})",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {args.threads} thread(s), torch "
        f"{torch.__version__}, CPU. Train lengths 1..{args.train_len}, test (`test_long`) lengths "
        f"{args.train_len + 1}..{args.test_len}; d_model {args.width}, 4 heads, depth {args.depth} "
        f"(layers or steps), {args.steps} steps of 2048-token batches each, greedy decoding, "
        f"{args.eval_size} examples per split.",
        "",
        "| task | model | dev char | dev seq | long char | long seq | ponder (enc) | minutes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ponder = r.get("encoder_ponder_mean")
        lines.append(
            f"| {r['task']} | {r['model']} | {r['dev_char_acc']:.3f} | {r['dev_seq_acc']:.3f} | "
            f"{r['test_long_char_acc']:.3f} | {r['test_long_seq_acc']:.3f} | "
            f"{f'{ponder:.2f}' if ponder is not None else '-'} | {r['minutes']:.1f} |"
        )
    lines += [
        "",
        "The paper (train <= 40, test 400, full-size models on accelerators) reports that UT beats "
        "the Transformer on character and sequence accuracy on all three tasks; its exact table was "
        "not available offline to this project, so it is not quoted here.",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=["copy", "reverse", "addition"])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--train-len", type=int, default=8)
    parser.add_argument("--test-len", type=int, default=24)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--eval-size", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--progress", action="store_true", help="show each run's progress bar")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    results = [run(args, task, model) for task in args.tasks for model in args.models]
    command = "python bench/algorithmic.py " + " ".join(
        f"--{k.replace('_', '-')} {' '.join(v) if isinstance(v, list) else v}"
        for k, v in vars(args).items()
        if k != "progress"
    )
    write_section("algorithmic", table(results, args, command))


if __name__ == "__main__":
    main()
