"""One lent GPU's measurements, in stages that fit its minutes (issues 47 and 86), and their summary.

    python -m bench.gpu.session --out $OUT                      # every stage (bench/gpu/gpu.sh)
    python -m bench.gpu.session --out $OUT --stages decode      # only what an earlier run missed
    python -m bench.gpu.session --out $OUT --previous bench/records/gpu/h100-2026-12-01

Stages, each writing `<stage>.json` (and its log) to --out, run in this order by default (what
issue 86 needs most first); every command's peak device memory is read from outside (nvidia-smi):
  trainer  the real `transduce train base` on the carried l10n En->De data (bench/gpu/gpu.sh pack),
           bf16, a fixed number of steps per variant (--trainer-variants: extra overrides); target
           tokens/s from train.log after its first window (start-up and compilation excluded), and
           the mean target tokens per step
  peers    the peer trainers on the same data (bench.gpu.peer_trainers, --peers): HF MarianMTModel
           in a plain PyTorch loop on our batches, OpenNMT-py's own onmt_train (carried wheels)
  ttq      time to quality: `transduce train` with the GPU recipe (TTQ below, with the trainer
           stage's fastest variant) for --ttq-minutes (fewer when the session's deadline is nearer),
           then `transduce evaluate` on the 2,000 test lines, beam 4: BLEU and chrF
  ct2      bench.gpu.ct2_cuda on the ttq stage's model (or, without it, a 50-update one):
           `--engine ctranslate2` on CUDA against raw CTranslate2 and our torch engine, float16,
           bfloat16 and int8_float16, beam 4 and greedy, 1,024 sentences (carry .whl-ct2)
  onmt-ttq OpenNMT-py on the ttq recipe (bench.gpu.peer_trainers onmt-ttq) for the ttq stage's
           minutes (fewer when the deadline is nearer), a save every minute at the peers stage's
           OpenNMT-py rate, the last five past the warmup averaged, beam 4 on the same test lines:
           BLEU and chrF
  tests    the `gpu`-marked tests (tests/test_gpu.py)
  decode   bench.gpu.decode: small and base, fp32 and bf16, greedy and beam 4, 64 and 1,024
           sentences, our growing and static caches against HF `generate` on the same weights
  bench    bench.gpu.throughput: base and big at the trainer's mean batch (or --tokens) and its
           data's vocabulary, bf16 autocast and bf16 weights with fp32 masters (the trainer's fast
           path; also compiled): the step alone, tokens/s and MFU
  profile  bench.gpu.step_profile: where `base`'s fast-path step (bf16-master, eager) spends its GPU
           time, at the benchmark's batch and vocabulary (profile/profile-base-bf16-master.txt); and
           bench.gpu.trainer_profile: the real trainer's steps on the carried data (bf16 weights, the
           efficient attention kernel first, then cuDNN's), host wall time against device busy time
           per step (profile/trainer-profile-*.json and .txt)
  kernel   bench.gpu.decode for `base` in bf16 at 1,024 sentences with the efficient attention kernel
           first (the decode stage keeps PyTorch's own order, as `transduce translate` does), each
           row also profiled: wall against device-busy seconds, kernels and host operations by time
  sdpa     which scaled-dot-product-attention kernel runs with our masks, and each kernel's time
           forward and forward + backward (bench.gpu.sdpa)
summary.json gathers the stages found in --out and in --previous (a committed earlier run's
folder), so a session can run only the stages an earlier one did not finish. The session's
deadline (GPU_BUDGET_S seconds from GPU_SESSION_START, which bench/gpu/gpu.sh sets) shortens the
ttq stage's training so that its evaluation still fits.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

# the stages, run by default in this order (what is most needed first)
STAGES = (
    "trainer",
    "peers",
    "ttq",
    "ct2",
    "onmt-ttq",
    "bench",
    "decode",
    "tests",
    "profile",
    "kernel",
    "sdpa",
)
DATA = Path("/tmp/l10n")
TRAINER = [
    "base",
    f"data.dataset={DATA}/l10n-de-data",
    "data.max_tokens=25000",
    "train.precision=bf16",
    "train.warmup=2000",
    "train.log_every=20",
    "train.validate_every=100000000",
    "train.save_every=100000000",
    "train.keep_last=1",
]
# bf16 weights with fp32 master weights in Adam (no autocast casts), attention by the efficient
# kernel first (train.attention_kernel's default); that with batch widths padded to multiples of 8
# (few shapes; on short sentences, fewer real tokens a batch: 19.8k against 24.1k); the first with
# cuDNN's attention first (PyTorch's own choice on Hopper, the trainer's before 2026-11-30: 145k
# target tokens/s unpadded against 320k padded on the H200 then, each new shape a new plan). Not
# run for time, by `--trainer-variants`: the trainer as it was ("": 117.6k on the H100 in
# 2026-11-27) and the padded one compiled (FAST_COMPILED: 320.7k against 320.0k eager on the H200).
MASTER = "train.master_weights=true"
MASTER_STEP = "bf16-master"  # the benchmark's name for that step
FAST = f"data.pad_to_multiple=8 {MASTER}"
FAST_COMPILED = f"{FAST} train.compile=true"
MASTER_CUDNN = f"{MASTER} train.attention_kernel=cudnn"
TRAINER_VARIANTS = (MASTER, FAST)
# Time to quality on the device (issue 86): `base` with pre-norm, whose residual path lets a
# higher peak rate train stably (the CPU hour's small-fast is pre-norm too), and a warmup of 1,500
# updates (peak 1.14e-3) instead of 4,000, since a few minutes at ~15 updates/s hold about 5,000;
# a checkpoint a minute and the last five averaged, which gained 1.4 BLEU on the CPU hour
# (docs/results.md, the ablation `avg5`); no validation on the way (its time goes to training).
TTQ = [
    "base",
    f"data.dataset={DATA}/l10n-de-data",
    "data.max_tokens=25000",
    "model.norm=pre",
    "train.precision=bf16",
    "train.warmup=1500",
    "train.log_every=100",
    "train.validate_every=100000000",
    "train.save_every=100000000",
    "train.save_every_minutes=1.0",
    "train.keep_last=5",
    "train.average_last=5",
]
TTQ_RUN = Path("/tmp/ttq")
# OpenNMT-py's updates a minute on the H200 (2026-12-04: 73k target tokens/s at about 24k a
# batch), its save interval in the onmt-ttq stage when this session's peers stage has no rate
ONMT_UPDATES_A_MINUTE = 180
RATE = re.compile(r"step (\d+): .*train/tokens_per_s=([0-9.e+]+)")


class DeviceMemory:
    """The device's peak memory in use while a command runs, over what was in use before it, read
    from nvidia-smi every 0.2 s (the same measure for every trainer, whatever allocates); None
    without nvidia-smi."""

    def __init__(self) -> None:
        self.peak: float | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    @staticmethod
    def used() -> float | None:
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout
            return float(out.split()[0])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return None

    def _poll(self) -> None:
        base = self.used()
        while base is not None and not self.stop.wait(0.2):
            now = self.used()
            if now is not None:
                self.peak = max(self.peak or 0.0, now - base)

    def __enter__(self) -> DeviceMemory:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def run(command: list[str], log: Path, timeout: float, env: dict | None = None) -> tuple[int, float | None]:
    """Run `command` with its output in `log` (and echoed): its exit status (124 past `timeout`)
    and the device memory it took at its peak, in MiB."""
    print("$ " + " ".join(command), flush=True)
    with log.open("w") as out, DeviceMemory() as memory:
        try:
            status = subprocess.run(
                command, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, env=env
            ).returncode
        except subprocess.TimeoutExpired:
            status = 124
    print(log.read_text()[-3000:], flush=True)
    return status, memory.peak


def trainer_rates(log: Path) -> list[float]:
    """Target tokens/s of each train.log window but the first (start-up, compilation)."""
    rates = [float(m.group(2)) for m in RATE.finditer(log.read_text())]
    return rates[1:]


def unpack_data() -> bool:
    """The carried l10n data in DATA (bench/gpu/gpu.sh pack), unpacked once: the dataset and test
    set, or the test set alone (l10n-test.tar.xz, for a call whose carry has no room for more);
    whether the dataset is there."""
    archives = {"l10n.tar.xz": "l10n-de-data", "l10n-test.tar.xz": "l10n-de/test.en"}
    for archive, unpacked in archives.items():
        if not (DATA / unpacked).exists() and Path(".gpudata", archive).exists():
            subprocess.run(["mkdir", "-p", str(DATA)], check=True)
            subprocess.run(["tar", "-C", str(DATA), "-xJf", f".gpudata/{archive}"], check=True)
    return (DATA / "l10n-de-data").exists()


def stage_trainer(args: argparse.Namespace) -> dict:
    unpack_data()
    variants = []
    for extra in args.trainer_variants:
        run_dir = Path(f"/tmp/mt-{len(variants)}")
        subprocess.run(["rm", "-rf", str(run_dir)], check=True)
        overrides = [*TRAINER, f"train.steps={args.trainer_steps}", *extra.split()]
        overrides += args.smoke.get("trainer_overrides", [])
        command = [
            sys.executable,
            "-m",
            "transduce",
            "train",
            *overrides,
            "--run-dir",
            str(run_dir),
            "--no-progress",
        ]
        status, memory = run(command, args.out / f"trainer-{len(variants)}.log", args.stage_timeout)
        rates = trainer_rates(run_dir / "train.log") if (run_dir / "train.log").exists() else []
        state = sorted(run_dir.glob("checkpoints/*/trainer.json"))
        tokens = json.loads(state[-1].read_text())["state"]["tokens"] if state else None
        variants.append(
            {
                "overrides": extra,
                "status": status,
                "tokens_per_s": statistics.median(rates) if rates else None,
                "window_rates": rates,
                "tokens_per_step": tokens / args.trainer_steps if tokens else None,
                "device_mib": memory,
                "command": " ".join(command),
            }
        )
    return {"variants": variants}


def stage_peers(args: argparse.Namespace) -> dict:
    """Each peer trainer of --peers on the carried data, as many updates as ours; the rows of
    peers an earlier call of the same session ran are kept."""
    unpack_data()
    earlier = args.out / "peers.json"
    kept = json.loads(earlier.read_text())["rows"] if earlier.exists() else []
    rows = [row for row in kept if row["peer"] not in args.peers]
    for peer in args.peers:
        name, _, kernel = peer.partition("-")
        command = [
            sys.executable,
            "-m",
            "bench.gpu.peer_trainers",
            name,
            "--dataset",
            str(DATA / "l10n-de-data"),
        ]
        command += ["--steps", str(args.trainer_steps), "--out", str(args.out / "peers")]
        command += ["--attention-kernel", kernel or "default", *args.smoke.get("peers", [])]
        status, memory = run(command, args.out / f"peers-{peer}.log", args.stage_timeout)
        found = args.out / "peers" / f"{peer}.json"
        figures = json.loads(found.read_text()) if found.exists() else {}
        rows.append(
            {**figures, "peer": peer, "status": status, "device_mib": memory, "command": " ".join(command)}
        )
    return {"rows": rows}


def fastest_variant(trainer: dict | None) -> str:
    """The trainer stage's fastest variant's overrides (the master weights alone without one)."""
    measured = [v for v in (trainer or {}).get("variants", []) if v.get("tokens_per_s")]
    return max(measured, key=lambda v: v["tokens_per_s"])["overrides"] if measured else MASTER


BLEU_LINE = re.compile(r"^(BLEU|chrF) ([0-9.]+)", re.MULTILINE)


def minutes_to_train(args: argparse.Namespace, most: float) -> tuple[float, dict | None]:
    """A time-to-quality stage's training minutes: `most`, fewer where the session's deadline less
    the ttq reserve is nearer; and, under half a minute, the result the stage returns instead."""
    left = (args.deadline - time.time() - args.ttq_reserve) / 60 if args.deadline else most
    minutes = round(min(most, left), 2)
    if minutes < 0.5:
        return minutes, {
            "skipped": f"{left:.2f} minutes left before the deadline's reserve",
            "minutes": minutes,
        }
    return minutes, None


def stage_ttq(args: argparse.Namespace, trainer: dict | None) -> dict:
    """`transduce train` for the minutes the deadline allows, then BLEU and chrF on the test set."""
    unpack_data()
    minutes, skipped = minutes_to_train(args, args.ttq_minutes)
    if skipped:
        return skipped
    subprocess.run(["rm", "-rf", str(TTQ_RUN)], check=True)
    overrides = [*TTQ, *fastest_variant(trainer).split(), f"train.max_minutes={minutes}"]
    overrides += args.smoke.get("ttq", [])
    command = [
        sys.executable,
        "-m",
        "transduce",
        "train",
        *overrides,
        "--run-dir",
        str(TTQ_RUN),
        "--no-progress",
    ]
    status, memory = run(command, args.out / "ttq-train.log", minutes * 60 + args.ttq_reserve)
    log = TTQ_RUN / "train.log"
    rates = trainer_rates(log) if log.exists() else []
    states = [json.loads(f.read_text())["state"] for f in TTQ_RUN.glob("checkpoints/*/trainer.json")]
    trained = max(states, key=lambda state: state["step"]) if states else {}
    model = TTQ_RUN / "averaged" if (TTQ_RUN / "averaged").exists() else TTQ_RUN
    test = DATA / "l10n-de"
    evaluate = [sys.executable, "-m", "transduce", "evaluate", str(model), "--src", str(test / "test.en")]
    evaluate += ["--ref", str(test / "test.de"), "--beam", "4"]
    scored, _ = run(evaluate, args.out / "ttq-evaluate.log", args.stage_timeout)
    scores = dict(BLEU_LINE.findall((args.out / "ttq-evaluate.log").read_text()))
    return {
        "minutes": minutes,
        "status": status,
        "evaluate_status": scored,
        "updates": trained.get("step"),
        "target_tokens": trained.get("tokens"),
        "train_seconds": trained.get("train_seconds"),
        "tokens_per_s": statistics.median(rates) if rates else None,
        "device_mib": memory,
        "model": str(model),
        "bleu": float(scores["BLEU"]) if "BLEU" in scores else None,
        "chrf": float(scores["chrF"]) if "chrF" in scores else None,
        "command": " ".join(command),
        "evaluate": " ".join(evaluate),
    }


def stage_ct2(args: argparse.Namespace) -> dict:
    """bench.gpu.ct2_cuda on the ttq stage's model, or on a 50-update one trained here first."""
    unpack_data()
    trained = any(TTQ_RUN.glob("checkpoints/*"))
    if not trained:
        quick = Path("/tmp/ct2-model")
        subprocess.run(["rm", "-rf", str(quick)], check=True)
        command = [
            sys.executable,
            "-m",
            "transduce",
            "train",
            *TRAINER,
            "train.steps=50",
            "--run-dir",
            str(quick),
        ]
        run(
            [*command, *args.smoke.get("trainer_overrides", []), "--no-progress"],
            args.out / "ct2-model.log",
            300,
        )
    model = (TTQ_RUN / "averaged" if (TTQ_RUN / "averaged").exists() else TTQ_RUN) if trained else quick
    result = stage_module(
        args,
        "ct2",
        "bench.gpu.ct2_cuda",
        ("--checkpoint", str(model), "--test", str(DATA / "l10n-de" / "test.en")),
    )
    return {**result, "model": str(model), "model_from": "ttq" if trained else "50 updates"}


