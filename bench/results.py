"""The results page, docs/results.md, from the records in bench/records/: for each claim the newest
record's numbers, the command that reproduces them, the host and the date.

    python -m bench.results            # rewrite docs/results.md
    python -m bench.results --check    # exit 1 when the page is not what the records give, or is too long

A benchmark adds a record (bench/records.py, `write_record`); this command makes the page show it.
The dated narrative behind the numbers lives in docs/results/<topic>.md, written by hand."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from bench.algorithmic import headline
from bench.algorithmic.tasks import LABELS, PAPER, PAPER_LSTM, TASKS
from bench.gpu.session import FAST, FAST_COMPILED, MASTER, MASTER_CUDNN
from bench.mt import compare
from bench.records import RECORDS, ROOT, markdown_table, mean_pair, spread

PAGE = ROOT / "docs" / "results.md"
MAX_LINES = 300
LEARNED = 0.5  # mean dev character accuracy from which a cell has learned its task in distribution
ALGORITHMIC_SETTING = "len40-400_steps1000_tok2048_06b7eff0"  # the grid at the paper's lengths
# Learning to Execute's programs: 10k updates at a quarter of the learning rate (at the default rate
# nothing is learned in 10k updates), and the same runs continued (`--continue-from`) to 20k and 50k
PROGRAM_SETTINGS = {
    "10k": "len40-400_steps10000_tok2048_2e1dac17",
    "20k": "len40-400_steps20000_tok2048_94a5226a",
    "50k": "len40-400_steps50000_tok2048_c3eb74ec",
}
Lines = list[str]


def newest(records: Path, topic: str, claim: str) -> dict:
    """The claim's newest record, bench/records/<topic>/<claim>-<YYYY-MM-DD>[-N].json (-2, -3: a
    day's second and third)."""
    pattern = re.compile(re.escape(claim) + r"-(\d{4}-\d{2}-\d{2})(?:-(\d+))?\.json")
    found = sorted(
        (m.group(1), int(m.group(2) or 1), path)
        for path in (records / topic).glob("*.json")
        if (m := pattern.fullmatch(path.name))
    )
    if not found:
        raise FileNotFoundError(f"no record of {claim!r} in {records / topic}")
    return json.loads(found[-1][-1].read_text(encoding="utf-8"))


def provenance(record: dict, notes: str) -> Lines:
    """Where the numbers come from: the command, the host, the date and the topic's notes."""
    return [
        "",
        f"`{record['command']}`  ",
        f"Host: {record['host']}. Date: {record['date']}. Notes: [{notes}](results/{notes}.md).",
    ]


def by(rows: list[dict], *keys: str) -> dict[tuple, dict]:
    """Rows indexed by the values of `keys`."""
    return {tuple(r[k] for k in keys): r for r in rows}


def seconds(value: float | None) -> str:
    """A time as the page shows it: three significant digits, '-' for none."""
    return "-" if value is None else f"{value:.3g}"


def ratio(value: float) -> str:
    """A speed ratio: 2.04x."""
    return f"{value:.2f}x"


def dated(runs: list[dict]) -> str:
    """The span of the runs' dates, and how many records carry none (written before they did)."""
    dates = sorted(r["date"] for r in runs if r.get("date"))
    span = f"{dates[0]} to {dates[-1]}" if dates else ""
    undated = len(runs) - len(dates)
    return "; ".join(filter(None, [span, f"{undated} of {len(runs)} records undated" if undated else ""]))


def mt_quality(records: Path) -> Lines:
    """The MT comparison's runs at 60 minutes (ours and the peers') and at 20 (screen, ablation)."""
    grouped = compare.groups(compare.load(records / "mt-compare"))
    runs = [r for group in grouped.values() for r in group]
    cpus = sorted({r["machine"]["cpu"] for r in runs if r.get("machine")})
    long_keys = ("system", "seeds", "bleu", "chrf", "updates", "tokens", "params", "flops")
    long_columns = {k: compare.COLUMNS[k] for k in long_keys}
    short_columns = {
        k: v for k, v in compare.COLUMNS.items() if k not in ("budget", "tokens", "params", "flops")
    }
    return [
        "## Translation quality per CPU hour",
        "",
        "English→German on the l10n corpus (562k human translations from Debian's gettext catalogs), one "
        "CPU thread per run, test BLEU / chrF on its 2,000 test lines (beam 4, sacrebleu), mean ± standard "
        "deviation over seeds. `small-fast` rows score the final weights; `small-fast+avg5` is the preset "
        "as it ships (the mean of its last five checkpoints). Rows marked `[slower host]` ran on hosts "
        "about 1.5x slower (for every toolkit), `[dec05 host]` on 2026-12-05 at the reference host's "
        "speed, each beside one single-thread job (issue 91's ACT runs with a floor of two steps, the "
        "fixed-depth UT and the Transformer); a label's rows pair only among themselves. The FLOPs "
        "column counts a UT with ACT at its cap of steps. Below, 60 minutes of training (peers: of their "
        "training process):",
        "",
        *markdown_table(compare.rows(grouped, 60.0), long_columns),
        "",
        "20 minutes: `small-fast`'s one-change ablation (last column: BLEU against the row without the "
        "change, paired seeds; the screen that found `small-fast`, a change at a time from `small`, is in "
        "the [notes](results/mt.md) and `--report`):",
        "",
        *markdown_table(
            [row for row in compare.rows(grouped, 20.0) if row["system"].startswith("transduce small-fast")],
            short_columns,
        ),
        "",
        "`python -m bench.mt.recipes --recipes RECIPE --minutes M --seeds 1 2 3 [--host slower]`; peers: "
        "`python -m bench.mt.toolkits --toolkit joeynmt|onmt [--recipe small-fast] --data bench/out/l10n-de "
        "--spm bench/out/l10n-de-data[-4000]/src.spm --minutes 60 --seed N [--host slower]`; each run's "
        "exact commands are in its record, `bench/records/mt-compare/`. "
        f"Host: {', '.join(cpus) or 'not recorded'}, 2 CPUs, one thread per run. Date: {dated(runs)}. "
        "`python -m bench.mt.recipes --report` prints the full table. Notes: [mt](results/mt.md).",
    ]


