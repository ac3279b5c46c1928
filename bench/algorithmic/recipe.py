"""Which recipe learns in distribution first (issue 48 item 1): for one model and task, run a list
of training settings through the grid with a learning curve, and report for each the updates at
which dev sequence accuracy (training lengths 1..40) first reaches --target (0.9).

    python -m bench.algorithmic.recipe --task reverse --model transformer --steps 1500 \\
        --curve-every 250 --settings lr=1,warmup=400 lr=2,warmup=400 lr=2,warmup=100

A setting is comma-separated KEY=VALUE: lr (the grid's --lr-scale), warmup, tokens (--max-tokens),
act_steps (--ut-steps: the UT's steps, UT+ACT's most), act_tau (ACT's ponder cost). Each setting is
one grid setting (its own folder under --records, default bench/records/algorithmic/recipe/, apart
from the length-400 grids); its cells are skipped once recorded, so a search resumes. The summary
is recipe-<task>-<model>.json in --records, with each setting's curve.

tensor2tensor's tiny sets: universal_transformer_tiny runs 8 recurrent steps; its adaptive
counterpart sets act_max_steps = 2 * num_hidden_layers = 4 (transformer_tiny has 2 layers), so
`act_steps=4` is its ACT cap and `act_steps=8` the fixed UT's depth."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

from bench.algorithmic.grid import MODELS, RECORDS, parse, setting_name
from bench.algorithmic.jobs import GRID

KEYS = {"lr": "--lr-scale", "warmup": "--warmup", "tokens": "--max-tokens", "act_steps": "--ut-steps"}
KEYS |= {"act_tau": "--act-tau"}
DEFAULT_SETTINGS = ["lr=1,warmup=400", "lr=2,warmup=400", "lr=2,warmup=100", "lr=1,warmup=400,tokens=4096"]


def setting_argv(text: str) -> list[str]:
    """The grid options of one KEY=VALUE,... setting; a bad key or value is a clear error."""
    argv = []
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if key not in KEYS or not value:
            raise ValueError(f"setting {text!r}: {item!r} is not KEY=VALUE with KEY one of {', '.join(KEYS)}")
        try:
            float(value)
        except ValueError:
            raise ValueError(f"setting {text!r}: {key}={value} is not a number") from None
        argv += [KEYS[key], value]
    return argv


def first_passing(curve: list[dict], target: float) -> int | None:
    """The updates at which dev sequence accuracy first reaches `target`, if it does."""
    return next((point["updates"] for point in curve if point["dev_seq"] >= target), None)


def summary(text: str, runs: list[dict], target: float) -> dict[str, Any]:
    """One setting's row: per seed the updates to the target, the final and best dev accuracy."""
    reached = [first_passing(r["curve"], target) for r in runs]
    return {
        "setting": text,
        "seeds": len(runs),
        "updates_to_target": reached,
        "mean_updates_to_target": statistics.fmean(reached) if runs and None not in reached else None,
        "final_dev_seq": round(statistics.fmean(r["dev_seq"] for r in runs), 4),
        "best_dev_seq": round(statistics.fmean(max(p["dev_seq"] for p in r["curve"]) for r in runs), 4),
        "cpu_minutes": round(statistics.fmean(r["cpu_minutes"] for r in runs), 1),
        "curves": [r["curve"] for r in runs],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", choices=["copy", "reverse", "addition"], default="reverse")
    parser.add_argument("--model", choices=list(MODELS), default="ut")
    parser.add_argument("--settings", nargs="+", default=DEFAULT_SETTINGS, help="KEY=VALUE,... each")
    parser.add_argument("--steps", type=int, default=2000, help="updates per run")
    parser.add_argument("--curve-every", type=int, default=250, help="updates between dev evaluations")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--target", type=float, default=0.9, help="dev sequence accuracy to reach")
    parser.add_argument("--positions", default="none", help="the grid's position scheme")
    parser.add_argument("--jobs", type=int, default=1, help="the grid's cells at once (one per seed)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per cell")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--records", type=Path, default=RECORDS / "recipe")
    args = parser.parse_args()
    common = ["--tasks", args.task, "--models", args.model, "--positions", args.positions, "--lengths"]
    common += ["--steps", str(args.steps), "--curve-every", str(args.curve_every), "--seeds", str(args.seeds)]
    common += ["--jobs", str(args.jobs), "--threads", str(args.threads), "--device", args.device]
    common += ["--records", str(args.records)]
    try:
        settings = {text: setting_argv(text) for text in args.settings}
    except ValueError as bad:
        parser.error(str(bad))
    rows = []
    for text, options in settings.items():
        argv = [*common, *options]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), "."])))
        subprocess.run([*GRID, *argv], check=False, env=env)
        folder = args.records / setting_name(parse(argv))
        names = [f"{args.task}-{args.model}-{args.positions}-seed{s}.json" for s in range(1, args.seeds + 1)]
        runs = [json.loads((folder / n).read_text()) for n in names if (folder / n).exists()]
        rows.append(summary(text, runs, args.target))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "curves"}), flush=True)
    path = args.records / f"recipe-{args.task}-{args.model}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(
        json.dumps({"task": args.task, "model": args.model, "target": args.target, "rows": rows}, indent=1)
    )
    os.replace(tmp, path)
    print(f"recorded in {path}")


if __name__ == "__main__":
    main()
