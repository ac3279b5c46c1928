"""Length generalisation on the UT paper's algorithmic tasks (Dehghani et al. 2018, section 3.3):
Transformer, UT and UT+ACT, with and without position randomisation, over several seeds.

    python -m bench.algorithmic.grid        # the whole grid: 3 tasks x 3 models x 2 x 3 seeds, many hours
    python -m bench.algorithmic.grid --tasks copy --models ut --positions offset --seeds 1 \\
        --steps 20 --eval-size 4 --lengths 40 80 --sweep-size 4 --test-len 120

The paper's setting, as tensor2tensor generates it: decimal strings, 100k training examples of
lengths 1..40, tested at length 400; tasks copy, reverse and addition (two little-endian numbers
joined by a separator, the target their little-endian sum: data.task=addition_le). Its UTs train
with "positions starting with randomized offsets" (model.position_randomisation=offset); beyond
the paper, Ruoss et al.'s random position subsets, evaluated on positions spread over the same
range (subset_spread).
tensor2tensor's own test set spans lengths 1..400; here the headline is length --test-len exactly
and a sweep over --lengths gives the curve.

Models, at tensor2tensor's tiny sizes (d_model 128, d_ff 512, 4 heads, dropout 0.1, pre-norm):
  transformer   2 encoder and 2 decoder layers            (transformer_tiny)
  ut            one shared layer, 8 steps per stack        (universal_transformer_tiny)
  ut_act        the same with ACT, at most 8 steps         (adaptive_universal_transformer_tiny)
Every run gets the same budget: --steps steps of --max-tokens-token batches of the same data.
Seed k seeds the data (data.seed) and the weights, dropout and position draws (train.seed).

Per run: training with transduce's Trainer, then greedy decoding: character and sequence accuracy at
--test-len (--eval-size examples, the test_long split) and at each of --lengths (--sweep-size
examples each), ACT ponder steps (mean and max per side, on dev and teacher-forced at --test-len),
CPU minutes (training over every invocation that trained the run, interrupted ones included, and the
run it continues; train_minutes counts training time across resumes). --continue-from N starts each
cell from the same cell's finished run at N updates (a copy; the learning rate does not depend on
the total, so it is the longer run itself). --lte adds Learning to Execute's memorisation tasks
(copy, double, reverse of 55 digits, in distribution: their headline is the dev split). A run's
result is a JSON file in bench/records/algorithmic/<setting>/ (committed, so that the grid fills up
over several sessions; the setting's name holds the sizes, a hash the rest) and its training runs in
bench/out/algorithmic/<setting>/ (not committed); runs with a result are skipped, lengths missing
from a result are evaluated from its checkpoint when it is still there, an interrupted run
(--minutes, Ctrl-C, or `kill -INT` of the grid, which passes it on to its cells) resumes from the
checkpoint it saved on its way out, and a run that another invocation is training or evaluating is
left to it (two one-thread invocations can fill one grid side by side). At the end the record folder
gets results.json, table.md (mean ± standard deviation over seeds beside the paper's numbers) and
accuracy_by_length.png, each over every run recorded at the setting (not only this invocation's);
--report writes them, training nothing. The results page (docs/results.md) summarises the main
setting's runs.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from bench.algorithmic import continuation, headline
from bench.algorithmic.jobs import GRID, Pool, cell_argv, cell_env, probe
from bench.algorithmic.tasks import LABELS, PAPER, TASKS, TINY
from bench.records import BENCH, ROOT, cpu_name, host_line, mean_pair, spread
from transduce.config import Config, load_config
from transduce.data.dataset import Split
from transduce.data.tasks import SHORTEST, examples_of_length
from transduce.decode.torch_engine import decode_all
from transduce.fileio import OutputError
from transduce.metrics import accuracy
from transduce.train.run_dir import RunLock
from transduce.train.trainer import Trainer
from transduce.train.validation import DevPass

OUT = BENCH / "out" / "algorithmic"  # the training runs
RECORDS = BENCH / "records" / "algorithmic"  # one result per run, committed
MODELS = {
    "transformer": ["model.arch=transformer"],
    "ut": ["model.arch=universal", "model.act=false"],
    "ut_act": ["model.arch=universal", "model.act=true"],
}
POSITIONS = {  # position randomisation: one draw per pass shared by both stacks, or one per stack;
    # subset evaluates on 0..n-1, subset_spread on positions spread over the range (position_eval)
    "none": ["model.position_randomisation=none"],
    "offset": ["model.position_randomisation=offset", "model.position_draw=shared"],
    "subset": ["model.position_randomisation=subset", "model.position_draw=shared"],
    "subset_spread": [
        "model.position_randomisation=subset",
        "model.position_draw=shared",
        "model.position_eval=spread",
    ],
    "offset_per_stack": ["model.position_randomisation=offset", "model.position_draw=per_stack"],
    "subset_per_stack": ["model.position_randomisation=subset", "model.position_draw=per_stack"],
    # tensor2tensor's own: a new offset at every recurrent step of each stack
    "offset_per_step": ["model.position_randomisation=offset", "model.position_draw=per_step"],
    # offsets over the whole position range (2,048), so that training meets the test's positions
    "offset_range": ["model.position_randomisation=offset_range", "model.position_draw=shared"],
    # the same range drawn by each stack for itself, as tensor2tensor's UT draws: source and target
    # positions no longer line up (tried as a push to reverse by content; models still use position)
    "offset_range_per_stack": [
        "model.position_randomisation=offset_range",
        "model.position_draw=per_stack",
    ],
}
SETTING_KEYS = [  # every argument a run's result depends on (not the grid, threads or output)
    *("train_len", "test_len", "lte_len", "steps", "max_tokens", "train_size", "eval_size", "sweep_size"),
    *("width", "d_ff", "heads", "layers", "ut_steps", "dropout", "norm", "warmup", "lr_scale"),
]

# Keys added later: part of a setting only away from these defaults, so that the settings recorded
# before them keep their names.
LATER_KEYS = {"act_tau": 0.01, "program_len": 5, "program_nesting": 2, "position_range": 2048}
# ACT's options (issue 91), model.<key> of the same name; None: the config's default
ACT_KEYS = {
    "act_halt_bias": 1.0,
    "act_min_steps": 1,
    "act_tau_encoder": None,
    "act_tau_decoder": None,
    "act_tau_start": 0,
    "act_tau_ramp": 0,
    "act_halt_lr": 1.0,
    "act_halt_detach": False,
}
LATER_KEYS |= ACT_KEYS


def setting(args: argparse.Namespace) -> dict[str, Any]:
    """Every argument a run's result depends on."""
    return {k: getattr(args, k) for k in SETTING_KEYS} | {
        k: getattr(args, k) for k, default in LATER_KEYS.items() if getattr(args, k) != default
    }