def versus_marian(records: Path) -> Lines:
    """Three seeds of `small` against a MarianMTModel trained the same way, and the recipe check."""
    runs = [newest(records, "mt", f"mt-small{suffix}") for suffix in ("", "-seed2", "-seed3")]
    rows = []
    for seed, record in enumerate(runs, 1):
        ours, hf = (
            by(record["rows"], "system")[("transduce",)],
            by(record["rows"], "system")[("HF MarianMTModel",)],
        )
        rows.append({"seed": seed, "ours": ours, "hf": hf})
    mean = {
        side: {m: statistics.fmean(r[side][m] for r in rows) for m in ("bleu", "chrf")}
        for side in ("ours", "hf")
    }
    parity = newest(records, "mt", "mt-parity-small")
    any_seed = re.sub(r" --seed \d+", "", runs[-1]["command"])
    return [
        "## Against a Hugging Face MarianMTModel, same recipe",
        "",
        "The `small` preset and a MarianMTModel from the same initial weights, on the same batches with "
        "the same recipe, 60 minutes of one CPU thread each, side by side (8,000-piece BPE; test: 2,000 "
        f"pairs, beam 4). Without dropout the two systems' training losses differ by at most "
        f"{parity['max_difference']} over {parity['steps']} steps (`{parity['command']}`, "
        f"{parity['date']}): the recipes are the same.",
        "",
        "| seed | transduce BLEU / chrF | HF BLEU / chrF | updates (transduce / HF) |",
        "|---|---|---|---|",
        *(
            f"| {r['seed']} | {r['ours']['bleu']:.2f} / {r['ours']['chrf']:.2f} | {r['hf']['bleu']:.2f} / "
            f"{r['hf']['chrf']:.2f} | {r['ours']['steps']} / {r['hf']['steps']} |"
            for r in rows
        ),
        f"| mean | {mean['ours']['bleu']:.2f} / {mean['ours']['chrf']:.2f} | {mean['hf']['bleu']:.2f} / "
        f"{mean['hf']['chrf']:.2f} | |",
        "",
        f"`{any_seed} --seed N`  ",
        f"Host: {runs[-1]['host']}. Date: {runs[0]['date']} to {runs[-1]['date']}. "
        "Notes: [mt](results/mt.md).",
    ]


def domain(records: Path) -> Lines:
    """Fine-tuning on a new domain, directly and through OPUS-MT's format."""
    record = newest(records, "mt", "domain")
    columns = {"model": "model", "updates": "updates", "cpu_seconds": "CPU s"}
    scores = {"ddtp": "DDTP test BLEU / chrF", "l10n": "l10n test BLEU / chrF"}

    def pair(side: str) -> Callable[[dict], str]:
        return lambda r: f"{r[f'{side}_bleu']:.2f} / {r[f'{side}_chrf']:.2f}"

    rows = [{**r, **{side: pair(side)(r) for side in scores}} for r in record["rows"]]
    return [
        "## Domain adaptation",
        "",
        "A general En→De model (l10n) fine-tuned on Debian package descriptions (DDTP), directly and "
        "through OPUS-MT's format (`export --format marian`, then `import marian`):",
        "",
        *markdown_table(rows, columns | scores),
        *provenance(record, "mt"),
    ]


def multilingual(records: Path) -> Lines:
    """One multilingual model against bilingual ones at equal updates and at equal training FLOPs
    (bench/mt/multilingual.py)."""
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((records / "mt-multi").glob("*.json"))]
    bilingual = [r for r in runs if r["system"] == "bilingual"]
    multi = [r for r in runs if r["system"] == "multilingual"]
    at_flops = [r["equal_compute"] for r in multi if "equal_compute" in r]
    pairs = sorted({lang for r in multi for lang in r["pairs"]})

    def cell(found: list[dict], lang: str) -> str:
        scores = [r["pairs"][lang] for r in found if lang in r["pairs"]]
        return (
            f"{spread([x['bleu'] for x in scores])} / {spread([x['chrf'] for x in scores])} ({len(scores)})"
        )

    rows = [
        {
            "pair": f"en-{lang}",
            "bi": cell(bilingual, lang),
            "flops": cell(at_flops, lang),
            "multi": cell(multi, lang),
        }
        for lang in pairs
    ]
    minutes = {
        "bilingual": statistics.fmean(r["train_minutes"] for r in bilingual),
        "multilingual": statistics.fmean(r["train_minutes"] for r in multi),
    }
    steps = ", ".join(f"{r['step']:,} ({r['flops_ratio']:.2f}x their FLOPs)" for r in at_flops)
    return [
        "## Many languages in one model",
        "",
        f"English→{'/'.join(pairs)} on the l10n corpora (Debian's catalogs): one `small-fast` model for "
        f"every pair (`prepare --pair`: one {multi[0]['vocab']:,}-piece vocabulary, `>>xxx<<` tags; "
        f"{multi[0]['parameters'] / 1e6:.2f}M parameters, {multi[0]['steps']:,} updates) against a "
        f"bilingual one per pair (4,000 pieces, {bilingual[0]['parameters'] / 1e6:.2f}M parameters, "
        f"{bilingual[0]['steps']:,} updates each, on one thread of a host shared with other jobs: "
        f"{minutes['bilingual']:.0f} training minutes each, the multilingual {minutes['multilingual']:.0f}). "
        "Equal updates give the multilingual model more arithmetic (its output layer is twice as "
        "large); at equal training FLOPs (the three bilingual models' together, from each run's "
        f"log) it is its checkpoint at update {steps}, by seed. Test BLEU / chrF (beam 4, each pair's 2,000 "
        "lines), mean ± standard deviation over seeds (their number in brackets):",
        "",
        *markdown_table(
            rows,
            {
                "pair": "pair",
                "bi": "bilingual",
                "flops": "multilingual, equal FLOPs",
                "multi": "equal updates",
            },
        ),
        "",
        f"`{multi[0]['command']}`, then `python -m bench.mt.multilingual --equal-compute`  ",
        f"Host: {multi[-1]['host']}. Date: {multi[-1]['date']}. Notes: [mt](results/mt.md).",
    ]


