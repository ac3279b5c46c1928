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
    between compactions can take up to half of `size` again, the price of not sorting at every
    offer."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.threshold = ALL  # items with a larger key can no longer be sampled
        self._offers: list[_Offer] = []
        self._count = 0

    def offer(self, keys: np.ndarray, numbers: np.ndarray, blob: bytes, ends: np.ndarray) -> None:
        """Items keyed `keys`, item i's payload `blob[ends[i-1]:ends[i]]` (from 0 for the first);
        those above `threshold` may be left out by the caller beforehand."""
        ends = np.asarray(ends, dtype=np.int64)
        self._offers.append(
            _Offer(np.asarray(keys, dtype=np.uint64), np.asarray(numbers, dtype=np.int64), blob, ends)
        )
        self._count += len(ends)
        if self._count > self.size + self.size // 2:
            self._compact()

    def _compact(self) -> None:
        """Keep the `size` smallest, each offer's blob rewritten to its surviving payloads."""
        keys = _joined(self._offers, "keys", np.uint64)
        numbers = _joined(self._offers, "numbers", np.int64)
        kept = np.zeros(len(keys), dtype=bool)
        kept[np.lexsort((numbers, keys))[: self.size]] = True
        offers, first = [], 0
        for offer in self._offers:
            last = first + len(offer.keys)
            if kept[first:last].any():
                offers.append(offer.survivors(kept[first:last]))
            first = last
        self._offers, self._count = offers, int(kept.sum())
        if self._count == self.size:
            self.threshold = keys[kept].max()

    def take(self) -> Sampled:
        """The sampled payloads, in the order of their line numbers; the sampler is left empty."""
        self._compact()
        offers, self._offers, self._count = self._offers, [], 0
        return Sampled(offers)


@dataclass
class _Offer:
    """One offer's surviving items, their payloads end to end in `blob`, item i's ending at
    `ends[i]` (and starting where item i - 1's ends)."""

    keys: np.ndarray
    numbers: np.ndarray
    blob: bytes
    ends: np.ndarray

    @property
    def starts(self) -> np.ndarray:
        return self.ends - self.lengths

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.ends, prepend=0)

    def survivors(self, kept: np.ndarray) -> _Offer:
        """The offer with only the `kept` items, their payloads copied into a blob of their own
        (by a byte mask: each byte belongs to one item)."""
        blob = np.frombuffer(self.blob, dtype=np.uint8)[np.repeat(kept, self.lengths)].tobytes()
        return _Offer(self.keys[kept], self.numbers[kept], blob, np.cumsum(self.lengths[kept]))


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