def act_settings(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """ACT's options the grid was given (None leaves the config's default)."""
    return [(k, getattr(args, k)) for k in ACT_KEYS if getattr(args, k) is not None]


def setting_name(args: argparse.Namespace) -> str:
    """The folder of one setting: its main sizes to read, a hash of every setting to be exact."""
    settings = setting(args)
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]
    return f"len{args.train_len}-{args.test_len}_steps{args.steps}_tok{args.max_tokens}_{digest}"


def config(args: argparse.Namespace, task: str, model: str, positions: str, seed: int) -> Config:
    """One run's configuration, as `transduce train small ...` would take it."""
    return load_config(
        "small",
        [
            f"model.d_model={args.width}",
            f"model.heads={args.heads}",
            f"model.d_ff={args.d_ff}",
            f"model.encoder_layers={args.layers}",
            f"model.decoder_layers={args.layers}",
            f"model.encoder_steps={args.ut_steps}",
            f"model.decoder_steps={args.ut_steps}",
            f"model.dropout={args.dropout}",
            f"model.norm={args.norm}",
            *POSITIONS[positions],
            *MODELS[model],
            *TASKS[task].data_overrides(args),
            f"data.task_train_size={args.train_size}",
            f"data.task_eval_size={args.eval_size}",
            f"data.max_tokens={args.max_tokens}",
            f"data.seed={seed}",
            f"train.seed={seed}",
            f"train.steps={args.steps}",
            f"train.warmup={args.warmup}",
            f"train.lr_scale={args.lr_scale}",
            f"model.act_tau={args.act_tau}",
            *[f"model.{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in act_settings(args)],
            f"model.position_range={args.position_range}",
            f"train.validate_every={args.curve_every or args.steps}",
            f"train.save_every={max(1, min(args.steps, 500))}",
            "train.keep_last=1",
            f"train.threads={args.threads}",
            "train.log_every=100",
            "decode.max_len_a=1.0",
            "decode.max_len_b=10",  # every target is at most one symbol longer than its input
        ],
    )


def encoded(trainer: Trainer, pairs: list[tuple[str, str]]) -> tuple[list[list[int]], list[list[int]]]:
    """Generated examples as the run's source and target token ids."""
    return (
        [trainer.data.src_vocab.encode(s) for s, _ in pairs],
        [trainer.data.tgt_vocab.encode(t) for _, t in pairs],
    )


def accuracy_at(trainer: Trainer, cfg: Config, length: int, count: int) -> dict[str, float]:
    """Character and sequence accuracy on `count` examples of one length (the same examples for
    every model and seed): greedy decoding's, and teacher-forced (`forced_*`)."""
    sources, refs = encoded(trainer, examples_of_length(cfg.data, length, count, seed=0))
    trainer.model.eval()
    hyps = decode_all(trainer.model, sources, cfg.decode.model_copy(update={"search": "greedy"}))
    acc = accuracy([h[0].tokens if h else [] for h in hyps], refs)
    return {
        "char": acc.char,
        "seq": acc.sequence,
        **forced(trainer.validator.dev_loss(Split.from_lists(sources, refs))),
    }


def t2t_accuracy(trainer: Trainer, cfg: Config, longest: int) -> dict[str, float]:
    """Teacher-forced accuracy over one example of each length up to `longest`: tensor2tensor's
    dev set of an algorithmic problem spans lengths 1..400, and its evaluation is teacher-forced
    unless eval_run_autoregressive is set, so this is how the UT paper's Table 3 was most likely
    computed (its text does not say)."""
    lengths = range(SHORTEST.get(cfg.data.task, 1), longest + 1)
    sources, refs = encoded(trainer, [examples_of_length(cfg.data, n, 1, seed=1)[0] for n in lengths])
    return forced(trainer.validator.dev_loss(Split.from_lists(sources, refs)), "t2t")


def forced(dev: DevPass, name: str = "forced") -> dict[str, float]:
    """A pass's teacher-forced accuracy as a record holds it (the argmax at each position given
    the reference's prefix): `<name>_char` and `<name>_seq`."""
    return {f"{name}_char": dev.forced.char, f"{name}_seq": dev.forced.sequence}


def write_json(path: Path, value: Any) -> None:
    """Atomically, under a name of this process's own (several processes fill one folder)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=1))
    os.replace(tmp, path)


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU model, for every record."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()


def curve(history: list[dict]) -> list[dict[str, float]]:
    """Dev accuracy (the training lengths) at each validation: the learning curve against updates,
    with ACT's mean steps per stack on dev where the model has them (`encoder_ponder` ...)."""
    return [
        {
            "updates": h["step"],
            "dev_char": h["dev_char_acc"],
            "dev_seq": h["dev_seq_acc"],
            "dev_loss": h["dev_loss"],
            **{k.removesuffix("_mean"): h[k] for k in h if k.endswith("_ponder_mean")},
        }
        for h in history
        if "dev_seq_acc" in h
    ]


Cell = tuple[str, str, str, int]  # task, model, positions, seed


def cell_name(cell: Cell) -> str:
    task, model, positions, seed = cell
    return f"{task}-{model}-{positions}-seed{seed}"


def missing_lengths(args: argparse.Namespace, task: str, result: dict | None) -> list[int]:
    """The sweep's lengths a result lacks, or holds without teacher-forced accuracy (records
    written before it was measured)."""
    lengths = [] if TASKS[task].lte else args.lengths
    return [n for n in lengths if result is None or "forced_char" not in result["by_length"].get(str(n), {})]


def incomplete(args: argparse.Namespace, task: str, result: dict) -> bool:
    """Whether a result lacks a measurement this version takes (teacher-forced accuracy came later)."""
    wanted = ["forced_char"] if TASKS[task].lte else ["forced_char", "t2t_char"]
    return any(key not in result for key in wanted) or bool(missing_lengths(args, task, result))


def pending(args: argparse.Namespace, folder: Path, cell: Cell) -> bool:
    """Whether a cell has anything left to do: no result, or measurements missing from its
    result while its checkpoint is still there (a recorded cell is skipped)."""
    result_file = folder / f"{cell_name(cell)}.json"
    if not result_file.exists():
        return True
    result = json.loads(result_file.read_text())
    return incomplete(args, cell[0], result) and (args.out / folder.name / cell_name(cell)).exists()


def new_result(
    args: argparse.Namespace, cell: Cell, trainer: Trainer, metrics: dict, train_cpu: float
) -> dict:
    """A cell's record, before the sweep over lengths."""
    task, model, positions, seed = cell
    headline = TASKS[task].headline
    test = trainer.validator.dev_loss(trainer.data.splits[headline])  # ACT steps and accuracy, teacher-forced
    return {
        "task": task,
        "model": model,
        "positions": positions,
        "seed": seed,
        "steps": trainer.state.step,
        "updates": trainer.state.step,
        "device": device_name(trainer.device),
        "device_type": trainer.device.type,
        "char": metrics[f"{headline}_char_acc"],
        "seq": metrics[f"{headline}_seq_acc"],
        **forced(test),
        "dev_char": metrics["dev_char_acc"],
        "dev_seq": metrics["dev_seq_acc"],
        "dev_loss": metrics["dev_loss"],
        "curve": curve(trainer.state.history),
        "ponder_dev": {k: v for k, v in metrics.items() if "_ponder_" in k},
        "ponder_test": test.ponder,
        "train_minutes": trainer.state.train_seconds / 60,
        "command": " ".join(["python", "-m", "bench.algorithmic.grid", *cell_argv(sys.argv[1:])]),
        "machine": host_line(args.threads),
        "train_cpu_minutes": train_cpu / 60,
        "by_length": {},
    }


def run(args: argparse.Namespace, folder: Path, cell: Cell) -> None:
    """Train and evaluate one (task, model, positions, seed), or complete its stored result. The
    cell is locked from its check to its record, so a run that another invocation trains or
    evaluates is left to it, and several invocations can fill one grid."""
    if not pending(args, folder, cell):
        return  # complete, or recorded in an earlier session whose checkpoint is gone
    work = args.out / folder.name / cell_name(cell)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(continuation.cell_lock(work))
            with RunLock(work):  # nor one that `transduce train` (or an older grid) trains
                pass
            if not pending(args, folder, cell):  # another invocation recorded it meanwhile
                return
            continue_cell(args, cell, work)
        except OutputError as taken:
            print(f"skipped: {taken}", flush=True)
            return
        measure(args, folder, cell, work)


def continue_cell(args: argparse.Namespace, cell: Cell, work: Path) -> None:
    """With --continue-from N: a cell with no checkpoint of its own starts from the same cell's
    finished run at N updates (the setting that differs only in --steps), copied into `work`."""
    if args.continue_from is None or (work / "checkpoints").exists():
        return  # nothing to continue, or the cell resumes a run of its own
    shorter = setting_name(argparse.Namespace(**{**vars(args), "steps": args.continue_from}))
    name = f"{shorter}/{cell_name(cell)}"
    source, record = args.out / name, args.records / f"{name}.json"
    if continuation.adopt(source, record, work, name):
        print(f"{cell_name(cell)}: continues {source} from update {args.continue_from}", flush=True)
    else:
        print(f"{cell_name(cell)}: no run at {source} to continue; it trains from update 1", flush=True)


def measure(args: argparse.Namespace, folder: Path, cell: Cell, work: Path) -> None:
    """Train a cell in `work` (or resume it) and record what its result lacks."""
    result_file = folder / f"{cell_name(cell)}.json"
    result = json.loads(result_file.read_text()) if result_file.exists() else None
    missing = missing_lengths(args, cell[0], result)
    cfg = config(args, *cell)
    cpu, wall = time.process_time(), time.monotonic()
    trainer = Trainer(cfg, work, show_progress=args.progress)
    try:
        metrics = trainer.fit(resume=True)  # a finished run only loads its weights
    except BaseException:  # interrupted or failed: spent on this run all the same, the record counts it
        continuation.add_interrupted(work, (time.process_time() - cpu) / 60)
        raise
    if result is None:
        result = new_result(args, cell, trainer, metrics, time.process_time() - cpu)
        origin = continuation.continued(work)
        earlier = origin.get("continued_cpu_minutes", 0.0) + continuation.interrupted(work)
        result["train_cpu_minutes"] += earlier
        result.update(origin)
    began = time.process_time()
    if "forced_char" not in result:
        result.update(forced(trainer.validator.dev_loss(trainer.data.splits[TASKS[cell[0]].headline])))
    if "t2t_char" not in result and not TASKS[cell[0]].lte:
        result.update(t2t_accuracy(trainer, cfg, args.test_len))
    for n in missing:
        result["by_length"][str(n)] = accuracy_at(trainer, cfg, n, args.sweep_size)
    result["sweep_cpu_minutes"] = result.get("sweep_cpu_minutes", 0.0) + (time.process_time() - began) / 60
    result["cpu_minutes"] = result["train_cpu_minutes"] + result["sweep_cpu_minutes"]
    result["wall_minutes"] = result.get("wall_minutes", 0.0) + (time.monotonic() - wall) / 60
    write_json(result_file, result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("by_length", "curve")}), flush=True)


