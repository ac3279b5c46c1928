"""int8 linear kernels on this CPU: what could replace torch.ao's deprecated dynamic quantisation.

    python bench/int8_kernels.py                 # the small preset's decoding shapes, 1 thread
    python bench/int8_kernels.py --threads 2 --reps 100

Times one linear map y = x W^T + b (the shapes `--quantize int8` quantises when decoding the
small preset: rows = batch x beam) with each candidate, alternating them, and reports the
median milliseconds and the largest deviation from the float32 result of the same quantised
operands (0 up to rounding means the kernel computes what it should):

- fp32: `F.linear`, the baseline;
- ao-dynamic: `torch.ao.quantization.quantize_dynamic` (fbgemm; what `--quantize int8` uses, deprecated);
- onednn-qlinear: `torch.ops.onednn.qlinear_pointwise` (the kernel inductor's x86 int8 path
  calls), with per-row int8 weights and activations quantised per call to 7 bits (u8, reduced
  range: with 8 bits this AVX2 CPU's kernel overflows), like fbgemm does;
- int-mm: `torch._int_mm` with per-row weight and per-row activation scales;
- weight-int8pack: `torch._weight_int8pack_mm` (weight-only int8);
- torchao configs when `torchao` imports (install it with `pip install torchao --no-deps`):
  `Int8DynamicActivationInt8WeightConfig` and `Int8WeightOnlyConfig`, eager (no torch.compile).
Results go into bench/RESULTS.md (the int8-kernels section, replaced on each run).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import warnings
from collections.abc import Callable

import torch
from results import write_section
from torch import Tensor, nn
from torch.nn import functional as F

Kernel = Callable[[], Tensor]


def weight_int8(w: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric per-row int8 weights and their scales."""
    scale = (w.abs().amax(1) / 127).clamp(min=1e-12)
    return torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def kernels(x: Tensor, linear: nn.Linear) -> dict[str, tuple[Kernel, Tensor]]:
    """Each candidate and the float32 result it should reproduce (its own rounding excepted)."""
    w, b = linear.weight.detach(), linear.bias.detach()
    wq, scale = weight_int8(w)
    dequantised = wq.float() * scale[:, None]
    out: dict[str, tuple[Kernel, Tensor]] = {"fp32": (lambda: F.linear(x, w, b), F.linear(x, w, b))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ao = torch.ao.quantization.quantize_dynamic(nn.Sequential(linear), {nn.Linear}, dtype=torch.qint8)
    out["ao-dynamic"] = (lambda: ao(x), F.linear(x, w, b))

    packed, zero = torch.ops.onednn.qlinear_prepack(wq, None), torch.zeros(w.shape[0], dtype=torch.int64)
    low, high = float(x.min().clamp(max=0)), float(x.max().clamp(min=0))
    step = (high - low) / 127 or 1.0
    point = round(-low / step)
    reference = F.linear((torch.clamp(torch.round(x / step) + point, 0, 127) - point) * step, dequantised, b)

    def onednn() -> Tensor:
        lo, hi = x.aminmax()
        s = float(hi.clamp(min=0) - lo.clamp(max=0)) / 127 or 1.0
        z = round(-float(lo.clamp(max=0)) / s)
        xq = torch.clamp(torch.round(x / s) + z, 0, 127).to(torch.uint8)
        return torch.ops.onednn.qlinear_pointwise(
            xq, s, z, packed, scale, zero, b, 1.0, 0, torch.float32, "none", [], ""
        )

    out["onednn-qlinear"] = (onednn, reference)

    def int_mm() -> Tensor:
        xs = (x.abs().amax(1, keepdim=True) / 127).clamp(min=1e-12)
        xq = torch.round(x / xs).to(torch.int8)
        return torch._int_mm(xq, wq.t()) * (xs * scale) + b

    xs = (x.abs().amax(1, keepdim=True) / 127).clamp(min=1e-12)
    out["int-mm"] = (int_mm, F.linear(torch.round(x / xs) * xs, dequantised, b))
    out["weight-int8pack"] = (
        lambda: torch._weight_int8pack_mm(x, wq, scale) + b,
        F.linear(x, dequantised, b),
    )
    try:
        import torchao.quantization as tq
    except ImportError:
        return out
    for name, config in (
        ("torchao-int8-dynamic", tq.Int8DynamicActivationInt8WeightConfig),
        ("torchao-int8-weight", tq.Int8WeightOnlyConfig),
    ):
        model = nn.Sequential(nn.Linear(w.shape[1], w.shape[0]))
        model[0].load_state_dict(linear.state_dict())
        tq.quantize_(model, config())
        out[name] = (lambda m=model: m(x), F.linear(x, w, b))
    return out


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=50, help="timed calls per kernel and shape")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # The small preset (d 256, d_ff 1024, vocabulary 8000) decoding 32 sentences with beam 4.
    shapes = [
        (128, 256, 768, "self-attention Q/K/V"),
        (128, 256, 1024, "FFN in"),
        (128, 1024, 256, "FFN out"),
    ]
    shapes += [(128, 256, 8000, "output projection"), (32, 256, 1024, "FFN in, greedy")]
    rows = []
    for batch, d_in, d_out, what in shapes:
        x, linear = torch.randn(batch, d_in), nn.Linear(d_in, d_out)
        found = kernels(x, linear)
        times: dict[str, list[float]] = {name: [] for name in found}
        for _ in range(args.reps):
            for name, (kernel, _) in found.items():  # alternating: load changes hit all alike
                start = time.perf_counter()
                kernel()
                times[name].append(time.perf_counter() - start)
        for name, (kernel, reference) in found.items():
            error = float((kernel() - reference).abs().max())
            ms = 1e3 * statistics.median(times[name])
            fp32 = 1e3 * statistics.median(times["fp32"])
            rows.append(
                f"| {what} ({batch}x{d_in}->{d_out}) | {name} | {ms:.3f} | {fp32 / ms:.2f}x | {error:.1e} |"
            )
            print(rows[-1])
    lines = [
        f"## int8 kernels on this CPU ({time.strftime('%Y-%m-%d')})",
        "",
        f"`python bench/int8_kernels.py --threads {args.threads} --reps {args.reps}` on "
        f"{platform.processor() or 'x86_64'}, torch {torch.__version__}; median of {args.reps} alternating "
        "calls. Speed-up is against fp32 `F.linear` in the same run; the error is against float32 "
        "arithmetic on the same quantised operands (for ao-dynamic and torchao, whose operands are "
        "internal, against plain float32: that error is their quantisation noise).",
        "",
        "| linear map | kernel | ms | vs fp32 | max error |",
        "|---|---|---|---|---|",
        *rows,
    ]
    if not args.no_write:
        write_section("int8-kernels", lines)


if __name__ == "__main__":
    main()