def decoding_speed(records: Path) -> Lines:
    """Seconds per batch of every engine, transduce's speed-ups beside them."""
    record = newest(records, "decode", "decode")
    rows = record["rows"]
    cells = by(rows, "preset", "search", "engine")
    engines = ("transduce", "transduce-unpacked", "transduce-int8", "hf", "ct2", "ct2-int8")
    table = []
    for preset, search in dict.fromkeys((r["preset"], r["search"]) for r in rows):
        time = {e: cells[(preset, search, e)]["seconds"] for e in engines}
        table.append(
            {"preset": preset, "search": search}
            | {e: seconds(time[e]) for e in engines}
            | {
                "vs_hf": ratio(time["hf"] / time["transduce"]),
                "vs_ct2": ratio(time["ct2"] / time["transduce"]),
            }
        )
    same = [r for r in rows if r["engine"] in ("transduce", "transduce-unpacked")]
    headings = dict(zip(engines, ("transduce", "unpacked", "int8", "HF", "CT2", "CT2 int8"), strict=True))
    return [
        "## Decoding speed",
        "",
        "Seconds per batch of 32 sentences, 40 output tokens each (EOS blocked), random weights shared by "
        "every engine; transduce float32 (oneDNN-packed, the default), unpacked, and `--quantize int8`; "
        "HF `generate`; CTranslate2 float32 and int8. Speed-ups are of transduce float32. transduce float32 "
        f"gives HF's tokens in {sum(r['same_tokens_as_hf'] for r in same)} of {len(same)} rows (packed and "
        "unpacked).",
        "",
        *markdown_table(
            table,
            {"preset": "preset", "search": "search"} | headings | {"vs_hf": "vs HF", "vs_ct2": "vs CT2"},
        ),
        *provenance(record, "decoding"),
    ]


def e2e_table(record: dict, engines: dict[tuple[str, str], str], threads: tuple[int, ...]) -> Lines:
    """Seconds per (lines, search, threads) for the given (engine, weights), BLEU of the first."""
    rows = [r for r in record["rows"] if r["vocabulary"] == "full" and r["threads"] in threads]
    cells = by(rows, "lines", "search", "threads", "engine", "weights")
    table = []
    for lines, search, count in dict.fromkeys((r["lines"], r["search"], r["threads"]) for r in rows):
        row = {"lines": lines, "search": search, "threads": count}
        for (engine, weights), heading in engines.items():
            row[heading] = seconds(cells.get((lines, search, count, engine, weights), {}).get("seconds"))
        bleus = [
            cells[(lines, search, count, e, w)]["bleu"]
            for e, w in engines
            if (lines, search, count, e, w) in cells
        ]
        row["BLEU"] = " / ".join(f"{b:.1f}" for b in bleus)
        table.append(row)
    return markdown_table(table)


def end_to_end(records: Path) -> Lines:
    """Real text, raw in and detokenised out: the recommended model, and one HF can run too."""
    fast = newest(records, "decode", "decode-e2e-small-fast")
    small = newest(records, "decode", "decode-e2e")
    fast_engines = {
        ("transduce", "float32"): "transduce",
        ("transduce", "int8"): "transduce int8",
        ("CTranslate2", "float32"): "CT2",
        ("CTranslate2", "int8"): "CT2 int8",
        ("transduce --engine ctranslate2", "float32"): "--engine ct2",
        ("transduce --engine ctranslate2", "int8"): "--engine ct2 int8",
    }
    hf_engines = {
        ("transduce", "float32"): "transduce",
        ("CTranslate2", "float32"): "CT2",
        ("HF generate", "float32"): "HF",
    }
    return [
        "## Decoding real text",
        "",
        "Seconds to translate the l10n test set (all 2,000 lines, and the 500 longest) from raw text to "
        "detokenised text, tokenisation included, the same length-sorted batches of 4,096 source tokens "
        "for every engine. The `small-fast` checkpoint the command names; CT2 is CTranslate2 called "
        "directly, --engine ct2 `transduce translate --engine ctranslate2` on the same export; BLEU in the "
        "order of the columns:",
        "",
        *e2e_table(fast, fast_engines, (1, 2)),
        *provenance(fast, "decoding"),
        "",
        "The `small` checkpoint (d 256, 3+3 layers, post-norm: it exports to Marian, so HF `generate` runs "
        "it too), one thread:",
        "",
        *e2e_table(small, hf_engines, (1,)),
        *provenance(small, "decoding"),
    ]


def int8_width(records: Path) -> Lines:
    """Where the torch engine's int8 pays: decoding speed against float32 by model width."""
    record = newest(records, "decode", "int8-width")
    cells = by(record["rows"], "preset", "search", "weights")
    table = [
        {"preset": preset, "d_model": d_model}
        | {
            f"{search} {weights}": ratio(cells[(preset, search, weights)]["vs_float32"])
            for search in ("greedy", "beam 4")
            for weights in ("int8", "int8-all")
        }
        for preset, d_model in dict.fromkeys((r["preset"], r["d_model"]) for r in record["rows"])
    ]
    return [
        "## int8 by model width (torch engine)",
        "",
        "Speed of `--quantize int8` against float32 (oneDNN-packed): int8 on the maps of at least 2^18 "
        "weights as it decodes, and int8 on every linear map (what it did before); random weights, "
        "batch 32, 40 output tokens. From d_model 512 every map has 2^18 weights or more, so the two are "
        "the same model there and their difference is the run's noise. What int8 costs in BLEU: the "
        "real-text table above (transduce int8 against transduce):",
        "",
        *markdown_table(table),
        *provenance(record, "decoding"),
    ]


