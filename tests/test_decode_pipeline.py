"""The decoding toolbox through the pipeline: sampling options, ensembles of loaded checkpoints,
forced prefixes and scores of text lines, with checkpoints of tiny random models."""

import math
from itertools import chain

import pytest
from tiny_models import DIGITS, saved_checkpoint

from transduce.config import ConfigError, DecodeConfig
from transduce.decode.options import OptionsError, decode_options
from transduce.decode.pipeline import score_lines, translate_lines
from transduce.decode.scoring import score_all
from transduce.decode.torch_engine import decode_all

pytestmark = pytest.mark.usefixtures("single_thread")

LINES = ["1 2 3", "", "4 5", "6 7 8 9 1", "2"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline")
    return {
        "a": saved_checkpoint(tmp / "a", DIGITS, 1),
        "a-again": saved_checkpoint(tmp / "a-again", DIGITS, 1),
        "b": saved_checkpoint(tmp / "b", DIGITS, 2),
        "letters": saved_checkpoint(tmp / "letters", list("abcdefghij"), 3),
        "more": saved_checkpoint(tmp / "more", [*DIGITS, "x"], 4),
    }


def texts(outputs):
    return [[o.text for o in row] for row in outputs]


def test_ensemble_of_a_checkpoint_with_itself_translates_like_it(models):
    opts = decode_options(models["a"].config.decode, nbest=2)
    alone, _ = translate_lines(models["a"], LINES, opts)
    twice, _ = translate_lines([models["a"], models["a-again"]], LINES, opts)
    assert texts(twice) == texts(alone)
    for x, y in zip(chain.from_iterable(alone), chain.from_iterable(twice), strict=True):
        assert math.isclose(x.score, y.score, abs_tol=1e-4)
    pair, _ = translate_lines([models["a"], models["b"]], LINES, opts)  # runs, one row per line
    assert len(pair) == len(LINES) and pair[1][0].text == ""


def test_ensemble_members_must_share_their_vocabularies(models):
    opts = models["a"].config.decode
    with pytest.raises(ValueError, match="target vocabularies differ \\(entry 4 is '0' and 'a'\\)"):
        translate_lines([models["a"], models["letters"]], LINES, opts)
    with pytest.raises(ValueError, match="target vocabularies differ \\(14 and 15 entries\\)"):
        translate_lines([models["a"], models["more"]], LINES, opts)


def test_sampling_options_reach_the_search(models):
    loaded = models["a"]
    opts = decode_options(loaded.config.decode, sample=True, num_samples=3, seed=5, temperature=1.5)
    first, _ = translate_lines(loaded, LINES, opts)
    assert [len(row) for row in first] == [3, 1, 3, 3, 3] and first[1][0].text == ""
    assert texts(translate_lines(loaded, LINES, opts)[0]) == texts(first)
    small_batches = decode_options(opts, max_tokens=4)  # other batching, same samples
    assert texts(translate_lines(loaded, LINES, small_batches)[0]) == texts(first)
    other_seed = decode_options(opts, seed=6)
    assert texts(translate_lines(loaded, LINES, other_seed)[0]) != texts(first)
    top1 = decode_options(opts, top_k=1, num_samples=1)
    greedy, _ = translate_lines(loaded, LINES, decode_options(loaded.config.decode, greedy=True))
    assert texts(translate_lines(loaded, LINES, top1)[0]) == texts(greedy)
    with pytest.raises(ValueError, match="greedy and sample exclude each other"):
        decode_options(loaded.config.decode, greedy=True, sample=True)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "temperature",
            0,
            "temperature: Input should be greater than 0 (sampling temperature; 0 < t <= 100)",
        ),
        ("temperature", float("inf"), "temperature: "),
        ("top_k", -1, "top_k: Input should be greater than or equal to 0 (sample among the k most"),
        ("top_p", 0.0, "top_p: Input should be greater than 0 (sample in the smallest set"),
        ("top_p", 1.5, "top_p: Input should be less than or equal to 1 (sample in the smallest set"),
        (
            "num_samples",
            0,
            "num_samples: Input should be greater than or equal to 1 (samples per input; 1..1000)",
        ),
        ("seed", -1, "seed: Input should be greater than or equal to 0"),
    ],
)
def test_sampling_options_are_validated_in_one_line(option, value, message):
    """The library names the field; a caller names it its own way (the command line: --top-k)."""
    with pytest.raises(ConfigError) as err:
        decode_options(DecodeConfig(), **{option: value})
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert isinstance(err.value, OptionsError) and "--" not in str(err.value)
    as_option = err.value.describe(lambda field: "--" + field.replace("_", "-"))
    assert as_option.startswith("--" + message.replace("_", "-", 1)), as_option


def test_forced_prefixes_through_translate_lines(models):
    loaded = models["a"]
    prefixes = ["7 7", "", "", "1", "3 3 3"]
    for search in ("beam", "greedy"):
        options = decode_options(loaded.config.decode, search=search)
        outputs, _ = translate_lines(loaded, LINES, options, prefixes=prefixes)
        for line, prefix, row in zip(LINES, prefixes, outputs, strict=True):
            if line:
                assert row[0].text.startswith(prefix)
    with pytest.raises(
        ValueError, match="input 5: the forced prefix has 8 tokens, more than the maximum output"
    ):
        translate_lines(loaded, LINES, loaded.config.decode, prefixes=["", "", "", "", "1 " * 8])
    with pytest.raises(ValueError, match="2 forced prefixes for 5 input lines"):
        translate_lines(loaded, LINES, loaded.config.decode, prefixes=["", ""])


def test_score_lines_scores_what_search_found(models):
    """With alpha = 0 each beam output's score is its log-probability, so scoring the output ids
    gives it back (without the EOS term for an output stopped at the length limit); score_lines
    on text equals score_all on the encoded ids."""
    loaded = models["b"]
    opts = decode_options(loaded.config.decode, alpha=0.0, max_len_b=6)
    sources = [loaded.src_vocab.encode(line) for line in LINES]
    found = [hyps[0] for hyps in decode_all(loaded.model, sources, opts) if hyps]
    scores = score_all(loaded.model, [s for s in sources if s], [h.tokens for h in found], per_token=True)
    for src, h, s in zip([s for s in sources if s], found, scores, strict=True):
        ended = len(h.tokens) < len(src) + 6
        assert math.isclose(h.log_prob, s.log_prob if ended else sum(s.tokens[:-1]), abs_tol=1e-4)
    targets = ["3 2 1", "4", "", "9 9", "1 2 3 4 5 6"]
    by_line = score_lines(loaded, LINES, targets, per_token=True)
    by_ids = score_all(loaded.model, sources, [loaded.tgt_vocab.encode(t) for t in targets], per_token=True)
    for x, y in zip(by_line, by_ids, strict=True):
        assert x.tokens == pytest.approx(y.tokens, abs=1e-6)
    ensemble = score_lines([loaded, models["a"]], LINES, targets)
    assert all(math.isfinite(s.log_prob) for s in ensemble)
    with pytest.raises(ValueError, match="5 source lines and 2 target lines"):
        score_lines(loaded, LINES, targets[:2])