def shown(path: Path) -> Path:
    """A path as the table names it: from the repository root when it is inside."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def groups(results: list[dict]) -> dict[tuple[str, str, str], list[dict]]:
    out: dict[tuple[str, str, str], list[dict]] = {}
    for r in results:
        out.setdefault((r["task"], r["model"], r["positions"]), []).append(r)
    return out


def table(results: list[dict], args: argparse.Namespace, command: str, folder: Path) -> list[str]:
    """The section: the length-generalisation table, then the Learning-to-Execute table (its
    tasks are tested in distribution, so their headline is the dev split)."""
    lines = [
        f"## Algorithmic tasks: length generalisation ({time.strftime('%Y-%m-%d')})",
        "",
        f"Commands: `{command}`  ",
        f"Results: `{shown(folder)}` (one JSON per run; `results.json`).  ",
        f"Machine: {platform.processor() or platform.machine()}, {args.threads} thread(s), torch "
        f"{torch.__version__}. Train lengths 1..{args.train_len} ({args.train_size} examples), headline "
        f"at length {args.test_len} ({args.eval_size} examples; LTE tasks: length {args.lte_len}, dev); "
        f"d_model {args.width}, d_ff {args.d_ff}, {args.heads} heads, {args.norm}-norm; "
        f"Transformer {args.layers}+{args.layers} layers, UT {args.ut_steps} steps (UT+ACT at most); "
        f"{args.steps} steps of {args.max_tokens}-token batches; greedy decoding, and teacher-forced "
        "(the argmax at each position given the reference's prefix: tensor2tensor's evaluation "
        "unless eval_run_autoregressive is set). Mean ± standard deviation over seeds (n).",
    ]
    grouped = groups(results)
    long = {key: rows for key, rows in grouped.items() if not TASKS[key[0]].lte}
    lte = {key: rows for key, rows in grouped.items() if TASKS[key[0]].lte and not TASKS[key[0]].program}
    programs = {key: rows for key, rows in grouped.items() if TASKS[key[0]].program}
    if long:
        lines += ["", *table_rows(long, args, f"at length {args.test_len}", dev=True)]
    if lte:
        heading = f"Learning to Execute memorisation, length {args.lte_len} (dev split, in distribution):"
        lines += ["", heading, "", *table_rows(lte, args, f"at length {args.lte_len}", dev=False)]
    if programs:
        heading = (
            f"Learning to Execute program evaluation, nesting {args.program_nesting}, length "
            f"{args.program_len} (dev split, in distribution):"
        )
        lines += ["", heading, "", *table_rows(programs, args, "(dev)", dev=False)]
    lines += [
        "",
        "Paper: Dehghani et al. 2018, Table 3 (char / seq accuracy at length 400; its one UT row stands "
        "beside UT and UT+ACT), shown for its setting only (lengths 1..40, test 400), and its Learning to "
        "Execute memorisation table (length 55) for the lte_ tasks. ACT steps: mean "
        "ponder steps per position, teacher-forced at the headline length. CPU minutes: training (over "
        "every invocation, and the run continued; records before 2026-11-30 left out interrupted "
        "invocations) and evaluation. The curve over test lengths: "
        f"`{shown(folder / 'accuracy_by_length.png')}`.",
    ]
    return lines


def papers_setting(args: argparse.Namespace, task: str) -> bool:
    """Whether the paper's numbers apply: its lengths (train 1..40, test 400; LTE tasks at 55)."""
    if TASKS[task].program:
        return (args.program_len, args.program_nesting) == (5, 2)
    return args.lte_len == 55 if TASKS[task].lte else (args.train_len, args.test_len) == (40, 400)


