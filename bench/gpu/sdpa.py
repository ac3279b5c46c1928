"""Which scaled-dot-product-attention kernel runs with the masks our model passes (issue 47 item 3).

    python -m bench.gpu.sdpa --out $OUT            # on a lent GPU (bench.gpu.session's sdpa stage)
    python -m bench.gpu.sdpa --device cpu --out /tmp/sdpa

model/attention.py hands `F.scaled_dot_product_attention` an additive float mask: key padding
(batch, 1, 1, keys) in the encoder and cross-attention, a causal (queries, keys) one in the
decoder during training. PyTorch picks a kernel (flash, memory-efficient, cuDNN, math) by what
the inputs allow; flash takes no mask at all. For each mask, each backend is tried alone
(`torch.nn.attention.sdpa_kernel`): whether it accepts the call and how long it takes, forward
alone and forward + backward (`_train_us`), beside the default choice and its time (`chosen`: the
backend PyTorch picks by itself). Writes sdpa.json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}


def masks(batch: int, length: int, device: torch.device, dtype: torch.dtype) -> dict[str, dict]:
    """SDPA keyword arguments for each way our model masks attention."""
    lengths = torch.randint(length // 2, length + 1, (batch,), device=device)
    pad = torch.arange(length, device=device)[None, :] >= lengths[:, None]
    additive = torch.zeros(batch, 1, 1, length, device=device, dtype=dtype).masked_fill(
        pad[:, None, None, :], float("-inf")
    )
    causal = torch.triu(torch.full((length, length), float("-inf"), device=device, dtype=dtype), 1)
    return {
        "none": {},
        "key padding, additive (encoder, cross)": {"attn_mask": additive},
        "key padding, boolean": {"attn_mask": ~pad[:, None, None, :]},
        "causal, additive (decoder training)": {"attn_mask": causal},
        "causal, is_causal": {"is_causal": True},
    }


def timed(call: Callable[[], torch.Tensor], device: torch.device, reps: int = 20) -> float:
    call()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    begin = time.perf_counter()
    for _ in range(reps):
        call()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - begin) / reps * 1e6


# torch._fused_sdp_choice's answer, an SDPBackend value
CHOICE = {-1: "error", 0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}


def chosen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kwargs: dict) -> str:
    """The backend PyTorch picks by itself for these inputs (a private function: reported, never fatal)."""
    try:
        mask, causal = kwargs.get("attn_mask"), kwargs.get("is_causal", False)
        return CHOICE.get(int(torch._fused_sdp_choice(q, k, v, mask, 0.0, causal)), "?")
    except Exception as exc:
        return f"unknown ({type(exc).__name__})"


def forward_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kwargs: dict) -> torch.Tensor:
    """A training step's attention: forward, then backward from a gradient of ones."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    out.backward(torch.ones_like(out))
    return out


def probe(args: argparse.Namespace) -> list[dict]:
    device, dtype = args.device, getattr(torch, args.dtype)
    g = torch.Generator(device=device).manual_seed(0)
    shape = (args.batch, args.heads, args.length, args.d_head)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, generator=g) for _ in range(3))
    rows = []
    for name, kwargs in masks(args.batch, args.length, device, dtype).items():
        row: dict = {
            "mask": name,
            "default_us": timed(lambda kw=kwargs: F.scaled_dot_product_attention(q, k, v, **kw), device),
            "chosen": chosen(q, k, v, kwargs),
        }
        for backend, kind in BACKENDS.items():
            try:
                with sdpa_kernel([kind]):
                    row[f"{backend}_us"] = timed(
                        lambda kw=kwargs: F.scaled_dot_product_attention(q, k, v, **kw), device
                    )
                    train = timed(lambda kw=kwargs: forward_backward(q, k, v, kw), device)
                    row[f"{backend}_train_us"] = train
            except RuntimeError as exc:
                row[f"{backend}_us"] = None
                row[f"{backend}_refused"] = str(exc).splitlines()[0][:160]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--length", type=int, default=48)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--device", type=torch.device, default="cuda")
    parser.add_argument("--out", type=Path, default=Path("bench/out/gpu/sdpa"))
    args = parser.parse_args()
    rows = probe(args)
    args.out.mkdir(parents=True, exist_ok=True)
    setup = {k: str(v) for k, v in vars(args).items() if k != "out"}
    (args.out / "sdpa.json").write_text(json.dumps({"setup": setup, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
