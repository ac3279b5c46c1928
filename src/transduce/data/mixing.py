"""Which examples an epoch trains on when several language pairs share a dataset: pair i gets a
share of the epoch in proportion to n_i^(1/T) (n_i its examples, T `data.pair_temperature`). T = 1 is
every example once; a larger T evens the pairs out, repeating a small pair's examples and taking
a random part of a large pair's (temperature-based sampling, as in Arivazhagan et al. 2019,
"Massively Multilingual Neural Machine Translation in the Wild"). The draw is the same for the
same seed and epoch, so a resumed run trains on what it would have."""

from __future__ import annotations

import numpy as np


class PairMixing:
    """Each epoch's example numbers, drawn per language pair."""

    def __init__(self, pair_ids: np.ndarray, temperature: float, seed: int) -> None:
        self.pair_ids = np.asarray(pair_ids)
        self.temperature, self.seed = temperature, seed
        self.members = [np.flatnonzero(self.pair_ids == k) for k in range(int(self.pair_ids.max()) + 1)]

    def quotas(self) -> np.ndarray:
        """Examples each pair gets in an epoch: the total split as n_i^(1/T), at least one each."""
        sizes = np.array([len(m) for m in self.members], dtype=np.float64)
        weights = np.where(sizes > 0, sizes ** (1.0 / self.temperature), 0.0)
        quota = np.rint(sizes.sum() * weights / weights.sum()).astype(np.int64)
        return np.where(sizes > 0, np.maximum(quota, 1), 0)

    def epoch(self, epoch: int) -> np.ndarray:
        """The example numbers of `epoch` (repeats where a pair's quota passes its size)."""
        if self.temperature == 1.0:
            return np.arange(len(self.pair_ids))
        rng = np.random.default_rng((self.seed, epoch))
        drawn = []
        for members, quota in zip(self.members, self.quotas().tolist(), strict=True):
            whole, rest = divmod(quota, len(members)) if len(members) else (0, 0)
            drawn += [members] * whole + [rng.choice(members, rest, replace=False)]
        return np.concatenate(drawn)


def check_temperature(temperature: float, pairs: int) -> None:
    """ValueError for a data.pair_temperature other than 1 on a dataset of fewer than two pairs,
    where it would draw nothing differently: an option that would be ignored."""
    if temperature != 1.0 and pairs < 2:
        raise ValueError(
            f"data.pair_temperature={temperature:g} draws the pairs of a multilingual dataset (prepare "
            "--pair ...); this dataset has one pair: leave it out"
        )