def stage_onmt_ttq(args: argparse.Namespace) -> dict:
    """OpenNMT-py's time to quality on our ttq stage's recipe and minutes (issue 86, item 2)."""
    unpack_data()
    earlier = gather(args.out, args.previous)
    minutes, skipped = minutes_to_train(args, earlier.get("ttq", {}).get("minutes") or args.ttq_minutes)
    if skipped:
        return skipped
    onmt = next((r for r in earlier.get("peers", {}).get("rows", []) if r["peer"] == "onmt"), {})
    per_minute = (
        onmt["tokens_per_s"] * 60 / onmt["tokens_per_step"]
        if onmt.get("tokens_per_s") and onmt.get("tokens_per_step")
        else ONMT_UPDATES_A_MINUTE
    )
    test = DATA / "l10n-de"
    command = [
        sys.executable,
        "-m",
        "bench.gpu.peer_trainers",
        "onmt-ttq",
        "--dataset",
        str(DATA / "l10n-de-data"),
    ]
    command += ["--minutes", str(minutes), "--save-every", str(max(1, round(per_minute)))]
    command += [
        "--test",
        str(test / "test.en"),
        "--ref",
        str(test / "test.de"),
        "--out",
        str(args.out / "peers"),
    ]
    command += args.smoke.get("onmt-ttq", [])
    found = args.out / "peers" / "onmt-ttq.json"
    found.unlink(missing_ok=True)  # an earlier call's
    status, memory = run(command, args.out / "onmt-ttq.log", minutes * 60 + args.stage_timeout)
    figures = json.loads(found.read_text()) if found.exists() else {}
    return {**figures, "status": status, "device_mib": memory, "command": " ".join(command)}


