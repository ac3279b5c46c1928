"""The grid's headline: for copy, reverse and addition at length 400 and each model, the best
setting recorded so far (any folder of bench/records/algorithmic/ trained on lengths 1..40 and
tested at 400, any position scheme), as headline.json, and its accuracy against test length as a
plot for the results page. `python -m bench.algorithmic.grid --report` writes both.

The best setting is the one with the highest mean sequence accuracy over its seeds at 400, then
the highest character accuracy, then the most seeds: greedy decoding's. Each row also names the
best setting by tensor2tensor's measure (`teacher_forced`: teacher-forced accuracy over one
example of each length 1..400, the records' `t2t_char` / `t2t_seq`, most likely how the paper's
Table 3 was computed), chosen the same way among the settings whose runs all have it. Only the
paper's models count: tensor2tensor's tiny sizes (`at_paper_sizes`); a control at another size (a
one-layer Transformer) is reported in the notes. No torch here: the results page reads it."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.algorithmic.tasks import DEPTH, LABELS, PAPER, TINY
from bench.records import ROOT

TASKS = ("copy", "reverse", "addition")
MODELS = tuple(LABELS)
TRAIN_LEN, TEST_LEN = 40, 400  # the paper's setting
PLOT = ROOT / "docs" / "results" / "algorithmic-headline.png"
COLOURS = {"transformer": "tab:blue", "ut": "tab:orange", "ut_act": "tab:green"}


def at_paper_sizes(setting: dict, model: str) -> bool:
    """Whether a setting trained `model` at the paper's sizes (a setting that does not name a size
    has the grid's default, which is the paper's)."""
    return all(setting.get(key, TINY[key]) == TINY[key] for key in ("width", "d_ff", "heads", DEPTH[model]))


def device_of(run: dict) -> str:
    """The device a run trained on: recorded since issue 48, else the CPU its host line names."""
    if run.get("device"):
        return run["device"]
    machine = run.get("machine")
    return machine.split(",")[0] if machine else "CPU (model not recorded)"


def paper_size_runs(records: Path) -> Iterator[tuple[str, dict, dict]]:
    """(setting folder's name, setting, run) for every recorded run in `records`' setting folders
    whose model is at the paper's sizes: what the headline and the results page's teacher-forced
    table choose from."""
    for setting_file in sorted(records.glob("*/setting.json")):
        setting = json.loads(setting_file.read_text(encoding="utf-8"))
        for path in sorted(setting_file.parent.glob("*-seed*.json")):
            run = json.loads(path.read_text(encoding="utf-8"))
            if at_paper_sizes(setting, run["model"]):
                yield setting_file.parent.name, setting, run


def runs_by_setting(records: Path) -> dict[tuple[str, str, str, str], list[dict]]:
    """Every recorded run at the paper's lengths, by (task, model, setting folder, positions)."""
    grouped: dict[tuple[str, str, str, str], list[dict]] = {}
    for folder, setting, run in paper_size_runs(records):
        at_lengths = (setting.get("train_len"), setting.get("test_len")) == (TRAIN_LEN, TEST_LEN)
        if at_lengths and run["task"] in TASKS:
            grouped.setdefault((run["task"], run["model"], folder, run["positions"]), []).append(run)
    return grouped


def one_or_all(values: set) -> Any:
    """The one value the seeds agree on, as the issue's fields read, else all of them sorted."""
    return values.pop() if len(values) == 1 else sorted(values)


def means(folder: str, positions: str, runs: list[dict], char: str, seq: str) -> dict[str, Any]:
    """One setting's mean character and sequence accuracy over its seeds, by the record fields
    named (greedy's `char`/`seq`, or tensor2tensor's measure `t2t_char`/`t2t_seq`). Unrounded, so
    that the results page rounds each mean once, as its other tables do."""
    return {
        "setting": folder,
        "positions": positions,
        "char": statistics.fmean(r[char] for r in runs),
        "seq": statistics.fmean(r[seq] for r in runs),
        "n": len(runs),
        "updates": one_or_all({r.get("updates", r["steps"]) for r in runs}),
    }


def summary(folder: str, positions: str, runs: list[dict]) -> dict[str, Any]:
    """One setting's means over its seeds, at 400 and at each sweep length all its seeds have."""
    lengths = set.intersection(*({int(n) for n in r["by_length"]} for r in runs))
    return means(folder, positions, runs, "char", "seq") | {
        "device": one_or_all({device_of(r) for r in runs}),
        "by_length": {
            str(n): {
                "char": statistics.fmean(r["by_length"][str(n)]["char"] for r in runs),
                "seq": statistics.fmean(r["by_length"][str(n)]["seq"] for r in runs),
            }
            for n in sorted(lengths)
        },
    }


def rank(candidate: dict[str, Any]) -> tuple[float, float, int]:
    """What makes a setting best: its mean sequence accuracy, then character accuracy, then seeds."""
    return candidate["seq"], candidate["char"], candidate["n"]


def best(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """The candidate of highest `rank`."""
    return max(candidates, key=rank)


def headline(records: Path) -> list[dict[str, Any]]:
    """The best setting of each (task, model) with a recorded run."""
    candidates: dict[tuple[str, str], list[dict]] = {}
    forced: dict[tuple[str, str], list[dict]] = {}
    for (task, model, folder, positions), runs in runs_by_setting(records).items():
        candidates.setdefault((task, model), []).append(summary(folder, positions, runs))
        if all("t2t_char" in r for r in runs):
            forced.setdefault((task, model), []).append(means(folder, positions, runs, "t2t_char", "t2t_seq"))
    rows = []
    for task in TASKS:
        for model in MODELS:
            if (task, model) in candidates:
                paper = PAPER[task]["ut" if model == "ut_act" else model]
                by_t2t = best(forced[(task, model)]) if (task, model) in forced else None
                rows.append(
                    {"task": task, "model": model, **best(candidates[(task, model)])}
                    | {"teacher_forced": by_t2t, "paper": list(paper)}
                )
    return rows


def write(records: Path, plot_path: Path = PLOT) -> list[dict[str, Any]]:
    """headline.json in `records` (atomically) and the plot; the rows."""
    rows = headline(records)
    path = records / "headline.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(rows, indent=1) + "\n")
    os.replace(tmp, path)
    plot(rows, plot_path)
    return rows


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Character (solid) and sequence (dashed) accuracy against test length, a panel per task,
    the paper's numbers at 400 as stars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(TASKS), figsize=(12, 3.8), squeeze=False)
    for ax, task in zip(axes[0], TASKS, strict=True):
        for row in (r for r in rows if r["task"] == task):
            lengths = [int(n) for n in row["by_length"]] + [TEST_LEN]
            for metric, style in (("char", "-"), ("seq", "--")):
                values = [row["by_length"][str(n)][metric] for n in lengths[:-1]] + [row[metric]]
                label = f"{LABELS[row['model']]} {metric} ({row['positions']})"
                ax.plot(
                    lengths, values, style, marker="o", markersize=3, color=COLOURS[row["model"]], label=label
                )
        for model, (char, seq) in PAPER[task].items():
            ax.plot(
                [TEST_LEN] * 2, [char, seq], "*", markersize=11, color=COLOURS[model], markeredgecolor="k"
            )
        ax.set_title(f"{task}: best setting of each model")
        ax.set_xlabel("test length (trained on 1..40)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=6, loc="lower left")
    axes[0][0].set_ylabel("accuracy (stars: the paper at 400)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
