"""A uniform sample of a stream too long to hold (the pairs a vocabulary is learned from).

Bottom-k sampling: every item gets a pseudo-random key computed from its line number alone, and
the sample is the k items of smallest key. Keys need no shared random state, so chunks can be
keyed in any process and in any order and the sample is the same; a stream of at most k items
is all sampled, in its own order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

ALL = np.uint64(2**64 - 1)  # a threshold every key passes
_GAMMA, _MIX1, _MIX2 = (
    np.uint64(0x9E3779B97F4A7C15),
    np.uint64(0xBF58476D1CE4E5B9),
    np.uint64(0x94D049BB133111EB),
)


def sample_keys(numbers: np.ndarray, seed: int) -> np.ndarray:
    """A 64-bit key per line number: SplitMix64's output for the seed's stream at that position."""
    with np.errstate(over="ignore"):
        z = (np.asarray(numbers, dtype=np.uint64) + np.uint64(1)) * _GAMMA + np.uint64(seed) * _MIX2
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        return z ^ (z >> np.uint64(31))


class BottomK:
    """The `size` items of smallest (key, number) among those offered, each with a payload of
    bytes. Payloads live in a few large byte strings (one per offer, rewritten to its survivors
    at each compaction), not one Python object each: a million sampled pairs as objects took
    three times their text, and left the heap fragmented in proportion to the stream. Offers
    between compactions can take up to half of `size` again, the price of not selecting at every
    offer; a blob is rewritten only once less than half of it survives (copying every blob at
    every compaction was a fifth of the scan's main process), so it holds at most twice its
    survivors' bytes until `take` rewrites them all."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.threshold = ALL  # items with a larger key can no longer be sampled
        self._offers: list[_Offer] = []
        self._count = 0

    def offer(
        self, keys: np.ndarray, numbers: np.ndarray, blob: bytes, starts: np.ndarray, ends: np.ndarray
    ) -> None:
        """Items keyed `keys`, item i's payload `blob[starts[i]:ends[i]]` (in order, apart); those
        above `threshold` may be left out by the caller beforehand."""
        keys, numbers = np.asarray(keys, dtype=np.uint64), np.asarray(numbers, dtype=np.int64)
        starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
        self._offers.append(_Offer(keys, numbers, blob, starts, ends))
        self._count += len(ends)
        if self._count > self.size + self.size // 2:
            self._compact(tight=False)

    def _compact(self, tight: bool) -> None:
        """Keep the `size` smallest; an offer's blob is rewritten to its surviving payloads when
        `tight` or when less than half of it survives."""
        keys = _joined(self._offers, "keys", np.uint64)
        kept = smallest(keys, _joined(self._offers, "numbers", np.int64), self.size)
        offers, first = [], 0
        for offer in self._offers:
            last = first + len(offer.keys)
            if kept[first:last].any():
                offers.append(offer.survivors(kept[first:last], tight))
            first = last
        self._offers, self._count = offers, int(kept.sum())
        if self._count == self.size:
            self.threshold = keys[kept].max()

    def take(self) -> Sampled:
        """The sampled payloads, in the order of their line numbers; the sampler is left empty."""
        self._compact(tight=True)
        offers, self._offers, self._count = self._offers, [], 0
        return Sampled(offers)


def smallest(keys: np.ndarray, numbers: np.ndarray, k: int) -> np.ndarray:
    """A mask of the k items of smallest (key, number): a partition finds the k-th smallest key
    (a full sort of a million and a half keys at every compaction was most of its time), and
    items tied at it are taken in the order of their numbers."""
    if len(keys) <= k:
        return np.ones(len(keys), dtype=bool)
    cut = keys[np.argpartition(keys, k - 1)[k - 1]]
    kept = keys < cut
    tied = np.flatnonzero(keys == cut)
    kept[tied[np.argsort(numbers[tied], kind="stable")[: k - int(kept.sum())]]] = True
    return kept


@dataclass
class _Offer:
    """One offer's surviving items, item i's payload `blob[starts[i]:ends[i]]`."""

    keys: np.ndarray
    numbers: np.ndarray
    blob: bytes
    starts: np.ndarray
    ends: np.ndarray

    def survivors(self, kept: np.ndarray, tight: bool) -> _Offer:
        """The offer with only the `kept` items (at least one); their payloads are copied into a
        blob of their own (by a byte mask: payloads lie in order, apart) when `tight` or when
        they fill less than half of it, and left where they are otherwise."""
        starts, ends = self.starts[kept], self.ends[kept]
        lengths = ends - starts
        size = int(lengths.sum())
        if size == len(self.blob) or (not tight and 2 * size >= len(self.blob)):
            return _Offer(self.keys[kept], self.numbers[kept], self.blob, starts, ends)
        runs = np.empty(2 * len(starts) + 1, dtype=np.int64)  # gap, payload, gap, ..., the tail
        runs[0:-1:2] = starts - np.concatenate([[0], ends[:-1]])
        runs[1::2] = lengths
        runs[-1] = len(self.blob) - ends[-1]
        mask = np.repeat(np.arange(len(runs)) % 2 == 1, runs)
        blob = np.frombuffer(self.blob, dtype=np.uint8)[mask].tobytes()
        new_ends = np.cumsum(lengths)
        return _Offer(self.keys[kept], self.numbers[kept], blob, new_ends - lengths, new_ends)


def _joined(offers: list[_Offer], field: str, dtype: type) -> np.ndarray:
    """One of the offers' per-item arrays, all offers' end to end."""
    return np.concatenate([getattr(o, field) for o in offers] or [np.zeros(0, dtype=dtype)])


class Sampled:
    """A sample's payloads as bytes in the order of their line numbers, to be read once or more."""

    def __init__(self, offers: list[_Offer]) -> None:
        self._blobs = [o.blob for o in offers]
        order = np.argsort(_joined(offers, "numbers", np.int64), kind="stable")
        self._which = np.repeat(np.arange(len(offers)), [len(o.numbers) for o in offers])[order]
        self._starts = _joined(offers, "starts", np.int64)[order]
        self._ends = _joined(offers, "ends", np.int64)[order]

    def __len__(self) -> int:
        return len(self._which)

    def __iter__(self) -> Iterator[bytes]:
        items = zip(self._which.tolist(), self._starts.tolist(), self._ends.tolist(), strict=True)
        for which, start, end in items:
            yield self._blobs[which][start:end]
