"""What the training step counts on the device, so that no step waits for the device to decide.

Whether an update is applied (a finite loss and gradient norm), how many were skipped, how many
non-finite ones came in a row, the target tokens trained on and the last step's statistics all
stay device tensors; the loop reads them back in one transfer (`read`) every `train.log_every`
steps and wherever it must wait anyway (validation, checkpoints, the end). Between read-backs a
step costs the host no synchronisation, so the host queues the next step while the device still
runs this one. When `train.max_bad_steps` non-finite steps come in a row, the counters stop (no
later step is applied or counted) and the next read-back ends the run: what the run reports and
saves is the state at the last of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from .state import TrainingError, TrainState

# Outcomes of a step, as the device records them.
APPLIED, NON_FINITE, OVERFLOW, HALTED = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class Tally:
    """The counters as one read-back found them."""

    step: int  # updates applied in all (the learning rate's step)
    skipped: int
    bad_in_row: int
    tokens: int  # target tokens of the updates applied since the last read-back
    outcome: int  # of the last step: APPLIED, NON_FINITE, OVERFLOW or HALTED
    loss: float  # the last step's smoothed loss, NLL and gradient norm (per target token)
    nll: float
    step_tokens: int
    grad_norm: float


class StepCounters:
    """The device's counters and the skip decision of each step."""

    def __init__(self, device: torch.device, max_bad_steps: int) -> None:
        self.device, self.max_bad_steps = device, max_bad_steps
        # step, skipped, bad_in_row, tokens since the last read-back, the last step's outcome
        self.counts = torch.zeros(5, dtype=torch.int64, device=device)
        # the last step: smoothed loss sum, NLL sum, target tokens, gradient norm
        self.last = torch.zeros(4, dtype=torch.float64, device=device)

    @property
    def step(self) -> Tensor:
        """Updates applied so far (a device scalar: the learning rate's schedule reads it)."""
        return self.counts[0]

    def start(self, step: int, skipped: int, bad_in_row: int) -> None:
        """Take the loop's state (a fresh run, a resumed one, a fine-tuning run's kept step)."""
        self.counts.copy_(torch.tensor([step, skipped, bad_in_row, 0, APPLIED], dtype=torch.int64))

    def decide(self, loss_sum: Tensor, grad_norm: Tensor, overflow_possible: Tensor | None) -> Tensor:
        """The outcome of a step (a device scalar), from its summed loss and gradient norm.
        `overflow_possible`: fp16's loss scale is at least 1, so a non-finite gradient with a finite
        loss is the scale's overflow (the scaler lowers it), not a bad step."""
        finite_loss = torch.isfinite(loss_sum)
        finite = finite_loss & torch.isfinite(grad_norm)
        outcome = torch.where(finite, APPLIED, NON_FINITE)
        if overflow_possible is not None:
            outcome = torch.where(~finite & finite_loss & overflow_possible, OVERFLOW, outcome)
        halted = self.counts[2] >= self.max_bad_steps
        return torch.where(halted, HALTED, outcome)

    def record(self, outcome: Tensor, sums: Tensor, tokens: Tensor, grad_norm: Tensor) -> None:
        """Count a step whose outcome `decide` gave: (smoothed loss, NLL) sums, its target tokens."""
        applied = outcome == APPLIED
        bad = (outcome == NON_FINITE).long()
        step, skipped, bad_in_row, tokens_so_far = self.counts[:4].unbind()
        counts = torch.stack(
            [
                step + applied.long(),
                skipped + ((outcome == NON_FINITE) | (outcome == OVERFLOW)).long(),
                torch.where(applied, 0, bad_in_row + bad),
                tokens_so_far + torch.where(applied, tokens.long(), 0),
                outcome.long(),
            ]
        )
        self.counts.copy_(counts)
        self.last.copy_(torch.stack([sums[0], sums[1], tokens, grad_norm]).double())

    def read(self) -> Tally:
        """The counters on the host (one synchronisation); the token count starts again."""
        values = torch.cat([self.counts.double(), self.last]).tolist()
        self.counts[3].zero_()
        step, skipped, bad_in_row, tokens, outcome = (int(c) for c in values[:5])
        loss_sum, nll_sum, step_tokens, norm = values[5:]
        per_token = max(step_tokens, 1.0)
        return Tally(
            step=step,
            skipped=skipped,
            bad_in_row=bad_in_row,
            tokens=tokens,
            outcome=outcome,
            loss=loss_sum / per_token,
            nll=nll_sum / per_token,
            step_tokens=int(step_tokens),
            grad_norm=norm,
        )


class ReadBack:
    """The steps queued since the counters were last read back, with the sampler's position after
    each: a read-back moves the state and the data position a checkpoint saves together, to the
    last step the counters counted."""

    def __init__(self, counters: StepCounters, position: dict[str, int]) -> None:
        self.counters, self.position = counters, position
        self.pending: list[dict[str, int]] = []
        self.deferred = False  # within the training loop: steps are not read back one by one

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        """Within the block, a step is read back only where the loop asks."""
        self.deferred = True
        try:
            yield
        finally:
            self.deferred = False

    def queue(self, position: dict[str, int]) -> None:
        """A step is queued; `position`: the sampler's after its batches."""
        self.pending.append(position)

    def __len__(self) -> int:
        return len(self.pending)

    def read(self, state: TrainState) -> Tally:
        """The device's counters into `state` (one synchronisation)."""
        tally = self.counters.read()
        counted = tally.step - state.step + tally.skipped - state.skipped
        if counted:
            self.position = self.pending[counted - 1]
        self.pending.clear()
        state.step, state.skipped, state.bad_in_row = tally.step, tally.skipped, tally.bad_in_row
        state.tokens += tally.tokens
        return tally

    def check(
        self, state: TrainState, skipped: int, scaler: torch.amp.GradScaler, say: Callable[[str], None]
    ) -> None:
        """After a read-back in the training loop: say how many updates were skipped since the one
        before (`skipped` then), and end the run after train.max_bad_steps non-finite ones in a row."""
        if state.skipped > skipped:
            scale = f"; loss scale now {scaler.get_scale():g}" if scaler.is_enabled() else ""
            say(
                f"step {state.step}: {state.skipped - skipped} update(s) skipped since the last read-back "
                f"(non-finite loss or gradient, or an fp16 overflow){scale}; "
                f"{state.bad_in_row} non-finite in a row"
            )
        if state.bad_in_row >= self.counters.max_bad_steps:
            raise TrainingError(
                f"{state.bad_in_row} non-finite losses in a row at step {state.step} (seen when the step "
                "counters were read back, every train.log_every steps; the steps after them changed "
                "nothing); lower train.lr_scale, set train.clip_norm, or check the data"
            )