def data_vocab() -> int:
    """The trainer's target vocabulary (the carried dataset's), so that the benchmark's step does
    the same output projection and loss; 32,000 without the data."""
    meta = DATA / "l10n-de-data" / "meta.json"
    return json.loads(meta.read_text())["tgt_vocab_size"] if meta.exists() else 32000


def batch_tokens(args: argparse.Namespace, trainer: dict | None) -> int:
    """The benchmark's batch: --tokens, else the trainer variants' mean target tokens a step."""
    if args.tokens is None and trainer:
        per_step = [v["tokens_per_step"] for v in trainer["variants"] if v["tokens_per_step"]]
        return round(statistics.mean(per_step)) if per_step else 24576
    return args.tokens or 24576


def stage_bench(args: argparse.Namespace, trainer: dict | None) -> dict:
    tokens = batch_tokens(args, trainer)
    out = args.out / "throughput"
    command = [
        sys.executable,
        "-m",
        "bench.gpu.throughput",
        "--presets",
        "base",
        "big",
        "--precisions",
        "bf16",
        MASTER_STEP,
    ]
    command += ["--tokens", str(tokens), "--compile", MASTER_STEP, "--decode-presets", "--out", str(out)]
    vocab = data_vocab()
    command += ["--vocab", str(vocab)]
    command += args.smoke.get("bench", [])
    status, _ = run(command, args.out / "bench.log", args.stage_timeout)
    rows = json.loads((out / "gpu.json").read_text())["train"] if (out / "gpu.json").exists() else []
    return {"status": status, "tokens": tokens, "vocab": vocab, "rows": rows, "command": " ".join(command)}