def cpu_training(records: Path) -> Lines:
    """Training throughput against HF per preset and precision, with peak memory."""
    record = newest(records, "train", "train")
    cells = by(record["rows"], "preset", "precision", "engine")
    table = []
    for preset, precision in dict.fromkeys((r["preset"], r["precision"]) for r in record["rows"]):
        ours, hf = cells[(preset, precision, "transduce")], cells[(preset, precision, "hf")]
        table.append(
            {
                "preset": preset,
                "precision": precision,
                "transduce tokens/s": ours["tokens_per_s"],
                "HF tokens/s": hf["tokens_per_s"],
                "vs HF": ratio(ours["tokens_per_s"] / hf["tokens_per_s"]),
                "peak RSS MB (transduce / HF)": f"{ours['peak_rss_mb']} / {hf['peak_rss_mb']}",
            }
        )
    return [
        "## Training throughput, CPU",
        "",
        "Target tokens per second of forward + backward + Adam on one batch of 128 x 32 target tokens, "
        "the same weights and batch for both, 2 threads:",
        "",
        *markdown_table(table),
        *provenance(record, "training"),
    ]


def _prepare_at(size: int, runs: dict[int, dict], compared: dict[int, dict]) -> str:
    """One corpus size's prepare runs in a clause: pairs/s, peak memory (all processes) and the
    encoding phase against sentencepiece, per number of workers, and whether they agree."""
    workers = sorted(runs)

    def each(key: str, fmt: str) -> str:
        return " / ".join(format(runs[k][key], fmt) for k in workers)

    same = compared.get(size)
    agree = ""
    if same is not None:
        agree = f"; 2 workers {ratio(same['speedup_2_workers'])} the pairs/s of one, " + (
            "the same dataset" if same["same_output"] else "different datasets"
        )
    return (
        f"{size:,} pairs with {' / '.join(map(str, workers))} workers: {each('pairs_per_s', ',')} pairs/s, "
        f"peak {each('peak_mb_all_processes', ',')} MB, encoding at {each('encoding_vs_floor', '.2f')} of "
        f"sentencepiece's rate{agree}"
    )


def data_at_scale(records: Path) -> Lines:
    """prepare's speed and memory by corpus size and workers; training start-up on large data. In
    sentences rather than tables: the page has few lines to spare."""
    prepare, startup = newest(records, "data", "prepare-scale"), newest(records, "train", "train-startup")
    compared = {c["pairs"]: c for c in prepare["compared"]}
    sizes: dict[int, dict[int, dict]] = {}
    for row in prepare["rows"]:
        sizes.setdefault(row["pairs"], {})[row["workers"]] = row
    starts = "; ".join(
        f"{r['pairs']:,} pairs ({r['arrays_gb']} GB of arrays): the first batch after {r['startup_s']} s "
        f"at {r['startup_max_rss_mb']:,} MB peak, the first epoch's batches {r['first_epoch_batches_s']} s"
        for r in startup["rows"]
    )
    return [
        "## Data at scale",
        "",
        "`transduce prepare` on synthetic corpora (about 50 bytes a side), streamed in chunks, memory summed "
        "over its processes, its encoding phase against sentencepiece's encoder alone on the same cores: "
        + "; ".join(_prepare_at(n, runs, compared) for n, runs in sizes.items())
        + f". `train` on memory-mapped synthetic datasets (`{startup['command']}`, {startup['date']}): "
        + f"{starts}.",
        *provenance(prepare, "data"),
    ]


TRAINER_VARIANTS = {  # the GPU session's trainer variants, as the page names them
    "": "as it was",
    MASTER: "bf16 weights (fp32 master copies)",
    FAST: "fast path: widths padded to 8, bf16 weights",
    FAST_COMPILED: "fast path, compiled",
    MASTER_CUDNN: "bf16 weights, cuDNN attention first",
}


def _step_name(row: dict) -> str:
    """A benchmark row as the page names it: bf16 (autocast) or bf16-master, eager or compiled."""
    return f"{row['precision']} {'compiled' if row['compile'] else 'eager'}"


def gpu_sessions(records: Path, *files: str) -> tuple[dict, Path]:
    """The newest device session (bench/gpu/session.py) whose folder holds all of `files`, and
    that folder: a session that ran some stages leaves the others' figures to an earlier one."""
    pattern = re.compile(r"gpu-session-(\d{4}-\d{2}-\d{2})(?:-(\d+))?\.json")
    found = sorted(
        (
            (m.group(1), int(m.group(2) or 1), path)
            for path in (records / "gpu").glob("*.json")
            if (m := pattern.fullmatch(path.name))
        ),
        reverse=True,
    )
    for *_, path in found:
        record = json.loads(path.read_text(encoding="utf-8"))
        folder = records / "gpu" / record["results"]
        if all((folder / name).exists() for name in files):
            return record, folder
    raise FileNotFoundError(f"no gpu-session record with {', '.join(files)} in {records / 'gpu'}")


PEERS = {  # the session's peer trainers, as the page names them
    "hf": "HF MarianMTModel, plain loop, bf16 autocast, PyTorch's attention kernel order",
    "hf-efficient": "HF MarianMTModel, the same, our attention kernel order",
    "onmt": "OpenNMT-py 3.5.1, its recipe, fp16 AMP",
}


def _read(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text(encoding="utf-8"))


