"""The growing self-attention cache against plain concatenation: what it hands out, when it grows,
how it reorders, and the layout that keeps a row's filled positions in one block."""

from __future__ import annotations

import pytest
import torch

from transduce.model.cache import KVCache


def _steps(
    count: int, rows: int = 3, heads: int = 2, d_head: int = 4
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(count)
    return [
        (
            torch.randn(rows, heads, 1, d_head, generator=gen),
            torch.randn(rows, heads, 1, d_head, generator=gen),
        )
        for _ in range(count)
    ]


@pytest.mark.parametrize("grad", [False, True])
def test_the_cache_equals_concatenation_through_growth_and_reordering(grad):
    cache, ks, vs = KVCache(capacity=4), [], []
    with torch.set_grad_enabled(grad):
        for step, (k, v) in enumerate(_steps(11)):
            got_k, got_v = cache.update(k, v)
            ks.append(k)
            vs.append(v)
            assert torch.equal(got_k, torch.cat(ks, 2)) and torch.equal(got_v, torch.cat(vs, 2))
            if step in (2, 6):  # beam reordering: row i continues row index[i]
                index = torch.tensor([2, 0, 0])
                cache.reorder(index)
                ks = [t.index_select(0, index) for t in ks]
                vs = [t.index_select(0, index) for t in vs]


def test_the_cache_grows_by_doubling_only_when_full():
    cache, capacities = KVCache(capacity=4), []
    for k, v in _steps(9):
        cache.update(k, v)
        capacities.append(cache.k.shape[1])
    assert capacities == [4, 4, 4, 4, 8, 8, 8, 8, 16]


def test_a_rows_filled_positions_are_one_block():
    """What beam search's reordering copies per row, so that CUDA's vectorised gather takes it."""
    cache = KVCache(capacity=8)
    for k, v in _steps(3):
        cache.update(k, v)
    filled = cache.k[:, : cache.length]
    assert all(filled[row].is_contiguous() for row in range(filled.shape[0]))