SMOKE = {  # --device cpu: each stage's module on tiny sizes, to check this script without a GPU
    "bench": ["--presets", "small", "--tokens", "256", "--steps", "1", "--warmup", "1", "--device", "cpu"],
    "decode": [
        "--presets",
        "small",
        "--precisions",
        "fp32",
        "--sentences",
        "4",
        "--length",
        "4",
        "--device",
        "cpu",
    ],
    "sdpa": ["--batch", "4", "--sentences", "8", "--dtype", "float32", "--device", "cpu"],
    "profile": ["--preset", "small", "--tokens", "256", "--steps", "1", "--rows", "10", "--device", "cpu"],
    "trainer_profile": ["--preset", "small", "--warmup", "1", "--steps", "1", "--rows", "5"],
    "trainer_overrides": ["data.max_tokens=1024"],
    "peers": [
        *("--preset", "small", "--max-tokens", "1000", "--onmt-batch-size", "2000"),
        *("--log-every", "2", "--device", "cpu"),
    ],
    "ttq": [
        *("model.d_model=64", "model.d_ff=128", "model.heads=2"),
        *("model.encoder_layers=1", "model.decoder_layers=1", "data.max_tokens=1024"),
    ],
    "ct2": ["--sentences", "8", "--device", "cpu", "--compute-types", "float32", "--reps", "1"],
    "onmt-ttq": [
        *("--preset", "small", "--onmt-batch-size", "2000", "--log-every", "2"),
        *("--save-every", "4", "--average", "3", "--onmt-bucket", "2048", "--test-lines", "40"),
        *("--device", "cpu"),
    ],
}