def table_rows(
    grouped: dict[tuple[str, str, str], list[dict]], args: argparse.Namespace, where: str, dev: bool
) -> list[str]:
    """One markdown table: a row per (task, model, positions), the paper's numbers beside ours;
    greedy accuracy, then teacher-forced (`dev`: the length-generalisation table, also over one
    example of each length 1..test_len, tensor2tensor's dev set)."""
    t2t = f"| teacher-forced 1..{args.test_len} " if dev else ""
    lines = [
        f"| task | model | positions | n | char acc {where} | seq acc | teacher-forced {where} {t2t}"
        "| paper char / seq " + ("| dev char / seq " if dev else "") + "| ACT steps enc / dec | CPU min |",
        "|---|---|---|---|---|---|---|" + ("---|---|" if dev else "") + "---|---|---|",
    ]
    for (task, model, positions), rows in grouped.items():
        paper = (
            PAPER.get(task, {}).get("ut" if model == "ut_act" else model)
            if papers_setting(args, task)
            else None
        )
        ponder = [
            spread([r["ponder_test"][f"{side}_ponder_mean"] for r in rows])
            for side in ("encoder", "decoder")
            if f"{side}_ponder_mean" in rows[0]["ponder_test"]
        ]
        forced = f"{mean_pair(rows, 'forced_char', 'forced_seq')} | "
        if dev:
            forced += f"{mean_pair(rows, 't2t_char', 't2t_seq')} | "
        lines.append(
            f"| {task} | {LABELS[model]} | {positions} | {len(rows)} | {spread([r['char'] for r in rows])} | "
            f"{spread([r['seq'] for r in rows])} | {forced}"
            f"{f'{paper[0]:.2f} / {paper[1]:.2f}' if paper else '-'} | "
            + (f"{mean_pair(rows, 'dev_char', 'dev_seq')} | " if dev else "")
            + f"{' / '.join(ponder) or '-'} | {statistics.fmean(r['cpu_minutes'] for r in rows):.1f} |"
        )
    return lines


