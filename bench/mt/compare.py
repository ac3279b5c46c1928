"""The MT comparison's table: the runs of bench.mt.recipes (ours) and bench.mt.toolkits (the peer
toolkits), one JSON record each in bench/records/mt-compare/, grouped by system and budget.
`python -m bench.mt.recipes --report` prints it; the results page shows it per budget."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench.records import RECORDS, spread

FOLDER = RECORDS / "mt-compare"
Groups = dict[tuple[str, float], list[dict]]
COLUMNS = {
    "system": "system",
    "budget": "budget (min)",
    "seeds": "seeds",
    "bleu": "test BLEU",
    "chrf": "test chrF",
    "dev_ppl": "dev ppl at the end",
    "updates": "updates",
    "tokens": "target tokens seen",
    "params": "parameters",
    "flops": "forward MFLOPs / target token",
    "last_change": "last change: BLEU vs without it",
}


def load(folder: Path = FOLDER) -> list[dict]:
    """Every run's record, in file-name order."""
    return [json.loads(f.read_text(encoding="utf-8")) for f in sorted(folder.glob("*.json"))]


def system(r: dict) -> str:
    """The table's name of a run's system: ours by recipe, a peer by toolkit and version (and the
    recipe, when it is not the toolkit's own); runs of a labelled host get its label."""
    host = f" [{r['host']} host]" if r.get("host") else ""
    if r["toolkit"] == "transduce":
        return f"transduce {r['recipe']}{host}"
    peer = r.get("version", r["toolkit"])
    recipe = r.get("recipe_name", "own")
    return (peer if recipe == "own" else f"{peer}, {recipe} recipe") + host


def groups(records: list[dict]) -> Groups:
    """The runs of each (system, budget)."""
    out: Groups = {}
    for r in records:
        out.setdefault((system(r), r["budget_minutes"]), []).append(r)
    return out


def change_effect(name: str, budget: float, grouped: Groups) -> str:
    """For `transduce a+b+c`: the mean test BLEU difference to `transduce a+b` at the same budget
    (the ablation of its last change), over the seeds both have; '-' when there is no such run."""
    if "+" not in name or not name.startswith("transduce "):
        return "-"
    name, bracket, host = name.partition(" [")  # runs of a labelled host pair among themselves
    parent, last = name.rsplit("+", 1)
    parent, name = parent + bracket + host, name + bracket + host
    mine = {r["seed"]: r["test"]["bleu"] for r in grouped[(name, budget)]}
    theirs = {r["seed"]: r["test"]["bleu"] for r in grouped.get((parent, budget), [])}
    seeds = sorted(mine.keys() & theirs.keys())
    if not seeds:
        return "-"
    deltas = [mine[s] - theirs[s] for s in seeds]
    paired = f"{len(seeds)} paired seed{'s' if len(seeds) != 1 else ''}"
    return f"+{last}: {statistics.fmean(deltas):+.2f} ({paired})"


def rows(grouped: Groups, budget: float | None = None) -> list[dict]:
    """One table row per (system, budget), by budget then name; only `budget`'s when given."""
    table = []
    for (name, minutes), runs in sorted(grouped.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if budget is not None and minutes != budget:
            continue
        tokens = [r["target_tokens"] for r in runs if r.get("target_tokens")]
        ppl = [r["curve"][-1]["dev_ppl"] for r in runs if r.get("curve") and "dev_ppl" in r["curve"][-1]]
        table.append(
            {
                "system": name,
                "budget": f"{minutes:g}",
                "seeds": len(runs),
                "bleu": spread([r["test"]["bleu"] for r in runs]),
                "chrf": spread([r["test"]["chrf"] for r in runs]),
                "dev_ppl": spread(ppl) if ppl else "-",
                "updates": f"{statistics.fmean(r['updates'] for r in runs):,.0f}",
                "tokens": f"{statistics.fmean(tokens) / 1e6:.1f}M" if tokens else "-",
                **model_columns(runs[0]),
                "last_change": change_effect(name, minutes, grouped),
            }
        )
    return table


def model_columns(run: dict) -> dict[str, str]:
    """Parameters and forward FLOPs per target token of ours (bench.mt.recipes records them,
    FLOPs at 32 source and target tokens); '-' for the peers and for records written before."""
    model = run.get("model")
    if not model:
        return {"params": "-", "flops": "-"}
    return {
        "params": f"{model['params'] / 1e6:.2f}M",
        "flops": f"{model['forward_flops_per_token'] / 1e6:.1f}",
    }
