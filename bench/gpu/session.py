"""One lent GPU's measurements, in stages that fit its minutes (issue 47), and their summary.

    python -m bench.gpu.session --out $OUT                      # every stage (bench/gpu/gpu.sh)
    python -m bench.gpu.session --out $OUT --stages decode      # only what an earlier run missed
    python -m bench.gpu.session --out $OUT --previous bench/records/gpu/h100-2026-12-01

Stages, each writing `<stage>.json` (and its log) to --out, run in this order by default:
  tests    the `gpu`-marked tests (tests/test_gpu.py)
  decode   bench.gpu.decode: small and base, fp32 and bf16, greedy and beam 4, 64 and 1,024
           sentences, our growing and static caches against HF `generate` on the same weights
  trainer  the real `transduce train base` on the carried l10n En->De data (bench/gpu/gpu.sh pack),
           bf16, a fixed number of steps per variant (--trainer-variants: extra overrides); target
           tokens/s from train.log after its first window (start-up and compilation excluded), and
           the mean target tokens per step
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
folder), so a session can run only the stages an earlier one did not finish. CTranslate2 is not
run: its newest wheel (4.8.5) loads libcublas.so.12 (CUDA 12), the device image has CUDA 13
(libcublas.so.13), and the CUDA 12 cuBLAS wheel is far over what may be carried to the device.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

# the stages, run by default in this order (what is most needed first)
STAGES = ("tests", "decode", "trainer", "bench", "profile", "kernel", "sdpa")
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
TRAINER_VARIANTS = (MASTER, FAST, MASTER_CUDNN)
RATE = re.compile(r"step (\d+): .*train/tokens_per_s=([0-9.e+]+)")


def run(command: list[str], log: Path, timeout: float) -> int:
    """Run `command` with its output in `log` (and echoed); its exit status, 124 past `timeout`."""
    print("$ " + " ".join(command), flush=True)
    with log.open("w") as out:
        try:
            return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return 124
        finally:
            print(log.read_text()[-3000:], flush=True)


def trainer_rates(log: Path) -> list[float]:
    """Target tokens/s of each train.log window but the first (start-up, compilation)."""
    rates = [float(m.group(2)) for m in RATE.finditer(log.read_text())]
    return rates[1:]


def unpack_data() -> bool:
    """The carried l10n data in DATA (bench/gpu/gpu.sh pack), unpacked once; whether it is there."""
    if not (DATA / "l10n-de-data").exists() and Path(".gpudata/l10n.tar.xz").exists():
        subprocess.run(["mkdir", "-p", str(DATA)], check=True)
        subprocess.run(["tar", "-C", str(DATA), "-xJf", ".gpudata/l10n.tar.xz"], check=True)
    return (DATA / "l10n-de-data").exists()


def stage_trainer(args: argparse.Namespace) -> dict:
    unpack_data()
    variants = []
    for extra in args.trainer_variants:
        run_dir = Path(f"/tmp/mt-{len(variants)}")
        subprocess.run(["rm", "-rf", str(run_dir)], check=True)
        overrides = [*TRAINER, f"train.steps={args.trainer_steps}", *extra.split()]
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
        status = run(command, args.out / f"trainer-{len(variants)}.log", args.stage_timeout)
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
                "command": " ".join(command),
            }
        )
    return {"variants": variants}


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
    status = run(command, args.out / "bench.log", args.stage_timeout)
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
    status = run(command, args.out / "profile.log", args.stage_timeout)
    result: dict = {"status": status, "command": " ".join(command), "trainer": []}
    if not unpack_data():
        return result
    for name, extra in TRAINER_PROFILES.items():
        command = [sys.executable, "-m", "bench.gpu.trainer_profile", "--dataset", str(DATA / "l10n-de-data")]
        command += ["--name", name, "--out", str(out), *args.smoke.get("trainer_profile", []), "--"]
        command += [*TRAINER[2:], *extra.split(), *args.smoke.get("trainer_overrides", [])]
        status = run(command, args.out / f"trainer-profile-{name}.log", args.stage_timeout)
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
    status = run(command, args.out / f"{name}.log", args.stage_timeout)
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
    status = run(command, args.out / "tests.log", args.stage_timeout)
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
    out["commands"] = {stage: result.get("command") for stage, result in stages.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("bench/out/gpu"))
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    parser.add_argument("--previous", type=Path, help="an earlier run's folder, for the stages not run now")
    parser.add_argument("--trainer-steps", type=int, default=200)
    parser.add_argument(
        "--trainer-variants",
        nargs="+",
        default=list(TRAINER_VARIANTS),
        help="extra overrides per trainer run (default: master weights; padded too; cuDNN attention first)",
    )
    parser.add_argument("--tokens", type=int, help="the benchmark's batch; default: the trainer's mean")
    parser.add_argument("--stage-timeout", type=float, default=160.0)
    parser.add_argument(
        "--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a smoke run, tiny sizes"
    )
    args = parser.parse_args()
    args.smoke = SMOKE if args.device == "cpu" else {}
    args.out.mkdir(parents=True, exist_ok=True)
    for stage in args.stages:
        began = time.monotonic()
        if stage == "tests":
            result = stage_tests(args)
        elif stage == "trainer":
            result = stage_trainer(args)
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
