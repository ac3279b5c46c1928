"""Which device a decoding command runs on: CUDA when there is one, else the CPU, or the one the
user names; a device that is not there is a clear error, not a CUDA traceback mid-decode."""

from __future__ import annotations

import torch

DEVICES = ("auto", "cpu", "cuda", "cuda:N")


def choose_device(name: str = "auto", cpu_only: bool = False) -> torch.device:
    """`auto`: the first CUDA device when present (the CPU when `cpu_only`, e.g. for int8
    decoding, whose kernels are the CPU's); `cpu`, `cuda` or `cuda:N` as named."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() and not cpu_only else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
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
