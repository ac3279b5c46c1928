"""Which device a decoding command runs on: CUDA when there is one, else the CPU, or the one the
user names; a device that is not there is a clear error, not a CUDA traceback mid-decode. And which
attention kernel PyTorch tries first there."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DEVICES = ("auto", "cpu", "cuda", "cuda:N")
# PyTorch's fused attention kernels on CUDA, by their config names, in the order tried after the first
ATTENTION_KERNELS = {
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}


def attention_kernels(device: torch.device, first: str) -> contextlib.AbstractContextManager:
    """On CUDA, scaled-dot-product attention tries the kernel named `first`, then the others in
    `ATTENTION_KERNELS`' order, each taking the call only where it supports it (a mask, a dtype).

    PyTorch itself tries cuDNN first on Hopper GPUs; cuDNN builds a plan for each new shape, and a
    training run's batches come in many shapes (docs/results/gpu.md). The CPU has one kernel: no
    change there."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    _settle_default_order(device)
    order = [first, *(name for name in ATTENTION_KERNELS if name != first)]
    return sdpa_kernel([ATTENTION_KERNELS[name] for name in order], set_priority=True)


def _settle_default_order(device: torch.device) -> None:
    """PyTorch sets its default kernel order (cuDNN first on Hopper) at a process's first attention
    call on CUDA, over any order set before that call; one tiny call first lets ours stand (an H200
    trained on cuDNN with `efficient` named first: docs/results/gpu.md)."""
    q = torch.zeros(1, 1, 1, 8, device=device)
    F.scaled_dot_product_attention(q, q, q)


def choose_device(name: str = "auto", cpu_only: bool = False) -> torch.device:
    """`auto`: the first CUDA device when present (the CPU when `cpu_only`, e.g. for int8
    decoding, whose kernels are the CPU's); `cpu`, `cuda` or `cuda:N` as named."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() and not cpu_only else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        device = None
    # a CPU has no index (torch takes cpu:1 as the CPU all the same): named as the help says
    if (
        device is None
        or device.type not in ("cpu", "cuda")
        or (device.type == "cpu" and device.index is not None)
    ):
        raise ValueError(f"--device {name!r}: allowed: {', '.join(DEVICES)}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"--device {name}: no CUDA device is available to torch {torch.__version__}; use --device cpu"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(
                f"--device {name}: there are {torch.cuda.device_count()} CUDA devices "
                f"(cuda:0..cuda:{torch.cuda.device_count() - 1})"
            )
        if cpu_only:
            raise ValueError(f"--device {name}: --quantize int8 runs on the CPU only; use --device cpu")
    return device
