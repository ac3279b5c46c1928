"""Token-budget batching as in the paper: similar lengths together, padding counted.

A batch of n examples whose longest side (with BOS/EOS) has L tokens costs n * L tokens,
and never exceeds `max_tokens`. Batch order is shuffled each epoch with (seed, epoch);
the position inside an epoch is saved so training resumes mid-epoch. With several ranks,
each takes a disjoint share of every epoch's batches, and all ranks get the same count.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import torch
from torch import Tensor

from .dataset import DatasetError, Split
from .source import SourceAnnotation
from .syntax import with_eos
from .vocab import BOS, EOS, PAD

IntOrArray = TypeVar("IntOrArray", int, np.ndarray)


@dataclass
class Batch:
    src: Tensor  # (batch, m) ids + EOS, right-padded
    tgt_in: Tensor  # (batch, n) BOS + ids
    tgt_out: Tensor  # (batch, n) ids + EOS
    indices: list[int]
    source: dict[str, Tensor] = field(default_factory=dict)  # encode() extras: factors, syntax

    def to(self, device: torch.device, non_blocking: bool = False) -> Batch:
        """The same batch with its tensors on `device` (`non_blocking`: from pinned memory, a copy
        the device makes while the host goes on)."""
        return self.map(lambda t: t.to(device, non_blocking=non_blocking))

    def map(self, change: Callable[[Tensor], Tensor]) -> Batch:
        """The same batch with `change` applied to each of its tensors (pinning, copying)."""
        source = {k: change(v) for k, v in self.source.items()}
        return Batch(change(self.src), change(self.tgt_in), change(self.tgt_out), self.indices, source)

    def tensors(self) -> list[Tensor]:
        return [self.src, self.tgt_in, self.tgt_out, *self.source.values()]


def annotation_tensors(items: list[SourceAnnotation], m: int) -> dict[str, Tensor]:
    """Keyword arguments of `encode` for sources padded to m tokens (EOS included).

    factors: (batch, k, m), EOS tagged EOS and padding PAD. syntax: (batch, m, m) omega with
    EOS unrelated to the words and -1 at padding (padding is masked by the key padding mask;
    soft masks ignore negative entries in their row statistics).
    """
    out: dict[str, Tensor] = {}
    if items and items[0].factors is not None:
        k = items[0].factors.shape[0]
        factors = torch.full((len(items), k, m), PAD, dtype=torch.long)
        for row, item in enumerate(items):
            n = item.factors.shape[1]
            factors[row, :, :n] = torch.from_numpy(np.asarray(item.factors, dtype=np.int64))
            factors[row, :, n] = EOS
        out["factors"] = factors
    if items and items[0].omega is not None:
        syntax = torch.full((len(items), m, m), -1, dtype=torch.long)
        for row, item in enumerate(items):
            full = with_eos(np.asarray(item.omega, dtype=np.int64))
            syntax[row, : full.shape[0], : full.shape[0]] = torch.from_numpy(full)
        out["syntax"] = syntax
    return out


def round_up(lengths: IntOrArray, multiple: int) -> IntOrArray:
    """A length, or each of an array's, rounded up to a multiple of `multiple` (data.pad_to_multiple;
    1: unchanged)."""
    return -(-lengths // multiple) * multiple


def padded_lengths(split: Split, joined: bool = False) -> np.ndarray:
    """Per example, the longer side's length including EOS (source) or BOS/EOS (target); `joined`
    (decoder-only models): the length of source and target read as one sequence, with BOS/EOS."""
    if joined:
        return split.src_lengths + split.tgt_lengths + 1
    return np.maximum(split.src_lengths, split.tgt_lengths) + 1


def make_batches(
    lengths: np.ndarray, max_tokens: int, seed: int | None, drop_long: bool = True
) -> tuple[list[list[int]], int]:
    """`cut_batches`' batches as lists of example numbers (for decoding's few)."""
    batches, dropped = cut_batches(lengths, max_tokens, seed, drop_long)
    return [batch.tolist() for batch in batches], dropped


def cut_batches(
    lengths: np.ndarray, max_tokens: int, seed: int | None, drop_long: bool = True
) -> tuple[list[np.ndarray], int]:
    """Length-sorted batches within the budget; returns (batches, examples too long to fit).
    A batch is a view of one array of example numbers: an epoch of 50M pairs as Python lists
    took 2.5 GB and half a minute to build. Lengths are sorted as the narrowest integers that
    hold them (numpy sorts 8- and 16-bit keys by radix: three times as fast at 50M).

    `seed` breaks ties between equal lengths at random; None keeps input order among them.
    With `drop_long=False` an example longer than the budget gets a batch of its own
    (decoding must not lose a line) instead of being dropped and counted.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    keys = lengths.astype(np.min_scalar_type(int(lengths.max()))) if len(lengths) else lengths
    if seed is None:
        order = np.argsort(keys, kind="stable")
    else:  # by length, ties in random order: np.lexsort((random, lengths)), in two quicker sorts
        shuffled = _stable_argsort(np.random.default_rng(seed).random(len(lengths)))
        order = shuffled[np.argsort(keys[shuffled], kind="stable")]
    ordered = lengths[order]
    fits = int(np.searchsorted(ordered, max_tokens, side="right"))  # sorted: the too long are last
    batches = np.split(order[:fits], _batch_starts(ordered[:fits], max_tokens)[1:]) if fits else []
    if drop_long:
        return batches, len(order) - fits
    return batches + [order[i : i + 1] for i in range(fits, len(order))], 0


