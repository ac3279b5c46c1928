"""Beam search's tensor bookkeeping against a per-sentence loop (transduce's earlier beam search,
kept here as the reference): the same hypotheses, scores and log-probabilities, for batches of
sentences that stop at different steps, n-best lists, length penalties, minimum lengths and
forced prefixes."""

import math

import pytest
import torch
from tiny_models import batch, decoder_rows, steps_where_rows_change, tiny_model

from transduce.data.vocab import BOS, EOS
from transduce.decode.beam import beam_search
from transduce.decode.search import (
    Hypothesis,
    _check_prefix_vocab,
    _forced,
    _step_log_probs,
    length_penalty,
    read_back_every,
    start,
)

pytestmark = pytest.mark.usefixtures("single_thread")


@torch.no_grad()
def reference_beam_search(model, src, beam, alpha, nbest, **options):
    """One sentence at a time in Python: its best 2k candidates, the first k that end finish, the
    first k others go on; done at its limit, with nothing live, or when no live beam can beat its
    n-th finished hypothesis."""
    batch_size, k = src.shape[0], beam
    begun = start(model, src, options)
    limits, prefixes, memory = begun.limits, begun.prefixes, begun.memory
    cache = model.new_cache()
    scores = torch.full((batch_size, k), -math.inf)
    scores[:, 0] = 0.0
    history = torch.full((batch_size * k, 1), BOS, dtype=torch.long)
    finished = [[] for _ in range(batch_size)]
    active = list(range(batch_size))
    for step in range(max(limits)):
        forced = _forced(prefixes, [s for s in active for _ in range(k)], step, src.device)
        logp = _step_log_probs(
            model, history[:, -1:], memory, cache, step=step, min_len=begun.min_len, forced=forced
        )
        vocab = logp.shape[-1]
        if step == 0:
            _check_prefix_vocab(prefixes, vocab)
        candidates = (scores.view(-1, 1) + logp).view(len(active), k * vocab)
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=-1)
        rows, tokens, new_scores, still = [], [], [], []
        for pos, sent in enumerate(active):
            at_limit = step + 1 >= limits[sent]
            chosen = []
            top = zip(top_scores[pos].tolist(), top_index[pos].tolist(), strict=True)
            for rank, (s, i) in enumerate(top):
                b, tok = divmod(i, vocab)
                if s == -math.inf:
                    break
                if tok == EOS or at_limit:
                    if rank < k:
                        prefix = history[pos * k + b, 1:].tolist() + ([] if tok == EOS else [tok])
                        finished[sent].append(Hypothesis(prefix, s / length_penalty(step + 1, alpha), s))
                elif len(chosen) < k:
                    chosen.append((b, tok, s))
            kept = sorted((h.score for h in finished[sent]), reverse=True)
            beaten = bool(chosen) and len(kept) >= nbest
            beaten = beaten and chosen[0][2] / length_penalty(limits[sent], alpha) <= kept[nbest - 1]
            if at_limit or not chosen or beaten:
                continue
            chosen += [(chosen[0][0], chosen[0][1], -math.inf)] * (k - len(chosen))
            still.append(sent)
            for b, tok, s in chosen:
                rows.append(pos * k + b)
                tokens.append(tok)
                new_scores.append(s)
        if not still:
            break
        index = torch.tensor(rows)
        if len(still) == len(active):
            cache.reorder(index)
        else:
            sources = torch.tensor([pos for pos, sent in enumerate(active) if sent in set(still)])
            memory = memory.select(sources)
            cache.reorder(index, sources)
        history = torch.cat([history.index_select(0, index), torch.tensor(tokens)[:, None]], 1)
        scores = torch.tensor(new_scores).view(len(still), k)
        active = still
    return [sorted(f, key=lambda h: -h.score)[:nbest] for f in finished]


ROWS = [[4, 7, 9, 5], [8, 6], [11, 10, 4, 4, 9, 6, 5], [5], [9, 9, 9]]


@pytest.mark.parametrize(
    "beam, nbest, alpha, options",
    [
        (4, 1, 0.6, {}),
        (1, 1, 0.0, {}),
        (5, 3, 1.0, {"max_len_a": 1.5, "max_len_b": 3}),
        (3, 3, 0.6, {"min_len": 4}),
        (4, 2, 0.0, {"max_len_a": 0.0, "max_len_b": 6, "prefixes": [[9, 9], [], [5], [4, 4, 4], []]}),
        (2, 1, 0.6, {"max_len_a": 0.0, "max_len_b": 1}),
    ],
)
@pytest.mark.parametrize("read_every", [1, 3])
def test_beam_search_equals_the_per_sentence_loop(beam, nbest, alpha, options, read_every):
    """Read back every step (the CPU's default) or every 3 (done sentences decoded on meanwhile)."""
    for seed in range(4):
        model = tiny_model(vocab=12, seed=seed, sharpen=2.0 + seed)
        src = batch(ROWS)
        got = beam_search(model, src, beam=beam, alpha=alpha, nbest=nbest, read_every=read_every, **options)
        want = reference_beam_search(model, src, beam, alpha, nbest, **options)
        assert [[h.tokens for h in n] for n in got] == [[h.tokens for h in n] for n in want], seed
        for mine, theirs in zip(got, want, strict=True):
            for a, b in zip(mine, theirs, strict=True):
                # other rows in the batch round differently: a few float32 ulps of the score's size
                close = {"abs": 1e-9} if read_every == 1 else {"rel": 8 * torch.finfo(torch.float32).eps}
                assert a.score == pytest.approx(b.score, **close)
                assert a.log_prob == pytest.approx(b.log_prob, **close)


def test_sentences_leave_the_batch_as_they_finish(monkeypatch):
    """The comparison above covers shrinking batches only if sentences finish at different steps."""
    model = tiny_model(vocab=12, seed=2)
    rows_per_step = decoder_rows(model, monkeypatch)
    beam_search(model, batch(ROWS), beam=3, alpha=0.6, max_len_b=8)
    assert rows_per_step[0] == 3 * len(ROWS)
    assert len(set(rows_per_step)) > 2  # at least two sentences left before the last step
    assert rows_per_step == sorted(rows_per_step, reverse=True)


def test_done_sentences_leave_the_batch_only_when_read_back(monkeypatch):
    """Every `read_every` steps: the batch keeps its rows in between, and still shrinks."""
    model = tiny_model(vocab=12, seed=2)
    rows_per_step = decoder_rows(model, monkeypatch)
    beam_search(model, batch(ROWS), beam=3, alpha=0.6, max_len_b=8, read_every=3)
    changed = steps_where_rows_change(rows_per_step)
    assert changed and all(step % 3 == 0 for step in changed)


def test_the_host_reads_back_every_step_on_the_cpu_and_every_few_on_a_gpu():
    assert read_back_every(torch.device("cpu")) == 1
    assert read_back_every(torch.device("cuda")) > 1