def gpu_trainers(records: Path) -> Lines:
    """Our trainer beside the peer trainers on one device, time to quality, CTranslate2 on CUDA."""
    record, folder = gpu_sessions(records, "peers.json", "trainer.json")
    ours = _read(folder, "trainer.json")["variants"]
    best = max(v["tokens_per_s"] for v in ours if v["tokens_per_s"])
    rows = [
        {
            "trainer": f"transduce: {TRAINER_VARIANTS.get(v['overrides'], v['overrides'])}",
            "target tokens/s": f"{v['tokens_per_s']:,.0f}",
            "last window": f"{v['window_rates'][-1]:,.0f}",
            "target tokens a step": f"{v['tokens_per_step']:,.0f}",
            "device MiB": f"{v['device_mib']:,.0f}",
            "ours / it": f"{best / v['tokens_per_s']:.2f}",
        }
        for v in ours
    ]
    rows += [
        {
            "trainer": PEERS[p["peer"]],
            "target tokens/s": f"{p['tokens_per_s']:,.0f}",
            "last window": f"{p['window_rates'][-1]:,.0f}",
            "target tokens a step": f"{p['tokens_per_step']:,.0f}",
            "device MiB": f"{p['device_mib']:,.0f}",
            "ours / it": f"{best / p['tokens_per_s']:.2f}",
        }
        for p in sorted(_read(folder, "peers.json")["rows"], key=lambda p: -p["tokens_per_s"])
    ]
    ttq = _read(folder, "ttq.json")
    ct2 = _read(folder, "ct2.json")["rows"]
    engines = by([r for r in ct2 if "compute_type" in r], "compute_type", "beam")
    torch_rows = by([r for r in ct2 if r.get("engine") == "torch"], "precision", "beam")
    decoding = "; ".join(
        f"{compute} "
        + ", ".join(
            "{search} {ours_s:.3f} / {raw_s:.3f} s".format(search=search, **engines[compute, beam])
            for search, beam in (("beam 4", 4), ("greedy", 1))
        )
        + f" ({min(engines[compute, b]['same_text'] for b in (4, 1)):.0%} the same text)"
        for compute in dict.fromkeys(c for c, _ in engines)
    )
    torch_line = ", ".join(
        f"{p} {torch_rows[p, 4]['seconds']:.2f} s (greedy {torch_rows[p, 1]['seconds']:.2f})"
        for p in ("fp32", "bf16")
    )
    host = newest(records, "train", "host-overhead")
    loops = {row["loop"]: row["µs a step"] for row in host["rows"]}
    return [
        "Trainers of `base`'s size on one device, the carried l10n En→De data (8k pieces), bf16 "
        "(OpenNMT-py 3.5.1 has fp16 only), tokens/s the median of 20-update windows after the first "
        "(the peers' windows still rose at the end: last window beside it); targets: ours >= 2x HF "
        "and >= 1.3x OpenNMT-py. The host time our loop adds to its step, measured on the CPU where "
        f"the host dominates (`{host['command']}`, {host['date']}): {host['added_us_per_step']} µs a "
        f"step against the bare step's {loops['bare loop']:,} µs:",
        "",
        *markdown_table(rows),
        "",
        f"Time to quality: `transduce train` with the device recipe for {ttq['minutes']} minutes of "
        f"training ({ttq['updates']:,} updates, {ttq['target_tokens'] / 1e6:.0f}M target tokens, "
        f"{ttq['tokens_per_s']:,.0f} tokens/s), its last checkpoints averaged: test BLEU "
        f"**{ttq['bleu']:.2f}**, chrF {ttq['chrf']:.2f} (beam 4), against {record['cpu_hour_bleu']}. "
        f"{onmt_time_to_quality(records)} "
        f"CTranslate2 on CUDA at {_read(folder, 'ct2.json')['sentences']:,} test sentences on that "
        "model, `--engine ctranslate2` against raw CTranslate2 (the target is within 10%): "
        f"{decoding}; our torch engine at beam 4: {torch_line}.",
        *provenance(record, "gpu"),
    ]


def onmt_time_to_quality(records: Path) -> str:
    """OpenNMT-py on our time-to-quality recipe and minutes (the session's `onmt-ttq` stage)."""
    try:
        record, folder = gpu_sessions(records, "onmt-ttq.json")
    except FileNotFoundError:
        return (
            "OpenNMT-py on the same recipe and minutes: not yet run on a device (`bench/gpu/gpu.sh "
            "onmt-ttq`, docs/results/gpu.md)."
        )
    run = _read(folder, "onmt-ttq.json")
    if run.get("bleu") is None:
        return f"OpenNMT-py on the same recipe and minutes ({record['date']}): no score ({run.get('error')})."
    saves = len(run["averaged"])
    model = (
        f"its last {saves} saves averaged" if saves > 1 else "its last save (none past the warmup to average)"
    )
    return (
        f"OpenNMT-py 3.5.1 on the same recipe for {run['minutes']} minutes of training "
        f"({run['updates']:,} updates at {run['tokens_per_s']:,.0f} target tokens/s, fp16 AMP), {model}: "
        f"test BLEU **{run['bleu']:.2f}**, chrF {run['chrf']:.2f} "
        f"(beam 4; {record['date']}, {record['host'].split(' (')[0]})."
    )


def gpu(records: Path) -> Lines:
    """The device sessions: trainers side by side (gpu_trainers), then the newest session's real
    trainer against the benchmark's step, MFU, decoding against Hugging Face generate."""
    record, folder = gpu_sessions(records, "bench.json", "decode.json", "tests.json")
    measured = _read(folder, "bench.json")
    tests = _read(folder, "tests.json")["result"]
    steps = "; ".join(
        f"`{p}` "
        + ", ".join(
            f"{_step_name(r)} {r['tokens_per_s']:,.0f} tokens/s ({r['mfu']:.1%} MFU)"
            for r in measured["rows"]
            if r["preset"] == p
        )
        for p in ("base", "big")
    )
    decoded = by(_read(folder, "decode.json")["rows"], "preset", "precision", "sentences", "beam")
    decoding = "; ".join(
        f"{search} at {sentences:,} sentences {max(r['dynamic_vs_hf'], r['static_vs_hf']):.2f}x"
        for sentences in (64, 1024)
        for search, beam in (("beam 4", 4), ("greedy", 1))
        if (r := decoded.get(("base", "bf16", sentences, beam)))
    )
    return [
        "## GPU",
        "",
        *gpu_trainers(records),
        "",
        f"The benchmark's step at the trainer's mean batch ({measured['tokens']:,} target tokens, random "
        f"sentences, vocabulary {measured.get('vocab', 32000):,}; bf16: autocast; bf16-master: bf16 "
        f"weights with fp32 copies in Adam, as the trainer): {steps} (targets: 40% and 50%). Decoding "
        f"`base` in bf16 against Hugging Face `generate` on the same weights (32 output tokens), HF's "
        f"time over ours: {decoding} (the target is 2.5x at beam 4 and 1,024). `gpu` tests: {tests}. "
        f"(`{record['command']}` on {record['date']}, the same kind of device.)",
    ]