def _stable_argsort(values: np.ndarray) -> np.ndarray:
    """np.argsort(values, kind="stable"), from the unstable sort (twice as fast on 50M floats:
    7 s against 15) with runs of equal values put back in index order."""
    order = np.argsort(values)
    ranked = values[order]
    same = ranked[1:] == ranked[:-1]
    if same.any():
        edges = np.flatnonzero(np.diff(np.concatenate([[0], same.astype(np.int8), [0]])))
        for first, last in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
            order[first : last + 1].sort()
    return order


def _batch_starts(ordered: np.ndarray, max_tokens: int) -> np.ndarray:
    """Where each batch starts in ascending lengths that each fit the budget. A batch's longest
    is its last, so it grows while last x count fits: through examples of one length v in full
    batches of max_tokens // v, and from a partial one on into longer lengths while they fit.
    Taken a run of equal lengths at a time, not a batch at a time (427k batches at 50M pairs:
    half a minute)."""
    firsts = np.concatenate([[0], np.flatnonzero(ordered[1:] != ordered[:-1]) + 1])  # of each run
    caps = (max_tokens // np.maximum(ordered[firsts], 1)).tolist()
    bounds = np.append(firsts, len(ordered)).tolist()
    starts: list[np.ndarray] = []
    start, run = 0, 0
    while start < len(ordered):
        while bounds[run + 1] <= start:
            run += 1
        full = (bounds[run + 1] - start) // caps[run]
        starts.append(np.arange(start, start + full * caps[run], caps[run]))
        start += full * caps[run]
        if start == bounds[run + 1]:
            continue
        end, later = bounds[run + 1], run + 1  # the rest of this run fits: on into longer ones
        while later < len(caps) and (reach := min(bounds[later + 1], start + caps[later])) > bounds[later]:
            end, later = reach, later + 1
            if reach < bounds[later]:
                break
        starts.append(np.array([start]))
        start = end
    return np.concatenate(starts)


def equalise(batches: list[np.ndarray], world: int) -> list[np.ndarray]:
    """Split the largest batches until the count divides by `world` (no example lost or copied)."""
    batches = list(batches)
    while len(batches) % world:
        largest = max(range(len(batches)), key=lambda b: len(batches[b]))
        if len(batches[largest]) < 2:
            raise ValueError(f"cannot share {len(batches)} single-example batches evenly over {world} ranks")
        half = len(batches[largest]) // 2
        batches[largest : largest + 1] = [batches[largest][:half], batches[largest][half:]]
    return batches


def padding_efficiency(batches: Sequence[Sequence[int]], lengths: np.ndarray) -> float:
    """Real tokens over padded tokens (1.0 = no padding)."""
    real = sum(int(lengths[b].sum()) for b in batches)
    padded = sum(len(b) * int(lengths[b].max()) for b in batches)
    return real / max(padded, 1)


class BatchSampler:
    """Endless, resumable stream of this rank's batches, epoch after epoch."""

    def __init__(
        self,
        lengths: np.ndarray,
        max_tokens: int,
        seed: int,
        rank: int = 0,
        world: int = 1,
        shuffle: bool = True,
        accumulate: int = 1,
        draw: Callable[[int], np.ndarray] | None = None,
    ) -> None:
        """`draw(epoch)`: the example numbers an epoch trains on (a multilingual dataset's mixing
        of its pairs, data/mixing.py); by default every example once."""
        self.lengths, self.max_tokens, self.seed, self.draw = lengths, max_tokens, seed, draw
        self.rank, self.world, self.shuffle, self.accumulate = rank, world, shuffle, accumulate
        self.epoch, self.position = 0, 0
        self.dropped = 0
        self._built: tuple[int, list[np.ndarray]] | None = None  # the last epoch's batches

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches of `epoch`, in order (built once: the trainer counts their shapes
        before it draws them)."""
        if self._built is None or self._built[0] != epoch:
            self._built = (epoch, self._build(epoch))
        return self._built[1]

    def _build(self, epoch: int) -> list[np.ndarray]:
        chosen = self.draw(epoch) if self.draw is not None else None
        lengths = self.lengths if chosen is None else self.lengths[chosen]
        batches, self.dropped = cut_batches(lengths, self.max_tokens, self.seed + epoch)
        if chosen is not None:
            batches = [chosen[b] for b in batches]
        if not batches:
            longest = int(self.lengths.max()) if len(self.lengths) else 0
            raise DatasetError(
                f"no training example fits a batch of data.max_tokens={self.max_tokens} tokens "
                f"(the shortest padded example has {int(self.lengths.min()) if longest else 0}, the "
                f"longest {longest}); raise data.max_tokens"
            )
        if self.shuffle:
            perm = np.random.default_rng((self.seed, epoch)).permutation(len(batches))
            batches = [batches[i] for i in perm]
        # A multiple of world * accumulate: every optimizer step sees complete groups, and one
        # process accumulating k batches sees exactly what k ranks see in one step.
        return equalise(batches, self.world * self.accumulate)[self.rank :: self.world]

    def __iter__(self) -> Iterator[np.ndarray]:
        while True:
            batches = self.epoch_batches(self.epoch)
            while self.position < len(batches):
                self.position += 1
                yield batches[self.position - 1]
            self.epoch, self.position = self.epoch + 1, 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


@dataclass
class _Ragged:
    """Some examples of a ragged array (flat tokens with offsets): each token's row, position
    in its row and id, and each row's length."""

    rows: np.ndarray
    cols: np.ndarray
    ids: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, ids: np.ndarray, lengths: np.ndarray) -> _Ragged:
        """Rows of the given lengths, one after another in `ids`."""
        rows = np.repeat(np.arange(len(lengths)), lengths)
        return cls(rows, np.arange(len(ids)) - (np.cumsum(lengths) - lengths)[rows], ids, lengths)

    @classmethod
    def gather(cls, tokens: np.ndarray, offsets: np.ndarray, indices: np.ndarray) -> _Ragged:
        """Examples `indices` of flat `tokens` (example i at offsets[i]:offsets[i + 1])."""
        starts, lengths = offsets[indices], offsets[indices + 1] - offsets[indices]
        # each token's place in `tokens`: its place among the chosen ones, shifted by its row's
        shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        return cls.of(tokens[np.arange(len(shift)) + shift], lengths)

    def then(self, other: _Ragged) -> _Ragged:
        """Each row followed by the same row of `other`."""
        return _Ragged(
            np.concatenate([self.rows, other.rows]),
            np.concatenate([self.cols, other.cols + self.lengths[other.rows]]),
            np.concatenate([self.ids, other.ids]),
            self.lengths + other.lengths,
        )

    def padded(self, bos: bool, eos: bool, multiple: int = 1) -> Tensor:
        """(rows, longest + bos + eos) ids, BOS first and/or EOS last in each row, PAD after; the
        width rounded up to a multiple of `multiple`."""
        lead = int(bos)
        width = round_up(int(self.lengths.max()) + lead + int(eos), multiple)
        out = np.full((len(self.lengths), width), PAD, dtype=np.int64)
        out[self.rows, self.cols + lead] = self.ids
        if bos:
            out[:, 0] = BOS
        if eos:
            out[np.arange(len(self.lengths)), self.lengths + lead] = EOS
        return torch.from_numpy(out)


