"""The Universal Transformer: one shared layer applied for T steps, with optional ACT.

Each step t = 1..T adds the coordinate embedding P^t[pos] = PE(pos) + PE(t) to the state
and applies the shared layer (post-norm as in the paper, or pre-norm):
    A^t = LN((H^{t-1} + P^t) + Att(H^{t-1} + P^t)),  H^t = LN(A^t + Transition(A^t)).

ACT (per position): after step t the halting unit gives p_t = sigmoid(w . H^t + b). A position
halts at the first step where its accumulated p would reach 1 - epsilon (or at step T); that
step's weight is the remainder R = 1 - sum of earlier p. The output is the weighted sum of the
step states (weights sum to 1); a halted position's state is frozen. Ponder cost = steps + R.
With `min_steps` m > 1 the halting unit is first read at step m: the m - 1 steps before it weigh
0 and every position takes them (a fixed-depth UT's first steps, then ACT).

`halt_bias` is the halting unit's initial bias (its weights start at 0): +1, tensor2tensor's, gives
p ~ 0.73, so every position halts at its second step until training moves it; -3 gives p ~ 0.05,
every step at first (up to 20 steps: 20 x 0.047 < 0.99). A position that halts at step 1 takes
R = 1 whatever p is, so nothing trains its halting unit there: a stack that reaches it everywhere
stays there. With `halt_detach` the halting unit reads the state without its gradient, so what
asks for fewer or more steps trains the halting unit alone, not the shared layer.

The positions pos of P^t come in `StackInputs.positions`: drawn at random in training
(randomised_positions.py), once per pass for all steps, or for each later step through
`StackInputs.redraw` (`per_step`); PE(t) is unchanged.

Decoding with a cache runs every new position through all T steps (halted ones frozen), so
each step's cache holds keys/values of every earlier position, exactly as a full pass has.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .cache import LayerCache, StaticKV
from .embeddings import SinusoidalPositions
from .layers import StackInputs, StackOutput, TransformerLayer
from .ponder import Ponder


class UniversalStack(nn.Module):
    """A shared layer applied `steps` times; drop-in for `Stack` in the assemblies."""

    def __init__(
        self,
        layer: TransformerLayer,
        *,
        d: int,
        steps: int,
        norm: str,
        act: bool,
        act_epsilon: float,
        halt_bias: float = 1.0,
        min_steps: int = 1,
        halt_detach: bool = False,
        layout: str = "interleaved",
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.layer, self.steps, self.act_epsilon, self.min_steps = layer, steps, act_epsilon, min_steps
        self.halt_detach = halt_detach
        self.positions = SinusoidalPositions(d, layout)
        self.final_norm = nn.LayerNorm(d, eps=eps) if norm == "pre" else None
        self.halt = nn.Linear(d, 1) if act else None
        if self.halt is not None:
            nn.init.zeros_(self.halt.weight)
            nn.init.constant_(self.halt.bias, halt_bias)

    @property
    def depth(self) -> int:
        """Layer applications per pass: one per step (what per-step masks and caches count)."""
        return self.steps

    def new_cache(self) -> list[LayerCache]:
        """One cache per step; the steps share cross-attention K/V (same layer, same memory)."""
        cross = StaticKV()
        return [LayerCache(cross_kv=cross) for _ in range(self.steps)]

    def position_signal(self, length: int, offset: int, positions: Tensor | None) -> Tensor:
        """PE(pos), (length, d) or (batch, length, d): of `positions`, or of offset..offset+length-1
        when there are none."""
        return self.positions(length, offset) if positions is None else self.positions.at(positions)

    def forward(self, x: Tensor, inputs: StackInputs, caches: list[LayerCache] | None = None) -> StackOutput:
        """x: (batch, n, d) token embeddings, the first at absolute position inputs.offset."""
        batch, n, _ = x.shape
        pad = inputs.shared.pad
        running = torch.ones(batch, n, dtype=torch.bool, device=x.device) if pad is None else ~pad
        real = running.clone()
        accumulated = torch.zeros(batch, n, device=x.device)
        remainder = torch.zeros(batch, n, device=x.device)
        taken = torch.zeros(batch, n, device=x.device)
        output = torch.zeros_like(x)
        weights = []
        state = x
        pos = self.position_signal(n, inputs.offset, inputs.positions)
        for t in range(self.steps):
            if t and inputs.redraw is not None:  # per_step: every step its own draw
                pos = self.position_signal(n, inputs.offset, inputs.redraw(n))
            coordinates = (pos + self.positions(1, t + 1)).to(x.dtype)  # P^t = PE(pos) + PE(t)
            new = self.layer(state + coordinates, inputs.layer(t, caches))
            if self.halt is None:
                state = new
                continue
            if t < self.min_steps - 1:  # before the halting unit is read: weight 0, no position halts
                taken = taken + running.float()
                state = torch.where(running.unsqueeze(-1), new, state)
                weights.append(torch.zeros_like(accumulated))
                continue
            p = torch.sigmoid(self.halt(new.detach() if self.halt_detach else new)).squeeze(-1).float()
            halts = running & ((accumulated + p >= 1.0 - self.act_epsilon) | (t == self.steps - 1))
            w = torch.where(halts, 1.0 - accumulated, torch.where(running, p, torch.zeros_like(p)))
            output = output + w.unsqueeze(-1).to(x.dtype) * new
            remainder = torch.where(halts, 1.0 - accumulated, remainder)
            accumulated = accumulated + torch.where(running & ~halts, p, torch.zeros_like(p))
            taken = taken + running.float()
            state = torch.where(running.unsqueeze(-1), new, state)
            running = running & ~halts
            weights.append(w)
            if not running.any() and caches is None:
                break  # a cached decoder keeps stepping: later positions need every step's K/V
        ponder = None
        if self.halt is not None:
            state = torch.where(real.unsqueeze(-1), output, state)
            ponder = Ponder(taken, remainder, torch.stack(weights), pad)
        return StackOutput(self.final_norm(state) if self.final_norm is not None else state, ponder)
