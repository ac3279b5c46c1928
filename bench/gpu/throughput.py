"""GPU benchmark: training throughput and MFU, decoding throughput, on CUDA.

    python -m bench.gpu.throughput --out $OUT    # what bench/gpu/gpu.sh runs on a lent device
    python -m bench.gpu.throughput --presets small --tokens 4096 --steps 5 --decode-presets small  # a look

Training: forward + backward + Adam (the trainer's optimizer) on random batches of --tokens
target tokens (sentences of --length source and target tokens, vocabulary --vocab), label
smoothing 0.1, for each preset x precision (fp32 with TF32 matrix products, bf16 autocast, fp16
autocast with loss scaling, bf16-master: bf16 weights with fp32 copies in Adam, the trainer's
train.master_weights), with torch.compile (mode default, fixed shapes) for the
--compile precisions at the largest batch, attention by --attention-kernel first (as the trainer's
train.attention_kernel). Target tokens/s over --steps timed steps after warm-up,
achieved TFLOP/s and MFU (FLOPs per token from transduce.cost, the device's dense peak from
transduce.train.log), peak memory. Decoding: greedy and beam 4 on batches of --decode-batch
sentences, output length fixed at --length (EOS blocked until then), the model cast to each
precision (CTranslate2 on CUDA: bench/gpu/ct2_cuda.py). Writes gpu.json and gpu.md to --out.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch

from transduce.config import load_config
from transduce.cost import flops_per_token
from transduce.data.vocab import BOS, EOS, PAD
from transduce.decode.beam import beam_search
from transduce.decode.search import greedy
from transduce.device import ATTENTION_KERNELS, attention_kernels
from transduce.model import build_model
from transduce.train.log import peak_flops
from transduce.train.loss import label_smoothed_loss
from transduce.train.master import MasterWeights

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
MASTER = "bf16-master"  # training only: bf16 weights, fp32 master copies in Adam (train.master_weights)


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so wall time covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def random_batch(sentences: int, length: int, vocab: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Source (with EOS), decoder input (BOS + target) and output (target + EOS), no padding."""
    src = torch.randint(EOS + 1, vocab, (sentences, length + 1), device=device)
    src[:, -1] = EOS
    tgt = torch.randint(EOS + 1, vocab, (sentences, length), device=device)
    bos = torch.full((sentences, 1), BOS, device=device)
    eos = torch.full((sentences, 1), EOS, device=device)
    return src, torch.cat([bos, tgt], 1), torch.cat([tgt, eos], 1)


def training_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    batch: tuple[torch.Tensor, ...],
    precision: str,
    master: MasterWeights | None = None,
) -> Callable[[], None]:
    """One update on `batch` (source, decoder input, output): autocast forward (or the bf16 copy's,
    with `master`), smoothed loss, (scaled) backward, Adam; what every timed row repeats."""
    src, tgt_in, tgt_out = batch
    autocast = precision in ("bf16", "fp16")

    def step() -> None:
        with torch.autocast(src.device.type, dtype=DTYPES.get(precision, torch.bfloat16), enabled=autocast):
            loss, _ = label_smoothed_loss(model(src, tgt_in).logits, tgt_out, 0.1, PAD)
        scaler.scale(loss / tgt_out.numel()).backward()
        if master is not None:
            master.grads_to_master()
            master.zero_grad()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        if master is not None:
            master.weights_to_compute()

    return step