# The curves: a colour per model, a line style and marker per position scheme.
MODEL_COLOURS = {"transformer": "tab:blue", "ut": "tab:orange", "ut_act": "tab:green"}
POSITION_STYLES = {
    "none": ("-", "o"),
    "offset": ("--", "s"),
    "offset_per_stack": ("--", "v"),
    "offset_per_step": (":", "x"),
    "offset_range": ("--", "P"),
    "offset_range_per_stack": (":", "P"),
    "subset": ("-.", "^"),
    "subset_per_stack": ("-.", "v"),
    "subset_spread": ("-.", "D"),
}


def plot(results: list[dict], args: argparse.Namespace, path: Path) -> None:
    """Mean accuracy over seeds against test length: a column per task, char and seq rows; the
    paper's numbers at the headline length as stars, in the colour of the model they stand for."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in results if not TASKS[r["task"]].lte))
    if not tasks:
        return
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.5 * len(tasks), 7.5), squeeze=False)
    for (task, model, positions), rows in groups(results).items():
        if task not in tasks:
            continue
        column = tasks.index(task)
        lengths = sorted({int(n) for r in rows for n in r["by_length"]} | {args.test_len})
        line, marker = POSITION_STYLES[positions]
        for row, metric in enumerate(("char", "seq")):
            means = [
                statistics.fmean(
                    r[metric] if n == args.test_len else r["by_length"][str(n)][metric] for r in rows
                )
                for n in lengths
            ]
            axes[row][column].plot(
                lengths,
                means,
                line,
                marker=marker,
                markersize=4,
                color=MODEL_COLOURS[model],
                label=f"{LABELS[model]}, {positions}",
            )
    for column, task in enumerate(tasks):
        for row, metric in enumerate(("char", "seq")):
            ax = axes[row][column]
            for model, paper in PAPER.get(task, {}).items() if papers_setting(args, task) else ():
                ax.plot(
                    [args.test_len],
                    [paper[row]],
                    "*",
                    markersize=13,
                    color=MODEL_COLOURS[model],
                    markeredgecolor="black",
                    label=f"paper's {LABELS[model]}",
                )
            ax.set_title(f"{task}: {metric} accuracy")
            ax.set_xlabel("test length")
            ax.set_ylim(-0.02, 1.02)
            ax.axvline(args.train_len, color="grey", linewidth=0.8)
            ax.grid(True, alpha=0.3)
    labelled = {
        label: handle
        for ax in axes.flat
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)
    }
    fig.legend(labelled.values(), labelled.keys(), loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(
        f"trained on lengths 1..{args.train_len}; mean over seeds; stars: the paper at {args.test_len}"
    )
    fig.tight_layout(rect=(0, 0.04 + 0.025 * ((len(labelled) + 3) // 4), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def grid_options(parser: argparse.ArgumentParser) -> None:
    grid = parser.add_argument_group("the grid")
    grid.add_argument("--tasks", nargs="+", default=["copy", "reverse", "addition"], choices=list(TASKS))
    grid.add_argument(
        "--lte",
        action="store_true",
        help="add lte_copy, lte_double and lte_reverse (in distribution: positions none only)",
    )
    grid.add_argument(
        "--programs",
        action="store_true",
        help="add Learning to Execute's program evaluation: lte_program, lte_control, lte_addition "
        "(constants of --program-len digits, --program-nesting operations, LTE's mix strategy)",
    )
    grid.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    grid.add_argument(
        "--positions",
        nargs="+",
        default=["none", "offset", "subset_spread"],
        choices=list(POSITIONS),
        help="offset/subset: one draw per training pass for both stacks; *_per_stack: tensor2tensor's "
        "independent draws for the encoder and the decoder; subset evaluates on positions 0..n-1, "
        "subset_spread on positions spread over the range it trained on (model.position_eval=spread)",
    )
    grid.add_argument("--seeds", type=int, default=3, help="seeds 1..N per cell")
    size = parser.add_argument_group("sizes (tensor2tensor's tiny models)")
    size.add_argument("--width", type=int, default=TINY["width"], help="d_model")
    size.add_argument("--d-ff", type=int, default=TINY["d_ff"])
    size.add_argument("--heads", type=int, default=TINY["heads"])
    size.add_argument("--layers", type=int, default=TINY["layers"], help="Transformer layers per stack")
    size.add_argument(
        "--ut-steps",
        type=int,
        default=TINY["ut_steps"],
        help="UT steps per stack (UT+ACT: at most; tensor2tensor's adaptive tiny set caps ACT at 4)",
    )
    size.add_argument("--act-tau", type=float, default=0.01, help="ACT's ponder cost weight (model.act_tau)")
    act = parser.add_argument_group(
        "what may keep ACT recurring (model.<name>; docs/universal-transformer.md)"
    )
    act.add_argument("--act-halt-bias", type=float, default=1.0, help="the halting unit's initial bias")
    act.add_argument("--act-min-steps", type=int, default=1, help="steps before ACT may halt a position")
    act.add_argument(
        "--act-tau-encoder", type=float, help="the encoder's ponder cost weight (default --act-tau)"
    )
    act.add_argument(
        "--act-tau-decoder", type=float, help="the decoder's ponder cost weight (default --act-tau)"
    )
    act.add_argument("--act-tau-start", type=int, default=0, help="updates without the ponder cost")
    act.add_argument(
        "--act-tau-ramp", type=int, default=0, help="updates over which the ponder cost then rises"
    )
    act.add_argument("--act-halt-lr", type=float, default=1.0, help="the halting units' rate, a multiple")
    act.add_argument(
        "--act-halt-detach",
        action="store_true",
        help="the halting unit reads the state without its gradient (trains the halting unit alone)",
    )
    size.add_argument(
        "--position-range",
        type=int,
        default=2048,
        help="positions that subset and offset_range draw from (model.position_range)",
    )
    size.add_argument("--dropout", type=float, default=0.1)
    size.add_argument(
        "--norm",
        choices=["pre", "post"],
        default="pre",
        help="layer norm placement; tensor2tensor's models normalise before each sublayer (pre)",
    )


def training_options(parser: argparse.ArgumentParser) -> None:
    train = parser.add_argument_group("training")
    train.add_argument(
        "--steps",
        type=int,
        default=1000,
        help="updates per cell; measured: UT 1.3, UT+ACT 0.3 (pondering little) to 1.3, Transformer 0.3 "
        "CPU s/step; a UT run with its evaluation about 25 CPU minutes at 1,000",
    )
    train.add_argument("--max-tokens", type=int, default=2048, help="tokens per batch, padding included")
    train.add_argument(
        "--warmup", type=int, default=400, help="learning-rate warmup updates (tensor2tensor's tiny: 8000)"
    )
    train.add_argument(
        "--lr-scale",
        type=float,
        default=1.0,
        help="multiplies scale * d^-0.5 * min(step^-0.5, step * warmup^-1.5); tensor2tensor's tiny sets are "
        "2 with warmup 8000 (learning_rate_constant 2.0); Learning to Execute's programs learn at 0.25",
    )
    train.add_argument("--train-size", type=int, default=100_000, help="training examples (t2t: 100k)")
    train.add_argument("--threads", type=int, default=1, help="CPU threads per cell")
    train.add_argument(
        "--curve-every",
        type=int,
        help="validate every N updates and record the curve of dev accuracy (training lengths) against "
        "updates in each cell's record (default: validate once, at the end)",
    )
    data = parser.add_argument_group("lengths and evaluation")
    data.add_argument("--train-len", type=int, default=40, help="training lengths 1..N")
    data.add_argument("--test-len", type=int, default=400, help="the headline test length")
    data.add_argument("--lte-len", type=int, default=55, help="the LTE memorisation length")
    data.add_argument(
        "--program-len", type=int, default=5, help="LTE programs: digits of a constant, at most"
    )
    data.add_argument("--program-nesting", type=int, default=2, help="LTE programs: operations, at most")
    data.add_argument("--eval-size", type=int, default=100, help="examples at --test-len (and dev)")
    data.add_argument(
        "--lengths", type=int, nargs="*", default=[40, 80, 120, 160, 200, 300], help="the sweep's lengths"
    )
    data.add_argument("--sweep-size", type=int, default=30, help="examples per sweep length")


def compute_options(parser: argparse.ArgumentParser) -> None:
    compute = parser.add_argument_group("compute and output")
    compute.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where cells train: cuda (an error when there is none), cpu (a GPU is hidden), or auto",
    )
    compute.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="cells at once, each a process of its own (on the CPU with --threads threads each; on a "
        "GPU all share it); each cell's record is written as it finishes",
    )
    compute.add_argument(
        "--jobs-probe",
        help="train nothing of the grid: measure cells per minute at each N of a list such as 1,2,4,8 "
        "(a wave of N UT-on-copy cells of --probe-steps updates) and record it",
    )
    compute.add_argument("--probe-steps", type=int, default=200, help="updates of a --jobs-probe cell")
    compute.add_argument(
        "--minutes",
        type=float,
        help="with --jobs: start no cell after this many minutes and interrupt the running ones (they "
        "save a checkpoint and resume on the next invocation; their records come then)",
    )
    compute.add_argument(
        "--continue-from",
        type=int,
        metavar="N",
        help="a cell with no run of its own starts from the same cell's finished run at N updates (the "
        "setting that differs only in --steps), copied, not changed: the learning rate does not depend "
        "on the total and resuming is exact, so it is the run that --steps would train from the start; "
        "its record names that run (continued_from) and counts its CPU minutes",
    )
    compute.add_argument("--cell", help=argparse.SUPPRESS)  # TASK:MODEL:POSITIONS:SEED, for --jobs
    compute.add_argument("--records", type=Path, default=RECORDS, help="where the records go")
    compute.add_argument("--out", type=Path, default=OUT, help="where the training runs go (not committed)")
    compute.add_argument("--progress", action="store_true", help="show each run's progress bar")
    compute.add_argument(
        "--report",
        action="store_true",
        help="train nothing: the table and plot of every run recorded so far at this setting (the grid "
        "options then only name the setting), and headline.json with its plot from every setting at "
        "the paper's lengths",
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    grid_options(parser)
    training_options(parser)
    compute_options(parser)
    args = parser.parse_args(argv)
    for name in ("jobs", "steps", "threads", "probe_steps", "seeds", "curve_every"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} {value}: must be at least 1")
    if args.continue_from is not None and not 1 <= args.continue_from < args.steps:
        parser.error(f"--continue-from {args.continue_from}: must lie in 1..{args.steps - 1} (below --steps)")
    if args.cell is not None:
        text, args.cell = args.cell, parse_cell(args.cell)
        if args.cell is None:
            parser.error(f"--cell {text}: want TASK:MODEL:POSITIONS:SEED of the grid's names")
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before anything asks torch for a GPU
    elif args.device == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device cuda: no CUDA device is available to torch {torch.__version__}")
    return args


def cells(args: argparse.Namespace) -> list[Cell]:
    """The grid's cells, seed by seed, so that a partial sweep covers the grid once first."""
    extra = [
        t
        for t in TASKS
        if TASKS[t].lte and ((args.lte and not TASKS[t].program) or (args.programs and TASKS[t].program))
    ]
    tasks = list(dict.fromkeys(args.tasks + extra))
    return [
        (task, model, positions if not TASKS[task].lte else "none", seed)
        for seed in range(1, args.seeds + 1)
        for task in tasks
        for model in args.models
        for positions in (args.positions if not TASKS[task].lte else ["none"])
    ]


