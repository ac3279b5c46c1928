"""The optimizer's state in checkpoint form: JSON scalars beside named tensors (no pickle)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def optimizer_state(optimizer: torch.optim.Optimizer) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """Split an optimizer state dict into JSON scalars and named tensors."""
    state = optimizer.state_dict()
    groups = [  # the rate is a device tensor (train/step.py): saved as the number it holds
        {k: float(v) if isinstance(v, Tensor) else v for k, v in group.items()}
        for group in state["param_groups"]
    ]
    tensors: dict[str, Tensor] = {}
    scalars: dict[str, Any] = {}
    for pid, slots in state["state"].items():
        for slot, value in slots.items():
            if isinstance(value, Tensor):
                tensors[f"optim.{pid}.{slot}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{pid}.{slot}"] = value
    return {"param_groups": groups, "scalars": scalars}, tensors


def restore_optimizer(
    optimizer: torch.optim.Optimizer, saved: dict[str, Any], tensors: dict[str, Tensor]
) -> None:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, pid, slot = key.split(".", 2)
            state.setdefault(int(pid), {})[slot] = value
    for key, value in saved["scalars"].items():
        pid, slot = key.split(".", 1)
        state.setdefault(int(pid), {})[slot] = value
    optimizer.load_state_dict({"state": state, "param_groups": saved["param_groups"]})
