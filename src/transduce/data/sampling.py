"""A uniform sample of a stream too long to hold (the pairs a vocabulary is learned from).

Bottom-k sampling: every item gets a pseudo-random key computed from its line number alone, and
the sample is the k items of smallest key. Keys need no shared random state, so chunks can be
keyed in any process and in any order and the sample is the same; a stream of at most k items
is all sampled, in its own order.
"""

from __future__ import annotations

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
    """The `size` items of smallest (key, number) among those offered, each with its payload
    (a tuple of values per item). Offers between compactions can take up to half of `size`
    again, the price of not sorting at every chunk."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.keys = np.zeros(0, dtype=np.uint64)
        self.numbers = np.zeros(0, dtype=np.int64)
        self.payloads: list[tuple] = []
        self.threshold = ALL  # items with a larger key can no longer be sampled

    def offer(self, keys: np.ndarray, numbers: np.ndarray, payloads: list[tuple]) -> None:
        """Items keyed `keys`; those above `threshold` may be left out by the caller beforehand."""
        self.keys = np.concatenate([self.keys, keys])
        self.numbers = np.concatenate([self.numbers, np.asarray(numbers, dtype=np.int64)])
        self.payloads += payloads
        if len(self.payloads) > self.size + self.size // 2:
            self._compact()

    def _compact(self) -> None:
        order = np.lexsort((self.numbers, self.keys))[: self.size]
        self.keys, self.numbers = self.keys[order], self.numbers[order]
        self.payloads = [self.payloads[i] for i in order]
        if len(order) == self.size:
            self.threshold = self.keys[-1]

    def take(self) -> list[tuple]:
        """The sampled payloads in the order of their line numbers; the sampler is left empty,
        so that the caller holds the only references to them."""
        self._compact()
        payloads = [self.payloads[i] for i in np.argsort(self.numbers, kind="stable")]
        self.payloads, self.keys, self.numbers = [], self.keys[:0], self.numbers[:0]
        return payloads