def parse_cell(text: str) -> Cell | None:
    """TASK:MODEL:POSITIONS:SEED, or None when it is not one of the grid's cells."""
    parts = text.split(":")
    if len(parts) != 4 or parts[0] not in TASKS or parts[1] not in MODELS or parts[2] not in POSITIONS:
        return None
    return (parts[0], parts[1], parts[2], int(parts[3])) if parts[3].isdigit() else None


def run_cells(args: argparse.Namespace, folder: Path) -> None:
    """The pending cells, in this process (--jobs 1) or `--jobs` processes at a time."""
    todo = list(dict.fromkeys(c for c in cells(args) if pending(args, folder, c)))
    if args.jobs == 1 and args.minutes is None:
        for cell in todo:
            run(args, folder, cell)
        return
    command = [*GRID, *cell_argv(sys.argv[1:])]
    deadline = None if args.minutes is None else time.monotonic() + 60 * args.minutes
    pool = Pool(args.jobs, cell_env(args.device, args.threads), args.out / folder.name / "logs", deadline)
    finished = pool.run([(cell_name(c), [*command, "--cell", ":".join(map(str, c))]) for c in todo])
    failed = [f.name for f in finished if f.status not in (0, -2)]
    left = sum(f.status == -2 for f in finished)
    done = len(finished) - len(failed) - left
    print(f"{done} cells done, {left} left for the next run, failed: {', '.join(failed) or 'none'}")


