"""Test-time depth (issue 91): the grid's finished UT cells run with exactly d recurrent steps a
stack at evaluation, for each d of --depths: teacher-forced accuracy on dev (the training lengths)
and tensor2tensor's measure up to --test-len. It asks what the steps a trained model did not use
would buy: whether a UT+ACT held at a floor of 4 steps, or a fixed-depth UT, does better on long
inputs when run deeper (or shallower) than it was trained.

    python -m bench.algorithmic.depth --depths 1 2 3 4 5 6 8 -- --tasks reverse --positions offset \\
        --models ut_act --seeds 3 --steps 10000 --act-halt-bias -3 --act-halt-detach --act-min-steps 4

After `--`, the grid's own options name the setting (as `bench.algorithmic.grid` takes them); every
recorded cell whose run directory is still under bench/out is measured. With ACT, d steps means
the halting unit is first read at step d and every position halts there (`min_steps` = `steps` = d),
so d = the trained floor reproduces the trained model when it halts at its floor. One record per
cell, `<setting>/depth/<cell>.json`, and a table of means over seeds on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.algorithmic import grid
from bench.records import host_line, mean_pair
from transduce.model.universal import UniversalStack
from transduce.train.trainer import Trainer

SIDES = ("encoder", "decoder")


def parse(argv: list[str]) -> tuple[list[int], argparse.Namespace]:
    """The depths, and the grid's arguments (after `--`)."""
    own, rest = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--depths", type=int, nargs="+", required=True, help="steps a stack at evaluation")
    depths = parser.parse_args(own).depths
    if min(depths) < 1:
        parser.error(f"--depths {min(depths)}: a stack takes at least one step")
    return depths, grid.parse(rest)


def stacks(trainer: Trainer) -> list[UniversalStack]:
    return [m for m in trainer.model.modules() if isinstance(m, UniversalStack)]


def at_depth(trainer: Trainer, cfg: Any, depth: int, test_len: int) -> dict[str, float]:
    """Dev and t2t accuracy, teacher-forced, with every stack run exactly `depth` steps; the dev
    loss, and ACT's mean steps a stack (`depth` exactly, a check that it took)."""
    for stack in stacks(trainer):
        stack.steps = depth
        if stack.halt is not None:
            stack.min_steps = depth
    dev = trainer.validator.dev_loss(trainer.data.splits["dev"])
    return {
        "dev_forced_char": dev.forced.char,
        "dev_forced_seq": dev.forced.sequence,
        "dev_nll": dev.nll,
        **{
            f"dev_{side}_steps": dev.ponder[f"{side}_ponder_mean"]
            for side in SIDES
            if f"{side}_ponder_mean" in dev.ponder
        },
        **grid.t2t_accuracy(trainer, cfg, test_len),
    }


def measure(args: argparse.Namespace, cell: grid.Cell, depths: list[int], folder: Path) -> dict | None:
    """One cell's accuracies at each depth, recorded; None when its run directory is gone."""
    work = args.out / folder.name / grid.cell_name(cell)
    if not (folder / f"{grid.cell_name(cell)}.json").exists() or not (work / "checkpoints").exists():
        print(f"{grid.cell_name(cell)}: no finished run under {work}; skipped", file=sys.stderr)
        return None
    cfg = grid.config(args, *cell)
    began = time.process_time()
    trainer = Trainer(cfg, work, show_progress=False)
    trainer.fit(resume=True)  # finished: loads the weights, trains nothing
    trainer.model.eval()
    first = stacks(trainer)[0]
    trained = {"steps": first.steps, "min_steps": first.min_steps}
    rows = {str(d): at_depth(trainer, cfg, d, args.test_len) for d in depths}
    record = {
        "cell": grid.cell_name(cell),
        "updates": trainer.state.step,
        "trained": trained,
        "depths": rows,
        "command": " ".join(["python", "-m", "bench.algorithmic.depth", *sys.argv[1:]]),
        "machine": host_line(args.threads),
        "cpu_minutes": (time.process_time() - began) / 60,
    }
    (folder / "depth").mkdir(exist_ok=True)
    grid.write_json(folder / "depth" / f"{grid.cell_name(cell)}.json", record)
    return record


def table(records: list[dict], depths: list[int], test_len: int) -> list[str]:
    """Means over the records (seeds) at each depth: dev and t2t, characters / sequences."""
    lines = [f"| steps a stack | dev (teacher-forced) | t2t 1..{test_len} | n |", "|---|---|---|---|"]
    for d in depths:
        at = [r["depths"][str(d)] for r in records]
        dev, t2t = mean_pair(at, "dev_forced_char", "dev_forced_seq"), mean_pair(at, "t2t_char", "t2t_seq")
        lines.append(f"| {d} | {dev} | {t2t} | {len(at)} |")
    return lines


def main() -> None:
    depths, args = parse(sys.argv[1:])
    folder = args.records / grid.setting_name(args)
    seeds: dict[tuple[str, str, str], list[grid.Cell]] = {}
    for cell in grid.cells(args):  # the grid's own cells, grouped by all but the seed
        seeds.setdefault(cell[:3], []).append(cell)
    for (task, model, positions), cells in seeds.items():
        records = [r for c in cells if (r := measure(args, c, depths, folder)) is not None]
        if records:
            print(f"\n{task}, {model}, {positions} ({grid.setting_name(args)}):")
            print(json.dumps(records[0]["trained"]))
            print("\n".join(table(records, depths, args.test_len)))


if __name__ == "__main__":
    main()