def preset_step(
    preset: str, precision: str, tokens: int, compiled: bool, args: argparse.Namespace
) -> tuple[Callable[[], None], int]:
    """A `preset` model's training step at `precision` on a random batch of about `tokens` target
    tokens (args: device, length, vocab), and the batch's target tokens."""
    device = args.device
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "fp32"
    cfg = load_config(preset, [])
    model = build_model(cfg.model, args.vocab, args.vocab, PAD).to(device).train()
    master = MasterWeights(model) if precision == MASTER else None
    net = model if master is None else master.compute.train()
    step_model = torch.compile(net) if compiled else net
    t = cfg.train
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=t.adam_betas, eps=t.adam_eps, fused=True)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    batch = random_batch(max(1, tokens // (args.length + 1)), args.length, args.vocab, device)
    return training_step(step_model, optimizer, scaler, batch, precision, master), batch[2].numel()


def train_row(preset: str, precision: str, tokens: int, compiled: bool, args: argparse.Namespace) -> dict:
    device = args.device
    cfg = load_config(preset, [])
    step, n_tokens = preset_step(preset, precision, tokens, compiled, args)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    began = time.perf_counter()
    for _ in range(args.warmup):
        step()
    sync(device)
    warmup_s = time.perf_counter() - began
    began = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync(device)
    seconds = (time.perf_counter() - began) / args.steps
    flops = flops_per_token(cfg.model, args.vocab, args.length + 1, args.length + 1, training=True)
    peak = peak_flops(device, "bf16" if precision == MASTER else precision)
    rate = n_tokens / seconds
    return {
        "preset": preset,
        "precision": precision,
        "compile": compiled,
        "tokens": n_tokens,
        "step_ms": 1000 * seconds,
        "tokens_per_s": rate,
        "tflops": rate * flops / 1e12,
        "mfu": None if peak is None else rate * flops / peak,
        "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0,
        "warmup_s": warmup_s,
    }


@torch.no_grad()
def decode_row(preset: str, precision: str, beam: int, args: argparse.Namespace) -> dict:
    device = args.device
    torch.backends.cuda.matmul.allow_tf32 = precision == "fp32"
    cfg = load_config(preset, ["model.dropout=0"])
    model = build_model(cfg.model, args.vocab, args.vocab, PAD).to(device, DTYPES[precision]).eval()
    src, _, _ = random_batch(args.decode_batch, args.length, args.vocab, device)
    options = {"max_len_a": 0.0, "max_len_b": args.length, "min_len": args.length}

    def run() -> None:
        if beam == 1:
            greedy(model, src, **options)
        else:
            beam_search(model, src, beam=beam, alpha=0.0, **options)

    run()
    sync(device)
    times = []
    for _ in range(args.decode_reps):
        began = time.perf_counter()
        run()
        sync(device)
        times.append(time.perf_counter() - began)
    seconds = sorted(times)[len(times) // 2]
    return {
        "preset": preset,
        "precision": precision,
        "search": "greedy" if beam == 1 else f"beam {beam}",
        "sentences": args.decode_batch,
        "seconds": seconds,
        "tokens_per_s": args.decode_batch * args.length / seconds,
    }


def markdown(train: list[dict], decode: list[dict], args: argparse.Namespace) -> list[str]:
    name = torch.cuda.get_device_name(args.device) if args.device.type == "cuda" else "CPU (a smoke run)"
    lines = [
        f"Device: {name}, torch {torch.__version__}. Training: random batches of sentences of "
        f"{args.length} + 1 tokens, vocabulary {args.vocab}, {args.steps} timed steps after {args.warmup} "
        f"warm-up steps; fp32 rows use TF32 matrix products; attention kernel tried first: "
        f"{args.attention_kernel}.",
        "",
        "| preset | precision | compile | tokens/batch | step ms | tokens/s | TFLOP/s | MFU | peak GiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in train:
        mfu = "-" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
        lines.append(
            f"| {r['preset']} | {r['precision']} | {'on' if r['compile'] else 'off'} | {r['tokens']} | "
            f"{r['step_ms']:.1f} | {r['tokens_per_s']:.0f} | {r['tflops']:.1f} | {mfu} | "
            f"{r['peak_gib']:.2f} |"
        )
    lines += [
        "",
        f"Decoding: {args.decode_batch} sentences of {args.length} + 1 source tokens, {args.length} output "
        f"tokens each (EOS blocked until then), median of {args.decode_reps}.",
        "",
        "| preset | precision | search | seconds | output tokens/s |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['preset']} | {r['precision']} | {r['search']} | {r['seconds']:.3f} | {r['tokens_per_s']:.0f} |"
        for r in decode
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presets", nargs="+", default=["small", "base", "big"], help="training presets")
    parser.add_argument(
        "--precisions",
        nargs="+",
        default=["fp32", "bf16", "fp16"],
        choices=[*DTYPES, MASTER],
        help=f"{MASTER}: bf16 weights, fp32 master copies in Adam (train.master_weights; training only)",
    )
    parser.add_argument("--tokens", type=int, nargs="+", default=[4096, 12288, 24576], help="batch sizes")
    parser.add_argument("--compile", nargs="*", default=["bf16"], help="precisions also timed compiled")
    parser.add_argument("--length", type=int, default=32, help="target (and source) tokens per sentence")
    parser.add_argument("--vocab", type=int, default=32000, help="shared vocabulary size")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps")
    parser.add_argument(
        "--decode-presets", nargs="*", default=["small", "base"], help="decoding presets (none: no decoding)"
    )
    parser.add_argument("--decode-batch", type=int, default=64, help="sentences per decoding batch")
    parser.add_argument("--decode-reps", type=int, default=3, help="timed decoding repetitions")
    parser.add_argument("--out", type=Path, default=Path("bench/out/gpu"), help="gpu.json and gpu.md go here")
    parser.add_argument("--device", type=torch.device, default="cuda", help="cpu: a smoke run of this script")
    add_kernel_option(parser)
    args = parser.parse_args()
    if args.device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: bench.gpu.throughput needs a CUDA device (or --device cpu for a smoke run)")
    args.out.mkdir(parents=True, exist_ok=True)
    with attention_kernels(args.device, args.attention_kernel):
        train, decode = measure(args)
    (args.out / "gpu.json").write_text(
        json.dumps({"attention_kernel": args.attention_kernel, "train": train, "decode": decode}, indent=1)
    )
    lines = markdown(train, decode, args)
    (args.out / "gpu.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def add_kernel_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--attention-kernel",
        default="efficient",
        choices=list(ATTENTION_KERNELS),
        help="the attention kernel tried first on CUDA (default: train.attention_kernel's default)",
    )


def measure(args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """The training rows and the decoding rows."""
    train, decode = [], []
    for preset in args.presets:
        for precision in args.precisions:
            for tokens in args.tokens:
                for compiled in (
                    (False, True) if precision in args.compile and tokens == max(args.tokens) else (False,)
                ):
                    train.append(train_row(preset, precision, tokens, compiled, args))
                    print(json.dumps(train[-1]), flush=True)
                    if args.device.type == "cuda":
                        torch.cuda.empty_cache()
    for preset in args.decode_presets:
        for precision in (p for p in args.precisions if p in DTYPES):
            for beam in (1, 4):
                decode.append(decode_row(preset, precision, beam, args))
                print(json.dumps(decode[-1]), flush=True)
    return train, decode


if __name__ == "__main__":
    main()
