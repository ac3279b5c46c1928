"""Which scaled-dot-product-attention kernel runs with the masks our model passes (issue 47 item 3).

    python -m bench.gpu.sdpa --out $OUT            # on a lent GPU (bench.gpu.session's sdpa stage)
    python -m bench.gpu.sdpa --device cpu --out /tmp/sdpa

model/attention.py hands `F.scaled_dot_product_attention` an additive float mask: key padding
(batch, 1, 1, keys) in the encoder and cross-attention, a causal (queries, keys) one in the
decoder during training. PyTorch picks a kernel (flash, memory-efficient, cuDNN, math) by what
the inputs allow; flash takes no mask at all. For each mask, each backend is tried alone
(`torch.nn.attention.sdpa_kernel`): whether it accepts the call and how long it takes, forward
alone and forward + backward (`_train_us`), beside the default choice and its time (`chosen`: the
backend PyTorch picks by itself). Then decoding's calls, forward only (`decoding` in the JSON):
one query a row against the growing cache (held as (rows, positions, heads, d_head), handed out
as a view) and beam search's grouped cross-attention, --beam x --sentences rows. Writes sdpa.json.
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

from transduce.model.attention import scaled_dot_product

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


def kernel_row(
    head: dict, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kwargs: dict, device, train: bool
) -> dict:
    """`head` with one attention call's times: PyTorch's own choice, then each backend alone
    (forward, and forward + backward when `train`), or why it refused the call."""

    def call() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)

    row = head | {"default_us": timed(call, device), "chosen": chosen(q, k, v, kwargs)}
    for backend, kind in BACKENDS.items():
        try:
            with sdpa_kernel([kind]):
                row[f"{backend}_us"] = timed(call, device)
                if train:
                    row[f"{backend}_train_us"] = timed(lambda: forward_backward(q, k, v, kwargs), device)
        except RuntimeError as exc:
            row[f"{backend}_us"] = None
            row[f"{backend}_refused"] = str(exc).splitlines()[0][:160]
    return row


def probe(args: argparse.Namespace) -> list[dict]:
    device, dtype = args.device, getattr(torch, args.dtype)
    g = torch.Generator(device=device).manual_seed(0)
    shape = (args.batch, args.heads, args.length, args.d_head)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, generator=g) for _ in range(3))
    rows = []
    for name, kwargs in masks(args.batch, args.length, device, dtype).items():
        row = kernel_row({"mask": name}, q, k, v, kwargs, device, train=True)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def decoding_calls(args: argparse.Namespace) -> dict[str, tuple[torch.Tensor, ...]]:
    """Decoding's attention calls at beam search's sizes: (q, k, v, mask or None) each."""
    device, dtype = args.device, getattr(torch, args.dtype)
    g = torch.Generator(device=device).manual_seed(1)
    rows, heads, d = args.sentences * args.beam, args.heads, args.d_head

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, device=device, dtype=dtype, generator=g)

    calls = {}
    for filled in (8, 32):  # the cache's layout: (rows, capacity, heads, d_head), 64 positions held
        k, v = (randn(rows, 64, heads, d)[:, :filled].transpose(1, 2) for _ in "kv")
        calls[f"self, 1 query a row, {filled} cached keys"] = (randn(rows, heads, 1, d), k, v, None)
    memory = args.length // 2
    pad = masks(args.sentences, memory, device, dtype)["key padding, additive (encoder, cross)"]["attn_mask"]
    calls[f"cross, {args.beam} grouped queries, {memory} keys"] = (
        randn(args.sentences, heads, args.beam, d),
        randn(args.sentences, heads, memory, d),
        randn(args.sentences, heads, memory, d),
        pad,
    )
    return calls


def decoding_row(name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask, device) -> dict:
    """One decoding call's times: PyTorch's choice, each backend alone, and the model's own plain
    path (two matrix products and a softmax, outside SDPA: `scaled_dot_product` with weights)."""
    row = kernel_row(
        {"call": name}, q, k, v, {} if mask is None else {"attn_mask": mask}, device, train=False
    )
    row["products_us"] = timed(lambda: scaled_dot_product(q, k, v, mask, need_weights=True)[0], device)
    print(json.dumps(row), flush=True)
    return row


def probe_decoding(args: argparse.Namespace) -> list[dict]:
    return [decoding_row(name, *call, args.device) for name, call in decoding_calls(args).items()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--length", type=int, default=48)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--sentences", type=int, default=1024, help="decoding's calls: sentences searched")
    parser.add_argument("--beam", type=int, default=4, help="decoding's calls: beam size")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--device", type=torch.device, default="cuda")
    parser.add_argument("--out", type=Path, default=Path("bench/out/gpu/sdpa"))
    args = parser.parse_args()
    rows, decoding = probe(args), probe_decoding(args)
    args.out.mkdir(parents=True, exist_ok=True)
    setup = {k: str(v) for k, v in vars(args).items() if k != "out"}
    (args.out / "sdpa.json").write_text(
        json.dumps({"setup": setup, "rows": rows, "decoding": decoding}, indent=1)
    )


if __name__ == "__main__":
    main()