def scaling(records: Path) -> Lines:
    """Full against local attention as inputs grow."""
    record = newest(records, "scaling", "scaling")
    rows = [r | {"full / local": f"{r['full_s'] / r['local_s']:.2f}"} for r in record["rows"]]
    columns = {"length": "length", "full_s": "full s", "local_s": "local s", "full_mb": "full MB"}
    return [
        "## Attention over long inputs",
        "",
        "The `base` encoder's forward pass on one sequence, full attention against local attention "
        "(radius 64, computed in blocks):",
        "",
        *markdown_table(rows, columns | {"local_mb": "local MB", "full / local": "full / local time"}),
        *provenance(record, "attention"),
    ]


def algorithmic_runs(
    records: Path, setting: str = ALGORITHMIC_SETTING
) -> dict[tuple[str, str, str], list[dict]]:
    """One setting's runs (by default the main grid's), by (task, model, positions)."""
    folder = records / "algorithmic" / setting
    grouped: dict[tuple[str, str, str], list[dict]] = {}
    for path in sorted(folder.glob("*-seed*.json")):
        run = json.loads(path.read_text(encoding="utf-8"))
        grouped.setdefault((run["task"], run["model"], run["positions"]), []).append(run)
    return grouped


GRID_MODELS = {"transformer": "T", "ut": "UT", "ut_act": "UT+ACT"}  # the grid's models, as tabled


def paper_cells(task: str) -> dict[str, str]:
    """The paper's character / sequence accuracy of the Transformer and the UT on `task`."""
    return {
        f"paper: {name}": "{:.2f} / {:.2f}".format(*PAPER[task][model])
        for model, name in (("transformer", "Transformer"), ("ut", "UT"))
    }


def program_rows(records: Path) -> list[dict[str, str]]:
    """Learning to Execute's program evaluation at each budget, teacher-forced (a mean over the
    cell's seeds, their count in brackets), beside the paper's LSTM, Transformer and UT."""
    program_runs = {
        budget: algorithmic_runs(records, setting) for budget, setting in PROGRAM_SETTINGS.items()
    }

    def forced(grouped: dict[tuple[str, str, str], list[dict]], task: str, model: str) -> str:
        cell = grouped.get((task, model, "none")) or []
        pair = mean_pair(cell, "forced_char", "forced_seq")
        return pair if pair == "-" else f"{pair} ({len(cell)})"

    return [
        {"task": task.removeprefix("lte_"), "paper: LSTM": "{:.2f} / {:.2f}".format(*PAPER_LSTM[task])}
        | paper_cells(task)
        | {
            f"ours at {budget}: {label}": forced(grouped, task, model)
            for budget, grouped in program_runs.items()
            for model, label in GRID_MODELS.items()
        }
        for task in TASKS
        if TASKS[task].program
    ]


def algorithmic(records: Path) -> Lines:
    """The grid beside the paper's Table 3, and the Learning-to-Execute tasks."""
    runs = algorithmic_runs(records)
    long = [
        {"task": task, **paper_cells(task)}
        | {
            f"ours, {positions}: {label}": mean_pair(runs.get((task, model, positions)) or [])
            for positions in ("offset", "subset_spread")
            for model, label in GRID_MODELS.items()
        }
        for task in ("copy", "reverse", "addition")
    ]
    lte = [
        {"task": task, **paper_cells(task)}
        | {
            f"ours: {label}": mean_pair(runs.get((task, model, "none")) or [])
            for model, label in GRID_MODELS.items()
        }
        for task in TASKS
        if TASKS[task].lte and not TASKS[task].program
    ]
    programs = program_rows(records)
    # a model or budget not run there has no column
    measured = {key: key for key in programs[0] if any(row[key] != "-" for row in programs)}
    every = [r for group in runs.values() for r in group]
    minutes = statistics.median(r["train_cpu_minutes"] for r in every)
    machines = sorted({r["machine"] for r in every if r.get("machine")})
    return [
        "## Length generalisation: the Universal Transformer's tasks",
        "",
        "Character / sequence accuracy at length 400 after training on lengths 1-40 (1,000 updates of "
        "2,048 tokens, tensor2tensor's tiny sizes, mean of 3 seeds), with the paper's random start offsets "
        "and with random position subsets evaluated on spread positions (`subset_spread`), beside the "
        "paper's Table 3:",
        "",
        *markdown_table(long),
        "",
        "Learning to Execute's memorisation tasks at length 55, in distribution (dev split), T, UT and "
        "UT+ACT, beside the paper's Transformer and UT: "
        + "; ".join(
            f"{row['task'].removeprefix('lte_')} {', '.join(row[f'ours: {m}'] for m in GRID_MODELS.values())}"
            f" ({row['paper: Transformer']}, {row['paper: UT']})"
            for row in lte
        )
        + ".",
        "",
        "Learning to Execute's program evaluation (nesting 2, length 5, the mix strategy; dev split, "
        "teacher-forced as tensor2tensor evaluates; 10,000 updates at a quarter of the learning rate, "
        "continued to 20,000 and 50,000; at the default rate nothing is learned; ours: mean over seeds, "
        "their number in brackets; a model not run at a budget has no column), beside the paper's "
        "Table 6 (`--tasks lte_program lte_control lte_addition --lr-scale 0.25 --steps 10000`, then "
        "`--steps 20000 --continue-from 10000` and `--steps 50000 --continue-from 20000`):",
        "",
        *markdown_table(programs, measured),
        "",
        "`python -m bench.algorithmic.grid --tasks copy reverse addition --models transformer ut ut_act "
        "--positions none offset subset_spread --seeds 3 --lte --threads 1`  ",
        f"Host: {'; '.join(machines) or 'one CPU thread (x86_64, torch 2.13.0+cpu)'}, "
        f"a median {minutes:.0f} CPU minutes of training a run. Records: "
        f"`bench/records/algorithmic/{ALGORITHMIC_SETTING}/` ({len(every)} runs). Notes: "
        "[algorithmic](results/algorithmic.md).",
        "",
        *headline_table(records),
    ]


