"""Decoding with fixed-shape caches (decode/static.py) gives what the growing cache gives: the
same tokens and scores for greedy search, beam search (n-best, length penalty, finished
sentences leaving, forced prefixes, minimum length) and sampling, through `decode_all` as the
commands call it. On the CPU the same fixed-shape step runs without a CUDA graph."""

import math

import pytest
from tiny_models import batch, tiny_model

from transduce.config import DecodeConfig
from transduce.decode.beam import beam_search
from transduce.decode.options import OptionsError, check_for_model
from transduce.decode.search import greedy
from transduce.decode.static import StaticDecoder, static_unsupported
from transduce.decode.torch_engine import decode_all

VOCAB = 9
SOURCES = [[4, 5, 6], [7], [8, 4, 4, 5, 6, 7, 8], [5, 5], [6, 7, 8, 4]]  # lengths 1..7: rows finish apart


def same(ours, theirs):
    """Hypotheses per source: equal tokens, scores and log-probabilities to float tolerance."""
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        for x, y in zip(a, b, strict=True):
            assert math.isclose(x.score, y.score, rel_tol=1e-5, abs_tol=1e-5)
            assert math.isclose(x.log_prob, y.log_prob, rel_tol=1e-5, abs_tol=1e-5)


@pytest.fixture(params=["post", "pre"])
def model(request):
    return tiny_model(VOCAB, seed=3, overrides=[f"model.norm={request.param}"])


def test_greedy_and_beam_equal_the_growing_cache(model):
    src = batch(SOURCES)
    longest = max(len(s) for s in SOURCES) + 5
    options = {"max_len_a": 1.0, "max_len_b": 5, "min_len": 2}
    expected = greedy(model, src, **options)
    got = greedy(StaticDecoder(model, capacity=longest), src, **options)
    same([[h] for h in got], [[h] for h in expected])
    assert len({len(h.tokens) for h in expected}) > 1  # rows left the batch at different steps
    for alpha, nbest in ((0.0, 1), (0.6, 3)):
        expected = beam_search(model, src, beam=4, alpha=alpha, nbest=nbest, **options)
        got = beam_search(
            StaticDecoder(model, capacity=longest), src, beam=4, alpha=alpha, nbest=nbest, **options
        )
        same(got, expected)


def test_decode_all_with_static_cache_equals_without(model):
    """The option as `translate --static-cache` passes it: beam, greedy, sampling and forced
    prefixes, several batches (a small token budget), learned positions too."""
    prefixes = [[5], [], [4, 4], [], [7, 8]]
    for extra in ({}, {"sample": True, "seed": 7, "num_samples": 3, "top_k": 4}):
        cfg = DecodeConfig(beam=3, nbest=2, max_tokens=12, **extra) if not extra else DecodeConfig(**extra)
        static = cfg.model_copy(update={"static_cache": True})
        for search in ("beam", "greedy") if not extra else ("sample",):
            searched, searched_static = (c.model_copy(update={"search": search}) for c in (cfg, static))
            expected = decode_all(model, SOURCES, searched, prefixes=prefixes)
            got = decode_all(model, SOURCES, searched_static, prefixes=prefixes)
            same(got, expected)
            assert all(h.tokens[: len(p)] == p for hs, p in zip(got, prefixes, strict=True) for h in hs)


def test_learned_positions_and_the_end_of_their_table():
    model = tiny_model(VOCAB, seed=4, overrides=["model.positions=learned", "model.max_positions=12"])
    cfg = DecodeConfig(beam=2, max_len_b=4)
    same(
        decode_all(model, SOURCES, cfg.model_copy(update={"static_cache": True})),
        decode_all(model, SOURCES, cfg),
    )
    longer = DecodeConfig(beam=2, max_len_b=30, min_len=30)  # outputs must run past position 12
    for options in (longer, longer.model_copy(update={"static_cache": True})):
        with pytest.raises(ValueError, match="exceeds"):
            decode_all(model, [[4, 5]], options)


def test_models_it_cannot_hold_are_refused_by_name():
    assert static_unsupported(tiny_model(VOCAB)) is None
    assert static_unsupported(tiny_model(VOCAB, overrides=["model.local_window=2"])) is None  # encoder only
    cases = {
        "Universal Transformer": ["model.arch=universal"],
        "convolution": ["model.transition=conv"],
    }
    for reason, overrides in cases.items():
        model = tiny_model(VOCAB, overrides=overrides)
        assert reason in (static_unsupported(model) or "")
        with pytest.raises(OptionsError, match="static_cache"):
            check_for_model(model, DecodeConfig(static_cache=True))
    with pytest.raises(ValueError, match="shortlist"):
        from transduce.decode.shortlist import build_shortlist

        listed = build_shortlist([([4, 5], [5, 4])], VOCAB, VOCAB, per_token=2, frequent=1)
        decode_all(tiny_model(VOCAB), SOURCES, DecodeConfig(static_cache=True), shortlist=listed)


def test_one_step_has_the_same_shapes_every_time(model):
    """The point of the exercise: whatever search does (rows leave, beams reorder), every call of
    the decoder stack sees inputs of one shape, and its buffers are allocated once."""
    shapes = set()
    decoder = model.decoder
    hook = decoder.register_forward_pre_hook(lambda _, args: shapes.add(tuple(args[0].shape)))
    try:
        beam_search(StaticDecoder(model, capacity=12), batch(SOURCES), beam=3, max_len_b=5)
    finally:
        hook.remove()
    assert len(shapes) == 1, shapes


def test_translate_with_static_cache_prints_the_same_and_refuses_what_it_cannot_hold(tmp_path):
    """`translate --static-cache` against `translate` on a saved checkpoint, beam and greedy; a
    Universal Transformer is one error line for translate and for serve (before it listens)."""
    from tiny_models import DIGITS, saved_checkpoint
    from typer.testing import CliRunner

    from transduce.cli import app

    saved_checkpoint(tmp_path / "plain", DIGITS, seed=5)
    saved_checkpoint(tmp_path / "ut", DIGITS, seed=5, overrides=["model.arch=universal"])
    (tmp_path / "in.txt").write_text("1 2 3\n4 4\n\n9 8 7 6 5 4\n")
    for extra in ([], ["--greedy"], ["--nbest", "2"]):
        args = ["translate", str(tmp_path / "plain"), "-i", str(tmp_path / "in.txt"), *extra]
        plain = CliRunner().invoke(app, args)
        static = CliRunner().invoke(app, [*args, "--static-cache"])
        assert plain.exit_code == static.exit_code == 0, static.output
        assert static.stdout == plain.stdout and plain.stdout.count("\n") >= 4
    for command in (["translate", "-i", str(tmp_path / "in.txt")], ["serve", "--port", "1"]):
        result = CliRunner().invoke(app, [command[0], str(tmp_path / "ut"), *command[1:], "--static-cache"])
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [
            "error: --static-cache needs a plain Transformer: its decoder is a Universal Transformer stack"
        ]