# the kernel stage: the decode stage's `base` bf16 rows at 1,024 sentences, the efficient kernel
# first and then the math one (matrix products: one query a row against a few dozen keys fits the
# efficient kernel's 64-query tiles badly)
KERNEL = (
    *("--presets", "base", "--precisions", "bf16", "--sentences", "1024"),
    *("--attention-kernel", "efficient", "math", "--profile"),
)
# the real trainer's steps profiled (bench.gpu.trainer_profile): its default attention kernel and cuDNN's
TRAINER_PROFILES = {"master": MASTER, "master-cudnn": MASTER_CUDNN}


def stage_profile(args: argparse.Namespace, trainer: dict | None) -> dict:
    out = args.out / "profile"
    command = [sys.executable, "-m", "bench.gpu.step_profile", "--preset", "base", "--precision", MASTER_STEP]
    command += ["--tokens", str(batch_tokens(args, trainer)), "--vocab", str(data_vocab()), "--out", str(out)]
    command += args.smoke.get("profile", [])
    status, _ = run(command, args.out / "profile.log", args.stage_timeout)
    result: dict = {"status": status, "command": " ".join(command), "trainer": []}
    if not unpack_data():
        return result
    for name, extra in TRAINER_PROFILES.items():
        command = [sys.executable, "-m", "bench.gpu.trainer_profile", "--dataset", str(DATA / "l10n-de-data")]
        command += ["--name", name, "--out", str(out), *args.smoke.get("trainer_profile", []), "--"]
        command += [*TRAINER[2:], *extra.split(), *args.smoke.get("trainer_overrides", [])]
        status, _ = run(command, args.out / f"trainer-profile-{name}.log", args.stage_timeout)
        figures = out / f"trainer-profile-{name}.json"
        found = json.loads(figures.read_text()) if figures.exists() else {}
        result["trainer"].append({"status": status, "command": " ".join(command), **found})
    return result


