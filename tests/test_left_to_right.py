"""Greedy search and sampling's shared loop (`left_to_right`), its outputs kept on the device,
against a per-sequence loop (transduce's earlier one, kept here as the reference): the same tokens
and log-probabilities for sequences that end at different steps, by EOS or at their limits, with
forced prefixes and a minimum length, greedy and drawn."""

import pytest
import torch
from tiny_models import batch, decoder_rows, steps_where_rows_change, tiny_model

from transduce.data.vocab import BOS, EOS
from transduce.decode.sampling import draw, sampling_probs
from transduce.decode.search import (
    Hypothesis,
    _check_prefix_vocab,
    _forced,
    _most_probable,
    _step_log_probs,
    left_to_right,
    start,
)

pytestmark = pytest.mark.usefixtures("single_thread")


@torch.no_grad()
def reference_left_to_right(model, memory, limits, choose, min_len, prefixes):
    """Each sequence's token and log-probability read back and appended in Python, step by step."""
    cache = model.new_cache()
    active = torch.arange(len(limits))
    tokens = torch.full((len(limits), 1), BOS, dtype=torch.long)
    outputs = [[] for _ in limits]
    log_probs = [0.0] * len(limits)
    for step in range(max(limits)):
        rows = active.tolist()
        forced = _forced(prefixes, rows, step, tokens.device)
        logp = _step_log_probs(model, tokens, memory, cache, step=step, min_len=min_len, forced=forced)
        if step == 0:
            _check_prefix_vocab(prefixes, logp.shape[-1])
        next_tokens = choose(logp, rows)
        chosen = logp.gather(1, next_tokens[:, None])[:, 0]
        keep = []
        for row, (sent, tok, lp) in enumerate(zip(rows, next_tokens.tolist(), chosen.tolist(), strict=True)):
            log_probs[sent] += lp
            if tok != EOS:
                outputs[sent].append(tok)
            if tok != EOS and step + 1 < limits[sent]:
                keep.append(row)
        if not keep:
            break
        if len(keep) < len(active):
            index = torch.tensor(keep)
            active, memory = active[index], memory.select(index)
            cache.reorder(index, index)
            next_tokens = next_tokens[index]
        tokens = next_tokens[:, None]
    return [Hypothesis(o, lp, lp) for o, lp in zip(outputs, log_probs, strict=True)]


def sampler(seed, sequences):
    """A choose function drawing each sequence's token from a generator of its own."""
    generators = [torch.Generator().manual_seed(seed + i) for i in range(sequences)]

    def choose(logp, rows):
        uniforms = torch.cat([torch.rand(1, generator=generators[r], dtype=torch.float64) for r in rows])
        return draw(sampling_probs(logp, 0.8), uniforms)

    return choose


ROWS = [[4, 7, 9, 5], [8, 6], [11, 10, 4, 4, 9, 6, 5], [5], [9, 9, 9]]


@pytest.mark.parametrize(
    "options",
    [
        {"max_len_a": 1.0, "max_len_b": 3},
        {"max_len_a": 0.0, "max_len_b": 6, "min_len": 3},
        {"max_len_a": 0.0, "max_len_b": 5, "prefixes": [[9, 9], [], [5], [4, 4, 4], []]},
        {"max_len_a": 0.0, "max_len_b": 1},
    ],
)
@pytest.mark.parametrize("read_every", [1, 3])
def test_left_to_right_equals_the_per_sequence_loop(options, read_every):
    """Read back every step (the CPU's default) or every 3 (ended sequences decoded on meanwhile:
    the same tokens; log-probabilities within float32 rounding, as the batch holds other rows)."""
    for seed in range(4):
        model = tiny_model(vocab=12, seed=seed, sharpen=2.0 + seed)
        begun = start(model, batch(ROWS), options)
        for fresh_choose in (lambda: _most_probable, lambda s=seed: sampler(s, len(ROWS))):
            got = left_to_right(
                model,
                begun.memory,
                begun.limits,
                fresh_choose(),
                min_len=begun.min_len,
                prefixes=begun.prefixes,
                read_every=read_every,
            )
            args = (begun.limits, fresh_choose(), begun.min_len, begun.prefixes)
            want = reference_left_to_right(model, begun.memory, *args)
            assert [h.tokens for h in got] == [h.tokens for h in want], (seed, options)
            for a, b in zip(got, want, strict=True):  # other rows in the batch round differently
                assert a.log_prob == pytest.approx(b.log_prob, abs=1e-9 if read_every == 1 else 1e-6)
                assert a.score == a.log_prob


def test_sequences_leave_the_batch_as_they_end(monkeypatch):
    """The comparison above covers a shrinking batch only if sequences end at different steps."""
    model = tiny_model(vocab=12, seed=1)
    begun = start(model, batch(ROWS), {"max_len_a": 1.0, "max_len_b": 3})
    rows_per_step = decoder_rows(model, monkeypatch)
    left_to_right(model, begun.memory, begun.limits, _most_probable, min_len=0, prefixes=begun.prefixes)
    assert rows_per_step[0] == len(ROWS) and len(set(rows_per_step)) > 2
    assert rows_per_step == sorted(rows_per_step, reverse=True)


def test_ended_sequences_leave_the_batch_only_when_read_back(monkeypatch):
    model = tiny_model(vocab=12, seed=1)
    begun = start(model, batch(ROWS), {"max_len_a": 1.0, "max_len_b": 3})
    rows_per_step = decoder_rows(model, monkeypatch)
    left_to_right(
        model, begun.memory, begun.limits, _most_probable, min_len=0, prefixes=begun.prefixes, read_every=3
    )
    changed = steps_where_rows_change(rows_per_step)
    assert changed and all(step % 3 == 0 for step in changed)