def collate(split: Split, indices: Sequence[int], joined: bool = False, multiple: int = 1) -> Batch:
    """Tensors for training: source + EOS, BOS + target (input), target + EOS (output). `joined`
    (decoder-only models): the target side is source and target as one sequence. Each side's
    width is rounded up to a multiple of `multiple` (data.pad_to_multiple), padding after.

    Built with whole-array numpy indexing: filled a row at a time in Python, a 25k-token batch
    took 60-100 ms, as long as a GPU step; this way ~2 ms (docs/results/gpu.md)."""
    chosen = np.asarray(indices, dtype=np.int64)
    src = _Ragged.gather(split.src_tokens, split.src_offsets, chosen)
    tgt = _Ragged.gather(split.tgt_tokens, split.tgt_offsets, chosen)
    if joined:
        tgt = src.then(tgt)
    src_ids = src.padded(bos=False, eos=True, multiple=multiple)
    source = (
        annotation_tensors([split.annotation(i) for i in chosen.tolist()], src_ids.shape[1])
        if split.annotated
        else {}
    )
    tgt_in, tgt_out = tgt.padded(bos=True, eos=False, multiple=multiple), tgt.padded(False, True, multiple)
    return Batch(src_ids, tgt_in, tgt_out, chosen.tolist(), source)