def stage_module(
    args: argparse.Namespace,
    name: str,
    module: str,
    extra: tuple[str, ...] = (),
    *,
    smoke: str | None = None,
    result: str | None = None,
) -> dict:
    """`module` (with `extra` arguments) writing into --out/<name>, logged to <name>.log: its exit
    status, command and JSON (`result`, default <name>.json, there); on the CPU with the smoke
    arguments of stage `smoke` (default `name`)."""
    out = args.out / name
    command = [sys.executable, "-m", module, *extra, "--out", str(out), *args.smoke.get(smoke or name, [])]
    status, _ = run(command, args.out / f"{name}.log", args.stage_timeout)
    found = out / (result or f"{name}.json")
    return {
        "status": status,
        "command": " ".join(command),
        **(json.loads(found.read_text()) if found.exists() else {}),
    }


def stage_tests(args: argparse.Namespace) -> dict:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "gpu",
        "-p",
        "no:cacheprovider",
        "-rs",
        "tests/test_gpu.py",
    ]
    status, _ = run(command, args.out / "tests.log", args.stage_timeout)
    tail = (args.out / "tests.log").read_text().strip().splitlines()[-1:]
    return {"status": status, "result": tail[0] if tail else "", "command": " ".join(command)}


def gather(out: Path, previous: Path | None) -> dict[str, dict]:
    """Each stage's result: this run's, else the earlier run's."""
    found = {}
    for stage in STAGES:
        for folder in (out, previous):
            if folder is not None and (folder / f"{stage}.json").exists():
                found[stage] = json.loads((folder / f"{stage}.json").read_text())
                break
    return found


