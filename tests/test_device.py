"""The decoding device's choice (CUDA when present, the CPU for int8) and what each gets: CPU
models are packed or quantised, CUDA models are used as loaded; and the attention kernel tried
first on CUDA (the priority PyTorch keeps, set and restored). CUDA is simulated here by patching
torch.cuda's queries; the real thing is in test_gpu.py."""

from __future__ import annotations

from typing import get_args

import pytest
import torch
from tiny import train_tiny

from transduce import device
from transduce.config.schema import TrainConfig
from transduce.device import ATTENTION_KERNELS, attention_kernels, choose_device
from transduce.model.packed import PackedLinear
from transduce.model.quantize import Int8Linear
from transduce.store.load import load_for_decoding

ROWS = [  # name, int8, CUDA devices present, chosen device or error fragment
    ("auto", False, 0, "cpu"),
    ("auto", False, 2, "cuda"),
    ("auto", True, 2, "cpu"),
    ("cpu", False, 2, "cpu"),
    ("cuda", False, 1, "cuda"),
    ("cuda:1", False, 2, "cuda:1"),
    ("cuda", False, 0, "no CUDA device is available"),
    ("cuda:2", False, 2, "there are 2 CUDA devices"),
    ("cuda", True, 1, "--quantize int8 runs on the CPU only"),
    ("tpu", False, 1, "allowed: auto, cpu, cuda, cuda:N"),
    ("cuda:x", False, 1, "allowed: auto, cpu, cuda, cuda:N"),
    ("", False, 0, "allowed: auto, cpu, cuda, cuda:N"),
]


@pytest.mark.parametrize(("name", "int8", "present", "expected"), ROWS)
def test_device_choice(monkeypatch, name, int8, present, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: present > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: present)
    if expected in ("cpu", "cuda", "cuda:1"):
        assert choose_device(name, cpu_only=int8) == torch.device(expected)
    else:
        with pytest.raises(ValueError, match=expected):
            choose_device(name, cpu_only=int8)


def _linear_kinds(model: torch.nn.Module) -> set[str]:
    return {
        type(m).__name__
        for m in model.modules()
        if isinstance(m, torch.nn.Linear | PackedLinear | Int8Linear)
    }


def test_cpu_decoding_packs_or_quantises(tmp_path):
    run = train_tiny(tmp_path / "r", 1)
    assert _linear_kinds(load_for_decoding(run, "none", device="cpu").model) == {"PackedLinear"}
    int8 = load_for_decoding(run, "int8", device="auto").model  # the tiny model's maps are all small
    assert _linear_kinds(int8) == {"PackedLinear"}


def _kernel_flags() -> tuple[bool, ...]:
    cuda = torch.backends.cuda
    return (
        cuda.flash_sdp_enabled(),
        cuda.mem_efficient_sdp_enabled(),
        cuda.cudnn_sdp_enabled(),
        cuda.math_sdp_enabled(),
    )


@pytest.mark.parametrize("first", list(ATTENTION_KERNELS))
def test_attention_kernels_put_the_named_one_first_on_cuda_and_restore_pytorchs_order(first, monkeypatch):
    """After one attention call on the device (a stand-in here: this machine has no CUDA), which is
    where PyTorch settles its own default order, so that ours is not overwritten at the first call."""
    before, flags = torch._C._get_sdp_priority_order(), _kernel_flags()
    settled = []
    monkeypatch.setattr(
        device, "_settle_default_order", lambda d: settled.append(torch._C._get_sdp_priority_order())
    )
    with attention_kernels(torch.device("cuda"), first):
        assert settled == [before]  # called once, before the order was changed
        order = torch._C._get_sdp_priority_order()
        assert order[0] == ATTENTION_KERNELS[first].value
        assert set(order[:4]) == {kernel.value for kernel in ATTENTION_KERNELS.values()}
        assert _kernel_flags() == (True, True, True, True)  # the others still take what it refuses
    assert (torch._C._get_sdp_priority_order(), _kernel_flags()) == (before, flags)


def test_attention_kernels_change_nothing_on_the_cpu():
    before = torch._C._get_sdp_priority_order()
    with attention_kernels(torch.device("cpu"), "math"):
        assert torch._C._get_sdp_priority_order() == before


def test_the_config_names_every_attention_kernel_and_only_those():
    assert get_args(TrainConfig.model_fields["attention_kernel"].annotation) == tuple(ATTENTION_KERNELS)
