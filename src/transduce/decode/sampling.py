"""Sampling: draw outputs from the model's distribution instead of searching for the best one.

Search returns the mode; sampling returns varied outputs (back-translation, data augmentation,
diverse n-best lists, estimates of expectations). Each step draws the next token from
softmax(log p / temperature), cut to the `top_k` most probable tokens and then to the nucleus
(the smallest set of most probable tokens whose mass reaches `top_p`, Holtzman et al., 2020),
renormalised. PAD and BOS are never drawn, EOS not before `min_len`, and a forced prefix is
taken first, as in search. The score of a sample is its log-probability under the model itself
(temperature and cuts do not change it), without length penalty.

Reproducibility: every (source, sample) pair draws from its own torch.Generator seeded from the
source's seed and the sample's number, one uniform number per step. A sample therefore depends
only on its source, its seed and its number, never on what else is in the batch: batched and
one-by-one sampling agree, and `decode_all` results do not change with the token budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

import numpy as np
import torch
from torch import Tensor

from .search import Hypothesis, SearchOptions, Seq2Seq, left_to_right, start


def check_sampling(temperature: float, top_k: int, top_p: float, num_samples: int = 1) -> None:
    """ValueError (one line naming the option and its range) for settings outside their ranges."""
    if not temperature > 0:  # also refuses nan
        raise ValueError(f"temperature must be > 0, not {temperature}")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0: off), not {top_k}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] (1: off), not {top_p}")
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, not {num_samples}")


def stream_seed(*keys: int) -> int:
    """A 64-bit seed for the random stream named by `keys` (non-negative ints); numpy's
    SeedSequence mixes them, so nearby keys give unrelated streams."""
    return int(np.random.SeedSequence(list(keys)).generate_state(1, np.uint64)[0])


def sampling_probs(logp: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """(rows, vocab) log-probabilities -> the distribution a token is drawn from: softmax(logp / T),
    zero outside the k most probable tokens (top_k > 0), then zero outside the smallest set of
    most probable tokens whose mass reaches top_p (top_p < 1), renormalised."""
    logp = logp.float()
    logits = (logp - logp.max(-1, keepdim=True).values) / temperature  # the best stays at 0: no underflow
    if 0 < top_k < logits.shape[-1]:
        best = logits.topk(top_k, dim=-1).indices
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, best, True)
        logits = logits.masked_fill(~keep, -torch.inf)
    probs = logits.softmax(-1)
    if top_p < 1.0:
        ranked, order = probs.double().sort(-1, descending=True)
        before = ranked.cumsum(-1) - ranked  # mass of the more probable tokens
        # A token stays while the tokens above it hold less than p: the shortest prefix reaching p.
        drop = torch.zeros_like(before, dtype=torch.bool).scatter_(-1, order, before >= top_p)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def draw(probs: Tensor, uniforms: Tensor) -> Tensor:
    """Inverse-CDF draw: row i takes the token whose cumulative-mass interval holds
    uniforms[i] x (row mass); a token of probability 0 has an empty interval, so it is never taken."""
    cdf = probs.double().cumsum(-1)
    target = uniforms.to(cdf)[:, None] * cdf[:, -1:]
    index = torch.searchsorted(cdf, target, right=True)[:, 0]
    last_possible = probs.shape[-1] - 1 - probs.gt(0).flip(-1).long().argmax(-1)  # rounding guard
    return torch.minimum(index, last_possible)


@torch.no_grad()
def sample(
    model: Seq2Seq,
    src: Tensor,
    temperature: float = 1.0,
    seeds: Sequence[int] | None = None,
    top_k: int = 0,
    top_p: float = 1.0,
    num_samples: int = 1,
    **options: Unpack[SearchOptions],
) -> list[list[Hypothesis]]:
    """`num_samples` outputs per source of the batch (batch, m), in the order drawn.

    seeds: one non-negative int per source; sample j of source i draws from a generator seeded
    with stream_seed(seeds[i], j). None takes the seeds from torch's global RNG (so
    torch.manual_seed makes the call reproducible). The encoder runs once per source; its
    output is repeated for the samples, which are decoded together with the KV cache."""
    check_sampling(temperature, top_k, top_p, num_samples)
    batch, n = src.shape[0], num_samples
    begun = start(model, src, options)
    limits, forced, memory = begun.limits, begun.prefixes, begun.memory
    if seeds is None:
        seeds = torch.randint(0, 2**62, (batch,)).tolist()
    if len(seeds) != batch:
        raise ValueError(f"{len(seeds)} seeds for {batch} sources")
    if any(int(s) < 0 for s in seeds):
        raise ValueError("sampling seeds must be >= 0")
    generators = [
        torch.Generator().manual_seed(stream_seed(int(seeds[i]), j)) for i in range(batch) for j in range(n)
    ]

    def choose(logp: Tensor, rows: list[int]) -> Tensor:
        probs = sampling_probs(logp, temperature, top_k, top_p)
        uniforms = torch.cat([torch.rand(1, generator=generators[r], dtype=torch.float64) for r in rows])
        return draw(probs, uniforms.to(probs.device))

    of = [i for i in range(batch) for _ in range(n)]  # the source of each sequence
    if n > 1:
        memory = memory.select(torch.tensor(of, device=src.device))
    flat = left_to_right(
        model,
        memory,
        [limits[i] for i in of],
        choose,
        min_len=begun.min_len,
        prefixes=[forced[i] for i in of],
        device=src.device,
    )
    return [flat[i * n : (i + 1) * n] for i in range(batch)]