def _row(rows: list[dict], preset: str, precision: str, compiled: bool) -> dict | None:
    return next(
        (r for r in rows if (r["preset"], r["precision"], r["compile"]) == (preset, precision, compiled)),
        None,
    )


def summary(stages: dict[str, dict], device: str) -> dict:
    """The figures issue 47 asks for, from whatever stages there are."""
    out: dict = {"device": device, "stages": sorted(stages)}
    trainer, bench, decode = stages.get("trainer"), stages.get("bench"), stages.get("decode")
    if trainer:
        rates = [v["tokens_per_s"] for v in trainer["variants"] if v["tokens_per_s"]]
        out["trainer_tokens_per_s"] = max(rates) if rates else None
        out["trainer_variants"] = trainer["variants"]
    if bench:
        rows = bench["rows"]
        base, big = _row(rows, "base", "bf16", False), _row(rows, "big", "bf16", False)
        master, big_master = _row(rows, "base", MASTER_STEP, False), _row(rows, "big", MASTER_STEP, False)
        compiled = _row(rows, "base", MASTER_STEP, True) or _row(rows, "base", "bf16", True)
        out["bench_tokens_per_s"] = base and base["tokens_per_s"]
        out["bench_master_tokens_per_s"] = master and master["tokens_per_s"]
        out["bench_compiled_tokens_per_s"] = compiled and compiled["tokens_per_s"]
        out["bench_tokens_per_step"] = bench["tokens"]
        out["mfu_base_bf16"] = base and base["mfu"]
        out["mfu_big_bf16"] = big and big["mfu"]
        out["mfu_base_bf16_master"] = master and master["mfu"]
        out["mfu_big_bf16_master"] = big_master and big_master["mfu"]
    for name, step in (
        ("trainer_to_bench", "bench_tokens_per_s"),
        ("trainer_to_bench_master", "bench_master_tokens_per_s"),
    ):
        if out.get("trainer_tokens_per_s") and out.get(step):
            out[name] = out["trainer_tokens_per_s"] / out[step]
    if decode:
        for search, beam in (("beam4", 4), ("greedy", 1)):
            row = next(
                (
                    r
                    for r in decode.get("rows", [])
                    if (r["preset"], r["precision"], r["sentences"], r["beam"])
                    == ("base", "bf16", 1024, beam)
                ),
                None,
            )
            if row:
                out[f"decode_{search}_vs_hf"] = max(row["dynamic_vs_hf"], row["static_vs_hf"])
                out[f"decode_{search}_vs_hf_by_cache"] = {
                    "dynamic": row["dynamic_vs_hf"],
                    "static": row["static_vs_hf"],
                }
    out.update(peer_figures(stages))
    out["commands"] = {stage: result.get("command") for stage, result in stages.items()}
    return out