def main() -> None:
    args = parse()
    # A grid started in the background (`nohup ... &`) has SIGINT ignored, and Python keeps that:
    # `kill -INT` would do nothing, and the cells inherit it, so the pool's interruption at
    # --minutes would wait for them to finish. Training saves a checkpoint on its way out.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if args.jobs_probe:
        counts = [int(n) for n in args.jobs_probe.split(",") if n.strip()]
        env = cell_env(args.device, args.threads)
        rows = probe(sys.argv[1:], counts, args.probe_steps, env, args.out)
        record_probe(args, rows)
        return
    folder = args.records / setting_name(args)
    folder.mkdir(parents=True, exist_ok=True)
    if args.cell:
        try:
            run(args, folder, args.cell)
        except KeyboardInterrupt:
            print(f"interrupted: cell {cell_name(args.cell)}; the same command resumes it", file=sys.stderr)
            sys.exit(130)
        return
    write_json(folder / "setting.json", setting(args))
    if not args.report:
        try:
            run_cells(args, folder)
        except KeyboardInterrupt:
            print(
                "interrupted: the finished cells' records are kept and the running cells saved "
                "checkpoints; the same command resumes them",
                file=sys.stderr,
            )
            sys.exit(130)
    report(args, folder)
    if args.report:
        headline.write(args.records)