def headline_table(records: Path) -> Lines:
    """The best setting so far of each model at length 400 (headline.json, `grid --report`)."""
    path = records / "algorithmic" / "headline.json"
    if not path.exists():
        return []
    rows = json.loads(path.read_text(encoding="utf-8"))
    for row in rows:
        row["model"] = LABELS[row["model"]]
        row["setting"] = f"{setting_id(row['setting'])}, {row['positions']}"
        row["paper"] = "{:.2f} / {:.2f}".format(*row["paper"])
        row["teacher_forced"] = best_forced(row["teacher_forced"])
    columns = {"task": "task", "model": "model", "char": "char", "seq": "seq", "n": "n", "updates": "updates"}
    columns |= {"device": "device", "setting": "setting, positions"}
    columns |= {
        "teacher_forced": "teacher-forced 1-400: best (setting, n, updates)",
        "paper": "paper (UT: one row)",
    }
    return [
        "The best setting so far of each model at length 400 (every setting trained on 1-40; "
        "`bench/records/algorithmic/headline.json`, written by `python -m bench.algorithmic.grid --report`), "
        "greedy decoding's char / seq, and the best by tensor2tensor's measure (teacher-forced over one "
        "example of each length 1-400, most likely how the paper measured; the records that have it), "
        "and the greedy best's accuracy against test length:",
        "",
        *markdown_table(rows, columns, {"char": "{:.2f}".format, "seq": "{:.2f}".format}),
        "",
        "![accuracy against test length, best setting of each model](results/algorithmic-headline.png)",
        *teacher_forced(records),
    ]


def setting_id(folder: str) -> str:
    """A grid setting folder's short name: the hash that ends it."""
    return folder.rsplit("_", 1)[-1]


def best_forced(best: dict | None) -> str:
    """A headline row's best setting by tensor2tensor's measure, in one cell."""
    if best is None:
        return "-"
    where = f"{setting_id(best['setting'])} {best['positions']}, {best['n']}, {best['updates']}"
    return f"{best['char']:.2f} / {best['seq']:.2f} ({where})"


def t2t_rank(runs: list[dict]) -> tuple[float, float, int]:
    """A cell's standing by tensor2tensor's measure, ranked as the headline ranks settings."""
    means = {f: statistics.fmean(r[f"t2t_{f}"] for r in runs) for f in ("seq", "char")}
    return headline.rank(means | {"n": len(runs)})


def teacher_forced(records: Path) -> Lines:
    """The cells measured teacher-forced too (a record field since 2026-11-27): greedy decoding's
    accuracy at 400 beside the argmax's given the reference's prefix, at 400 and over one example
    of each length 1..400 (tensor2tensor's dev set and default evaluation); means over seeds. Only
    the cells that learned the task in distribution (mean dev character accuracy >= LEARNED): for
    the others, at chance, the two decodings say nothing about length (the notes list them). Each
    (task, model) at its best positions setting by tensor2tensor's measure, ranked as the headline
    ranks (`headline.rank`), that setting at its longest training: the other settings, shorter runs
    and controls at other sizes than the paper's (`headline.at_paper_sizes`) are in the notes. Seeds
    are pooled only within one recipe (a setting but its number of updates): settings that differ
    in a learning rate or an ACT option (issue 91, named after the positions) are cells apart."""
    cells: dict[tuple[str, str, str, str, int], list[dict]] = {}
    for _, setting, run in headline.paper_size_runs(records / "algorithmic"):
        if "t2t_char" in run and run["task"] in PAPER:
            positions = run["positions"]
            if setting.get("position_range") and positions.startswith(("subset", "offset_range")):
                positions += f" ({setting['position_range']})"
            positions += "".join(f", {k} {v}" for k, v in sorted(setting.items()) if k.startswith("act_"))
            recipe = json.dumps({k: v for k, v in setting.items() if k != "steps"}, sort_keys=True)
            cells.setdefault((run["task"], run["model"], positions, recipe, run["updates"]), []).append(run)
    cells = {
        key: runs for key, runs in cells.items() if statistics.fmean(r["dev_char"] for r in runs) >= LEARNED
    }
    longest: dict[tuple[str, str, str, str], int] = {}
    for *recipe, updates in cells:
        longest[tuple(recipe)] = max(updates, longest.get(tuple(recipe), 0))
    cells = {key: runs for key, runs in cells.items() if key[4] == longest[key[:4]]}
    best: dict[tuple[str, str], tuple[str, str, str, str, int]] = {}
    for key in cells:
        if key[:2] not in best or t2t_rank(cells[key]) > t2t_rank(cells[best[key[:2]]]):
            best[key[:2]] = key
    cells = {key: cells[key] for key in best.values()}
    if not cells:
        return []

    rows = [
        {
            "task": task,
            "model": LABELS[model],
            "positions": positions,
            "updates": updates,
            "n": len(runs),
            "greedy at 400": mean_pair(runs),
            "teacher-forced at 400": mean_pair(runs, "forced_char", "forced_seq"),
            "teacher-forced, lengths 1-400": mean_pair(runs, "t2t_char", "t2t_seq"),
            "dev (greedy)": mean_pair(runs, "dev_char", "dev_seq"),
            "paper": "{:.2f} / {:.2f}".format(*PAPER[task]["ut" if model == "ut_act" else model]),
        }
        for (task, model, positions, _, updates), runs in sorted(cells.items())
    ]
    return [
        "",
        "Greedy decoding against teacher forcing (the argmax at each position given the reference's prefix: "
        "tensor2tensor's evaluation unless `eval_run_autoregressive` is set), at 400 and over one example of "
        "each length 1-400 (tensor2tensor's dev set), char / seq, mean of n seeds; `offset_range` draws the "
        "offset over positions 0-2,047 (or the range in brackets) instead of the paper's k < n (ACT options "
        "other than tensor2tensor's follow the positions); the cells "
        f"that learned the task in distribution (dev characters >= {LEARNED}: the others are at chance, "
        "see the [notes](results/algorithmic.md)), each model at its best positions by the teacher-forced "
        "1-400 accuracy (ranked as the headline ranks: sequences, then characters), at that setting's "
        "most updates:",
        "",
        *markdown_table(rows),
    ]