def batch_shapes(
    split: Split, batches: Sequence[Sequence[int]], joined: bool, multiple: int
) -> list[tuple[int, int, int]]:
    """(rows, source width, target width) of `collate`'s batch for each batch, from the lengths
    alone: the batches' own rows' (from the offsets), all batches at once (an epoch's shapes are
    counted as it starts: 427k batches at 50M pairs)."""
    sizes = np.fromiter(map(len, batches), dtype=np.int64, count=len(batches))
    if not len(sizes):
        return []
    chosen = np.concatenate([np.asarray(b, dtype=np.int64) for b in batches])
    src = split.src_offsets[chosen + 1] - split.src_offsets[chosen]
    tgt = split.tgt_offsets[chosen + 1] - split.tgt_offsets[chosen]
    if joined:
        tgt = src + tgt
    starts = np.cumsum(sizes) - sizes
    widths = [round_up(np.maximum.reduceat(side, starts) + 1, multiple) for side in (src, tgt)]
    return list(zip(sizes.tolist(), widths[0].tolist(), widths[1].tolist(), strict=True))


def _ragged_lines(lines: list[list[int]]) -> _Ragged:
    ids = np.fromiter(itertools.chain.from_iterable(lines), dtype=np.int64)
    return _Ragged.of(ids, np.array([len(line) for line in lines], dtype=np.int64))


def encode_sources(lines: list[list[int]]) -> Tensor:
    """Source tensors for decoding: ids + EOS, right-padded."""
    return _ragged_lines(lines).padded(bos=False, eos=True)


def encode_targets(lines: list[list[int]]) -> tuple[Tensor, Tensor]:
    """Target tensors for forced decoding: BOS + ids (input) and ids + EOS (output), right-padded."""
    ragged = _ragged_lines(lines)
    return ragged.padded(bos=True, eos=False), ragged.padded(bos=False, eos=True)
