"""Greedy and beam search as functions over batched tensors (no I/O).

Length penalty of Wu et al. (2016): score = log P(Y | X) / lp(Y), lp(Y) = ((5 + |Y|) / 6)^alpha,
where |Y| counts the generated tokens including the final EOS. A hypothesis that reaches
the length limit a * |X| + b without EOS is finished as it is. PAD and BOS are never generated.

A forced prefix (per source, token ids) makes the first steps take the given tokens, at their
log-probabilities under the model, before search goes on freely: interactive translation and
"complete this output" both need the best continuation of a fixed start. The score and
log-probability of a hypothesis are those of the whole output, prefix included.

Search needs only `encode`, `decode` with a cache and `new_cache` (`Seq2Seq`), so an ensemble
(decode/ensemble.py), a language model (which encodes nothing and reads its prompt as a forced
prefix) or a reference decoder in a test is searched the same way as an encoder-decoder.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, Unpack

import torch
from torch import Tensor

from ..data.vocab import BOS, EOS, PAD


class Seq2Seq(Protocol):
    """What search asks of a model: EncoderDecoder, an Ensemble, or a test's reference decoder.

    `encode` returns a memory with `select(index)`; `new_cache` a cache with
    `reorder(index, sources=None)`; `decode` (batch, n) new target ids -> (batch, n, vocab) logits
    or log-probabilities."""

    def encode(self, src: Tensor, **source: Tensor) -> Any: ...

    def decode(self, tgt: Tensor, memory: Any, cache: Any = None) -> Tensor: ...

    def new_cache(self) -> Any: ...


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # log P / lp
    log_prob: float


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """lp(|Y|) = ((5 + |Y|) / 6)^alpha, of one length or elementwise of a tensor of them."""
    return ((5.0 + length) / 6.0) ** alpha


def max_output_length(source_length: int, a: float, b: int) -> int:
    """a * |source| + b, at least 1 (|source| without EOS)."""
    return max(1, int(a * source_length + b))


def length_limits(src: Tensor, a: float, b: int) -> list[int]:
    """Max output length per sentence: a * |source| + b, at least 1 (|source| excludes EOS/pad)."""
    lengths = src.ne(PAD).sum(1) - 1
    return [max_output_length(n, a, b) for n in lengths.tolist()]


def check_prefix(prefix: Sequence[int], limit: int, where: str) -> list[int]:
    """The prefix as a list of ints; ValueError (one line, naming `where`) if it is longer than the
    output may be or holds a token that is never generated (PAD, BOS, EOS, negative)."""
    tokens = [int(t) for t in prefix]
    if len(tokens) > limit:
        raise ValueError(
            f"{where}: the forced prefix has {len(tokens)} tokens, more than the maximum output "
            f"length {limit} (max_len_a * source length + max_len_b)"
        )
    for t in tokens:
        if t in (PAD, BOS, EOS) or t < 0:
            raise ValueError(f"{where}: forced prefix token id {t} is PAD, BOS, EOS or negative")
    return tokens


def check_prefixes(prefixes: Sequence[Sequence[int]] | None, limits: list[int]) -> list[list[int]]:
    """One checked prefix per source row (empty ones when `prefixes` is None)."""
    if prefixes is None:
        return [[] for _ in limits]
    if len(prefixes) != len(limits):
        raise ValueError(f"{len(prefixes)} forced prefixes for {len(limits)} sources")
    pairs = zip(prefixes, limits, strict=True)
    return [check_prefix(p, limit, f"source {row + 1}") for row, (p, limit) in enumerate(pairs)]


def _forced(prefixes: list[list[int]], rows: list[int], step: int, device: torch.device) -> Tensor | None:
    """Per decoder row (rows[i]: its source), the token its prefix forces now, -1 if none; None
    when no row is forced at this step."""
    tokens = [prefixes[s][step] if step < len(prefixes[s]) else -1 for s in rows]
    if max(tokens, default=-1) < 0:
        return None
    return torch.tensor(tokens, device=device)


def _check_prefix_vocab(prefixes: list[list[int]], vocab: int) -> None:
    top = max((max(p) for p in prefixes if p), default=-1)
    if top >= vocab:
        raise ValueError(f"forced prefix token id {top} is outside the target vocabulary ({vocab} entries)")


def _step_log_probs(
    model: Seq2Seq,
    tokens: Tensor,
    memory: Any,
    cache: Any,
    *,
    step: int,
    min_len: int,
    forced: Tensor | None = None,
) -> Tensor:
    logits = model.decode(tokens, memory, cache)[:, -1].float()
    logp = logits.log_softmax(-1)
    logp[:, PAD] = -math.inf
    logp[:, BOS] = -math.inf
    if step < min_len:
        logp[:, EOS] = -math.inf
    if forced is not None:  # forced rows keep only their token, at its log-probability
        index = forced.clamp(min=0)[:, None]
        only = torch.full_like(logp, -math.inf).scatter_(1, index, logp.gather(1, index))
        logp = torch.where(forced.lt(0)[:, None], logp, only)
    return logp


# choose(log_probs (rows, vocab), each row's sequence number) -> the next token of each row (rows,)
Choose = Callable[[Tensor, list[int]], Tensor]


def left_to_right(
    model: Seq2Seq,
    memory: Any,
    limits: list[int],
    choose: Choose,
    *,
    min_len: int = 0,
    prefixes: list[list[int]] | None = None,
    device: torch.device | None = None,
    read_every: int | None = None,
) -> list[Hypothesis]:
    """One token per step for each sequence (one row of `memory` each) until EOS or its length
    limit, with the KV cache; finished sequences leave the batch. Greedy search and sampling
    differ only in `choose`. Scores are log-probabilities under the model, without penalty.

    Outputs and log-probabilities stay on the device; the host reads back which sequences ended
    (one boolean each) every `read_every` steps (default `read_back_every(device)`: on a GPU every
    read-back waits for the device), and the ended ones leave the batch then. Until then they are
    decoded on, their outputs and log-probabilities untouched: the same results, up to the
    rounding of a batch that holds other rows."""
    batch, longest = len(limits), max(limits)
    prefixes = prefixes or [[] for _ in range(batch)]
    cache = model.new_cache()
    active = list(range(batch))  # each live row's sequence
    rows = torch.arange(batch, device=device)
    live_limits = torch.tensor(limits, device=device)
    outputs = torch.full((batch, longest), PAD, dtype=torch.long, device=device)  # PAD: not generated
    log_probs = torch.zeros(batch, dtype=torch.float64, device=device)
    tokens = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    ended = torch.zeros(batch, dtype=torch.bool, device=device)  # each live row's sequence ended
    longest_prefix = max(len(p) for p in prefixes)
    every = read_every or read_back_every(tokens.device)
    for step in range(longest):
        forced = _forced(prefixes, active, step, tokens.device) if step < longest_prefix else None
        logp = _step_log_probs(model, tokens, memory, cache, step=step, min_len=min_len, forced=forced)
        if step == 0:
            _check_prefix_vocab(prefixes, logp.shape[-1])
        next_tokens = choose(logp, active)
        picked = logp.gather(1, next_tokens[:, None])[:, 0].double()
        log_probs.index_add_(0, rows, picked.masked_fill(ended, 0.0))
        eos = next_tokens.eq(EOS)
        outputs[rows, step] = next_tokens.masked_fill(ended | eos, PAD)
        ended = ended | eos | live_limits.le(step + 1)
        if read_due(step, every, longest):
            done = ended.tolist()
            if all(done):
                break
            if any(done):
                keep = [i for i, d in enumerate(done) if not d]
                index = torch.tensor(keep, device=tokens.device)
                active = [active[i] for i in keep]
                rows, live_limits, next_tokens, ended = (
                    t[index] for t in (rows, live_limits, next_tokens, ended)
                )
                memory = memory.select(index)
                cache.reorder(index, index)
        tokens = next_tokens[:, None]
    found = [row[: row.index(PAD)] if PAD in row else row for row in outputs.tolist()]
    return [Hypothesis(t, lp, lp) for t, lp in zip(found, log_probs.tolist(), strict=True)]


def read_back_every(device: torch.device) -> int:
    """Steps between the host's reads of which sequences (or sentences) are done: every step on
    the CPU, where a done one left in the batch costs its arithmetic; every 4 on a GPU, where a read
    stops the host queueing work until the device has caught up, and a done row costs little."""
    return 4 if device.type == "cuda" else 1


def read_due(step: int, every: int, steps: int) -> bool:
    """Whether the host reads back after `step` (from 0) of at most `steps`: every `every` steps,
    and after the last."""
    return (step + 1) % every == 0 or step == steps - 1


def _most_probable(logp: Tensor, rows: list[int]) -> Tensor:
    return logp.argmax(-1)


class SearchOptions(TypedDict, total=False):
    """What every search takes besides its own settings (defaults in brackets)."""

    max_len_a: float  # outputs of at most a * source length + b tokens [1.0]
    max_len_b: int  # [50]
    min_len: int  # no EOS before this many tokens [0]
    source: (
        dict[str, Tensor] | None
    )  # extra encoder inputs (factors, syntax), as annotation_tensors makes them
    prefixes: Sequence[Sequence[int]] | None  # per source, target token ids forced first


@dataclass
class Start:
    """A search's starting point: the encoded sources, their length limits and prefixes."""

    memory: Any
    limits: list[int]
    prefixes: list[list[int]]
    min_len: int


def start(model: Seq2Seq, src: Tensor, options: SearchOptions) -> Start:
    """Check the options (prefixes against the limits) and encode the sources once."""
    limits = length_limits(src, options.get("max_len_a", 1.0), options.get("max_len_b", 50))
    prefixes = check_prefixes(options.get("prefixes"), limits)
    memory = model.encode(src, **(options.get("source") or {}))
    return Start(memory, limits, prefixes, options.get("min_len", 0))


@torch.no_grad()
def greedy(model: Seq2Seq, src: Tensor, **options: Unpack[SearchOptions]) -> list[Hypothesis]:
    """Most probable next token at every step, for a batch of sources (batch, m)."""
    begun = start(model, src, options)
    return left_to_right(
        model,
        begun.memory,
        begun.limits,
        _most_probable,
        min_len=begun.min_len,
        prefixes=begun.prefixes,
        device=src.device,
    )