LOAD_COLUMNS = {
    "engine": "engine",
    "batching": "dynamic batching",
    "requests": "requests",
    "errors": "errors",
    "p50_ms": "p50 ms",
    "p99_ms": "p99 ms",
    "segments_per_s": "segments/s",
}


def serving(records: Path) -> Lines:
    """Throughput with and without batching; small requests' latency under a maximal one."""
    load, latency = newest(records, "serve", "serving"), newest(records, "serve", "serving-latency")
    columns = {"server": "server", "load": "load", "small_requests": "small requests", "p50_ms": "p50 ms"}
    return [
        "## Serving",
        "",
        "16 closed-loop clients against `transduce serve` (`small` preset trained 300 updates on reverse, "
        "greedy, 1 thread), dynamic batching on and off, on each engine (`--engine`):",
        "",
        *markdown_table(load["rows"], LOAD_COLUMNS, {"batching": lambda on: "on" if on else "off"}),
        *provenance(load, "serving"),
        "",
        "Small requests while a maximal request (64 x 127 symbols, beam 4) is decoded, before and after "
        "requests took turns:",
        "",
        *markdown_table(latency["rows"], columns | {"p99_ms": "p99 ms", "large_s": "large request s"}),
        *provenance(latency, "serving"),
        "",
        deployment(records),
    ]


def deployment(records: Path) -> str:
    """One paragraph: Argos Translate and LibreTranslate on our package, and the
    LibreTranslate-compatible API's throughput beside our own route's."""
    argos = newest(records, "serve", "argos")
    lt = newest(records, "serve", "libretranslate")["rows"][0]
    apis = by(newest(records, "serve", "serving-apis")["rows"], "api")
    alone = next(r for r in argos["rows"] if "per call" in r["ours"])
    ours, compat = apis[("transduce",)], apis[("libretranslate",)]
    share = compat["segments_per_s"] / ours["segments_per_s"]
    return (
        f"Deployment ([notes](argos-libretranslate.md), {argos['host']}, {argos['date']}): "
        f"Argos Translate on our exported package writes {alone['identical_as_argos_writes_pct']}% "
        f"of {alone['lines']} l10n lines as `translate --engine ctranslate2` with its settings "
        f"({alone['identical']} byte-identical; the rest differ by its `_` as a space; "
        "`python -m bench.serve.argos`); LibreTranslate serving it offline answered "
        f"{lt['equal_to_argos_with_lt_formatting']} of {lt['lines']} as Argos plus its own formatting, "
        f"{lt['downloads']} downloads (`python -m bench.serve.libretranslate`); the "
        f"LibreTranslate-compatible API served {compat['segments_per_s']} segments/s to /translate's "
        f"{ours['segments_per_s']} ({share:.2f}x), {compat['errors']} errors "
        "(`python -m bench.serve.load --apis transduce libretranslate --rounds 6 --seconds 60`)."
    )


def demo(records: Path) -> Lines:
    """What `make demo` and `make demo-reverse` print."""
    translation, reverse = newest(records, "demo", "demo"), newest(records, "demo", "demo-reverse")
    test = translation["rows"][0]
    dev, longer = reverse["rows"]
    rows = [
        {
            "command": "`make demo`",
            "job": translation["job"],
            "result": f"test BLEU {test['bleu']:.1f}, chrF {test['chrf']:.1f} (beam 4)",
            "time": translation["time"],
        },
        {
            "command": "`make demo-reverse`",
            "job": "the `small` preset learns `reverse`, 1,000 steps",
            "result": f"sequence accuracy {dev['seq_acc']:.2f} on lengths 1-10, "
            f"{longer['seq_acc']:.2f} on 11-20",
            "time": "about 10 minutes, 2 cores",
        },
    ]
    columns = {"command": "command", "job": "what it trains", "result": "result", "time": "wall time"}
    return [
        "## The demos",
        "",
        *markdown_table(rows, columns),
        "",
        f"Hosts and dates: `make demo` {translation['host']}, {translation['date']}; `make demo-reverse` "
        f"{reverse['host']}, {reverse['date']}.",
    ]


SECTIONS: list[Callable[[Path], Lines]] = [
    mt_quality,
    versus_marian,
    domain,
    multilingual,
    decoding_speed,
    end_to_end,
    int8_width,
    cpu_training,
    data_at_scale,
    gpu,
    scaling,
    algorithmic,
    serving,
    demo,
]


def render(records: Path = RECORDS) -> str:
    """The whole page."""
    lines = [
        "# Results",
        "",
        "<!-- Generated by `python -m bench.results` from bench/records/; edit the records or the "
        "generator, not this page (tests/test_results_page.py checks it is current). -->",
        "",
        "The newest number for each claim, with the command that reproduces it, its host and its date. "
        "Ratios compare engines measured in one run on one machine; CPU hosts are 2-core x86_64 machines. "
        "The notes behind the numbers, what was tried and what it superseded: [MT](results/mt.md), "
        "[decoding](results/decoding.md), [training](results/training.md), [data](results/data.md), "
        "[GPU](results/gpu.md), "
        "[attention](results/attention.md), [algorithmic tasks](results/algorithmic.md), "
        "[serving](results/serving.md).",
    ]
    for section in SECTIONS:
        lines += ["", *section(records)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=Path, default=RECORDS, help="the records to read")
    parser.add_argument("--out", type=Path, default=PAGE, help="the page to write")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the page differs from the records (writing or not: also "
        "if it is over its line limit)",
    )
    args = parser.parse_args()
    page = render(args.records)
    lines = len(page.splitlines())
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != page:
            sys.exit(f"{args.out} is not what the records give: run python -m bench.results")
    else:
        tmp = args.out.with_name(f".{args.out.name}.tmp")
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(args.out)
        print(f"{args.out}: {lines} lines")
    if lines > MAX_LINES:
        sys.exit(f"{args.out}: {lines} lines, over the page's {MAX_LINES}: shorten the generator's text")


if __name__ == "__main__":
    main()
