"""bf16 weights for the forward and backward passes, fp32 master weights for Adam
(`train.master_weights=true` with `train.precision=bf16`).

Under autocast every matrix product casts its fp32 weight to bf16 again at every step (12% of a
`base` step on a GPU). Here the passes run on a bf16 copy of the model with no autocast; its bf16
gradients are copied into the fp32 model's, which Adam updates as before, and the updated
weights are copied back into the bf16 copy. The fp32 model stays what is saved, resumed,
validated and averaged, so checkpoints and exact resume are as with any other precision: the bf16
copy is always the fp32 weights rounded.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


class MasterWeights:
    """The bf16 copy (`compute`) of a fp32 model, and the copies between them."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.compute = copy.deepcopy(model).to(torch.bfloat16)
        self.pairs = list(zip(self.compute.parameters(), model.parameters(), strict=True))
        # the fp32 gradients' storage, kept from step to step: one multi-tensor copy fills it
        self.grads = [torch.empty_like(master) for _, master in self.pairs]

    @torch.no_grad()
    def refresh(self) -> None:
        """The compute copy from the fp32 model as it is now (after a resume loaded it)."""
        self.compute.load_state_dict(self.model.state_dict())

    def zero_grad(self) -> None:
        self.compute.zero_grad(set_to_none=True)

    @torch.no_grad()
    def grads_to_master(self) -> None:
        """The compute copy's gradients, in fp32, as the master weights' (none where none): a few
        multi-tensor kernels, where a cast per parameter launched ~200 for `base` (a GPU step's
        host time is mostly launches)."""
        lows, highs = [], []
        for (low, master), grad in zip(self.pairs, self.grads, strict=True):
            master.grad = None if low.grad is None else grad
            if low.grad is not None:
                lows.append(low.grad)
                highs.append(grad)
        if lows:
            torch._foreach_copy_(highs, lows)

    @torch.no_grad()
    def weights_to_compute(self) -> None:
        """The master weights, rounded to bf16, into the compute copy (after Adam's update)."""
        torch._foreach_copy_([low for low, _ in self.pairs], [master for _, master in self.pairs])