def peer_figures(stages: dict[str, dict]) -> dict:
    """Issue 86's fields: our trainer over each peer's tokens/s, time to quality, CTranslate2 on CUDA."""
    out: dict = {}
    trainer, peers, ttq, ct2, onmt_ttq = (
        stages.get(name) for name in ("trainer", "peers", "ttq", "ct2", "onmt-ttq")
    )
    ours = max(
        (v["tokens_per_s"] for v in (trainer or {}).get("variants", []) if v.get("tokens_per_s")),
        default=None,
    )
    for row in (peers or {}).get("rows", []):
        rate = row.get("tokens_per_s")
        key = f"trainer_vs_{row['peer'].replace('-', '_')}"
        out[key] = ours / rate if ours and rate else None
    if ttq:
        out["ttq_minutes"] = ttq.get("minutes")
        out["ttq_bleu"] = ttq.get("bleu")
        out["ttq_chrf"] = ttq.get("chrf")
    if onmt_ttq:
        out["ttq_onmt_minutes"] = onmt_ttq.get("minutes")
        out["ttq_onmt_bleu"] = onmt_ttq.get("bleu")
        out["ttq_onmt_chrf"] = onmt_ttq.get("chrf")
    if ct2:
        beam4 = [r for r in ct2.get("rows", []) if r.get("beam") == 4 and "compute_type" in r]
        out["ct2_cuda"] = (
            {r["compute_type"]: {"ours_s": r["ours_s"], "raw_s": r["raw_s"]} for r in beam4}
            if beam4
            else ct2.get("error", "no rows")
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("bench/out/gpu"))
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    parser.add_argument("--previous", type=Path, help="an earlier run's folder, for the stages not run now")
    parser.add_argument("--trainer-steps", type=int, default=140, help="updates of each trainer and peer")
    parser.add_argument(
        "--trainer-variants",
        nargs="+",
        default=list(TRAINER_VARIANTS),
        help="extra overrides per trainer run (default: master weights; padded to 8 too)",
    )
    parser.add_argument(
        "--peers",
        nargs="+",
        default=["hf", "onmt"],
        choices=["hf", "hf-efficient", "onmt"],
        help="peer trainers (hf-efficient: HF with our attention kernel order)",
    )
    parser.add_argument(
        "--ttq-minutes", type=float, default=6.0, help="the ttq stage's training minutes, at most"
    )
    parser.add_argument(
        "--ttq-reserve",
        type=float,
        default=75.0,
        help="seconds kept after ttq's training: start-up, evaluation",
    )
    parser.add_argument("--tokens", type=int, help="the benchmark's batch; default: the trainer's mean")
    parser.add_argument("--stage-timeout", type=float, default=160.0)
    parser.add_argument(
        "--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a smoke run, tiny sizes"
    )
    args = parser.parse_args()
    args.smoke = SMOKE if args.device == "cpu" else {}
    budget = os.environ.get("GPU_BUDGET_S")
    start = float(os.environ.get("GPU_SESSION_START", time.time()))
    args.deadline = start + float(budget) - 20 if budget else None  # 20 s to pack what was written
    args.out.mkdir(parents=True, exist_ok=True)
    for stage in args.stages:
        began = time.monotonic()
        if stage == "tests":
            result = stage_tests(args)
        elif stage == "trainer":
            result = stage_trainer(args)
        elif stage == "peers":
            result = stage_peers(args)
        elif stage == "ttq":
            result = stage_ttq(args, gather(args.out, args.previous).get("trainer"))
        elif stage == "ct2":
            result = stage_ct2(args)
        elif stage == "onmt-ttq":
            result = stage_onmt_ttq(args)
        elif stage == "bench":
            result = stage_bench(args, gather(args.out, args.previous).get("trainer"))
        elif stage == "profile":
            result = stage_profile(args, gather(args.out, args.previous).get("trainer"))
        elif stage == "kernel":
            result = stage_module(
                args, stage, "bench.gpu.decode", KERNEL, smoke="decode", result="decode.json"
            )
        else:
            result = stage_module(args, stage, f"bench.gpu.{stage}")
        result["seconds"] = time.monotonic() - began
        (args.out / f"{stage}.json").write_text(json.dumps(result, indent=1))
    device = _device_name()
    (args.out / "summary.json").write_text(
        json.dumps(summary(gather(args.out, args.previous), device), indent=1)
    )
    print((args.out / "summary.json").read_text())


def _device_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


if __name__ == "__main__":
    main()