def report(args: argparse.Namespace, folder: Path) -> None:
    """The setting's table and plot over every run recorded at it, not only this invocation's: the
    folder's table is shared by all the invocations that fill the grid."""
    order = {key: i for i, key in enumerate(TASKS)}
    results = sorted(
        (json.loads(f.read_text()) for f in folder.glob("*-seed*.json")),
        key=lambda r: (order[r["task"]], list(MODELS).index(r["model"]), r["positions"], r["seed"]),
    )
    write_json(folder / "results.json", results)
    command = "`, `".join(dict.fromkeys(r.get("command", "(not recorded)") for r in results))
    lines = table(results, args, command, folder)
    (folder / "table.md").write_text("\n".join(lines) + "\n")
    plot(results, args, folder / "accuracy_by_length.png")
    print("\n".join(lines))


def record_probe(args: argparse.Namespace, rows: list[dict]) -> Path:
    """The probe's cells per minute, as a record of this device in --records."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    best = max(rows, key=lambda r: r["cells_per_minute"])
    slug = "".join(c if c.isalnum() else "-" for c in device_name(device).lower()).strip("-")
    args.records.mkdir(parents=True, exist_ok=True)
    path = args.records / f"jobs-probe-{slug}-{time.strftime('%Y-%m-%d')}.json"
    record = {
        "claim": "jobs-probe",
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(["python", "-m", "bench.algorithmic.grid", *sys.argv[1:]]),
        "device": device_name(device),
        "host": host_line(args.threads),
        "setup": f"a wave of N UT-on-copy cells of {args.probe_steps} updates, {args.max_tokens}-token "
        f"batches, {args.threads} thread(s) each",
        "rows": rows,
        "best_jobs": best["jobs"],
    }
    write_json(path, record)
    print(f"best jobs: {best['jobs']} ({best['cells_per_minute']} cells/min); recorded in {path}")
    return path


if __name__ == "__main__":
    main()
