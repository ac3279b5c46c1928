"""The Python API (`import transduce`): the documented example runs as written, translate and score
agree with an independent computation, `import transduce` loads no torch, and bad options are
clear errors."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_layers import LAYERS, PACKAGE, imports_of
from tiny_models import DIGITS, next_log_probs, saved_checkpoint, sequence_log_probs

import transduce
from transduce.data.vocab import BOS, EOS, PAD

DOC = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"
LINES = ["1 2 3", "", "4 5", "6 7 8 9 1"]

pytestmark = pytest.mark.usefixtures("single_thread")


def code_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


def test_the_documented_example_runs_as_written(tmp_path, monkeypatch):
    blocks = code_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    assert (tmp_path / "runs" / "copy" / "best.json").exists()
    assert 0.0 <= namespace["metrics"]["dev_char_acc"] <= 1.0
    outputs, found, samples = namespace["outputs"], namespace["found"], namespace["samples"]
    assert len(outputs) == 3 and all(isinstance(o, str) for o in outputs) and outputs[1] == ""
    assert len(found[0]) == 2 and found[0][0].score >= found[0][1].score
    assert outputs[0] == found[0][0].text  # the best of the n-best is what translate gives
    assert len(samples[0]) == 3
    (scored,) = namespace["scores"]
    assert scored.log_prob == pytest.approx(sum(scored.tokens), abs=1e-4) and scored.log_prob < 0


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("api") / "ckpt"
    saved_checkpoint(path, DIGITS, 3)
    return path


def argmax_loop(model, vocab, line: str, a: float, b: int) -> str:
    """Greedy decoding by hand: one uncached decoder pass per step, no batching; PAD and BOS are
    never generated, and an output holds at most a * |source| + b tokens (EOS not counted)."""
    if not line:
        return ""
    source = vocab.encode(line)
    out: list[int] = []
    while len(out) < max(1, int(a * len(source) + b)):
        logp = next_log_probs(model, [*source, EOS], out)
        logp[PAD] = logp[BOS] = -math.inf
        token = int(logp.argmax())
        if token == EOS:
            break
        out.append(token)
    return vocab.decode(out)


def test_translate_greedy_equals_a_step_by_step_argmax(checkpoint):
    from transduce.store.load import load_model

    plain = load_model(checkpoint)  # unpacked weights, for the reference
    a, b = plain.config.decode.max_len_a, plain.config.decode.max_len_b
    expected = [argmax_loop(plain.model, plain.src_vocab, line, a, b) for line in LINES]
    assert any(expected)
    assert transduce.translate(transduce.load(checkpoint), LINES, greedy=True) == expected


def test_score_equals_the_models_log_probabilities(checkpoint):
    from transduce.store.load import load_model

    plain = load_model(checkpoint)
    targets = ["3 2 1", "4", "5 5", "9"]
    scores = transduce.score(transduce.load(checkpoint), LINES, targets, per_token=True)
    for source, target, got in zip(LINES, targets, scores, strict=True):
        seq = [*plain.tgt_vocab.encode(target), EOS]
        expected = sequence_log_probs(plain.model, [*plain.src_vocab.encode(source), EOS], seq)
        assert got.tokens == pytest.approx(expected, abs=1e-4)
        assert got.log_prob == pytest.approx(sum(expected), abs=1e-4)


def test_an_option_overrides_the_checkpoints_setting_for_that_call(checkpoint):
    model = transduce.load(checkpoint)
    assert model.config.decode.beam == 3
    found = transduce.hypotheses(model, ["1 2 3"], beam=5, nbest=5)
    assert len(found[0]) == 5  # beam 5 holds 5 hypotheses where the checkpoint's beam 3 holds 3
    assert len(transduce.hypotheses(model, ["1 2 3"], nbest=3)[0]) == 3


def test_unknown_or_bad_options_are_clear_errors(checkpoint):
    from transduce.config import ConfigError

    model = transduce.load(checkpoint)
    with pytest.raises(TypeError, match="unknown decoding option bem; allowed: beam"):
        transduce.translate(model, LINES, bem=4)
    with pytest.raises(ConfigError, match="beam"):
        transduce.translate(model, LINES, beam=0)
    for value in ("4", True):  # never converted (taken before issue 87's sweep, 2026-12-04)
        with pytest.raises(ConfigError, match="beam: Input should be a valid integer"):
            transduce.translate(model, LINES, beam=value)
    with pytest.raises(ValueError, match="go with init_from"):
        transduce.fit("small", "runs/never", keep_step=True)


WRONG_TYPES = [  # (what is called, the argument at fault as the message names it)
    ("a string for the lines", lambda m, c: transduce.translate(m, "1 2 3"), "lines: a list of strings"),
    (
        "None among the lines",
        lambda m, c: transduce.translate(m, ["1", None]),
        r"lines\[1\]: a string, not NoneType",
    ),
    (
        "bytes among the lines",
        lambda m, c: transduce.hypotheses(m, [b"1 2"]),
        r"lines\[0\]: a string, not bytes",
    ),
    (
        "an int for the lines",
        lambda m, c: transduce.translate(m, 5),
        "lines: a list of strings, one per line, not int",
    ),
    (
        "a string for the prefixes",
        lambda m, c: transduce.translate(m, ["1"], prefixes="x"),
        "prefixes: a list",
    ),
    ("strings to score", lambda m, c: transduce.score(m, "a b", "c d"), "sources: a list of strings"),
    (
        "an int among the targets",
        lambda m, c: transduce.score(m, ["1"], [1]),
        r"targets\[0\]: a string, not int",
    ),
    (
        "a path for the model",
        lambda m, c: transduce.translate(str(c), ["1"]),
        r"model: a loaded model \(transduce.load\(",
    ),
    (
        "a Path for the model",
        lambda m, c: transduce.score(c, ["1"], ["1"]),
        r"model: a loaded model \(transduce.load\(",
    ),
    ("no models", lambda m, c: transduce.translate([], ["1"]), "model: a loaded model"),
    # issue 87's sweep (2026-12-04): these raised AttributeError, an unnamed TypeError or
    # RuntimeError, or were taken as true (greedy="no" decoded greedily)
    (
        "None for the path",
        lambda m, c: transduce.load(None),
        r"path: a path \(a str or pathlib.Path\), not NoneType",
    ),
    (
        "an int for the device (CTranslate2: AttributeError)",
        lambda m, c: transduce.load(c, device=0, engine="ctranslate2"),
        r"device: a string, not int \(0\)",
    ),
    ("a string for the threads", lambda m, c: transduce.load(c, threads="2"), "threads: a whole number"),
    ("a float for the threads", lambda m, c: transduce.load(c, threads=2.5), "threads: a whole number"),
    (
        "a string for greedy",
        lambda m, c: transduce.translate(m, ["1"], greedy="no"),
        r"greedy: True or False, not str",
    ),
    (
        "a string for sample",
        lambda m, c: transduce.hypotheses(m, ["1"], sample="false"),
        "sample: True or False",
    ),
    (
        "a string for per_token",
        lambda m, c: transduce.score(m, ["1"], ["1"], per_token="yes"),
        "per_token: True",
    ),
    (
        "a list for tgt_lang",
        lambda m, c: transduce.translate(m, ["1"], tgt_lang=["de"]),
        "tgt_lang: a language code",
    ),
    (
        "a number for src_lang",
        lambda m, c: transduce.score(m, ["1"], ["1"], src_lang=5),
        r"src_lang: a language code \(str\) or None, not int",
    ),
    (
        "a string for the overrides",
        lambda m, c: transduce.load_config("small", "train.steps=3"),
        "overrides: a list",
    ),
    (
        "None for the overrides",
        lambda m, c: transduce.load_config("small", None),
        "overrides: a list of strings",
    ),
    (
        "bytes among the overrides",
        lambda m, c: transduce.load_config("small", [b"x=1"]),
        r"overrides\[0\]: a string",
    ),
    ("None for the config's source", lambda m, c: transduce.load_config(None), "source: a path"),
    ("None for the run directory", lambda m, c: transduce.fit("small", None), "run_dir: a path"),
    ("a dict for the config", lambda m, c: transduce.fit({"model": {}}, "runs/never"), "config: a Config"),
    (
        "an int for init_from",
        lambda m, c: transduce.fit("small", "runs/never", init_from=3),
        "init_from: a path",
    ),
]


@pytest.mark.parametrize(
    ("call", "message"), [(c, m) for _, c, m in WRONG_TYPES], ids=[n for n, _, _ in WRONG_TYPES]
)
def test_a_wrong_type_is_a_type_error_naming_the_argument(checkpoint, call, message):
    model = transduce.load(checkpoint)
    with pytest.raises(TypeError, match=message):
        call(model, checkpoint)


LANGUAGE_ERRORS = [  # (what is called, what the ValueError says): the arguments by their names
    (
        "tgt_lang for a model of one pair",
        lambda m: transduce.translate(m, ["1"], tgt_lang="de"),
        "tgt_lang de: this model translates one language pair; tgt_lang is for models prepared",
    ),
    (
        "the same, scoring",
        lambda m: transduce.score(m, ["1"], ["1"], tgt_lang="de"),
        "tgt_lang de: this model translates one language pair",
    ),
    (
        "src_lang for a model that does not read it",
        lambda m: transduce.hypotheses(m, ["1"], src_lang="en"),
        "src_lang en: this model does not read the source language",
    ),
]


@pytest.mark.parametrize(
    ("call", "message"), [r[1:] for r in LANGUAGE_ERRORS], ids=[r[0] for r in LANGUAGE_ERRORS]
)
def test_a_language_error_names_the_argument_not_the_option(checkpoint, call, message):
    """The decoder's message names the command line's --tgt-lang; the API's names tgt_lang
    (issue 87's sweep, 2026-12-04: a Python caller was told of options it does not have)."""
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        call(transduce.load(checkpoint))
    assert "--tgt-lang" not in str(raised.value) and "--src-lang" not in str(raised.value)


def test_beam_options_ask_for_beam_search_where_the_checkpoint_decodes_greedily(tmp_path):
    """A checkpoint trained with decode.search = "greedy": `beam` (or `alpha`, or `nbest` above
    1) asks for beam search, as it does on the command line and the server (refused before,
    naming --greedy, which nobody gave); with greedy=True it is still refused."""
    from transduce.config import ConfigError

    path = tmp_path / "greedy"
    model = saved_checkpoint(path, DIGITS, 3, ["decode.search=greedy"])
    assert model.config.decode.search == "greedy"
    found = transduce.hypotheses(model, ["1 2 3"], beam=3, nbest=3)
    assert len(found[0]) == 3
    assert transduce.translate(model, ["1 2 3"], beam=3) == [found[0][0].text]
    with pytest.raises(ConfigError, match="beam applies to beam search, not to greedy search"):
        transduce.translate(model, ["1 2 3"], greedy=True, beam=3)


def test_import_transduce_loads_no_torch():
    code = "import sys, transduce; print('torch' in sys.modules, sorted(transduce.__all__))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split()[0] == "False"


def test_the_api_sits_above_what_it_calls():
    """The layer checker reads the package's own __init__ (the API) and places it on top."""
    found = imports_of(PACKAGE / "__init__.py")
    assert {"decode.pipeline", "store.load", "train.trainer", "train.run_dir"} <= found
    assert all(LAYERS[name.split(".")[0]] < LAYERS["__init__"] for name in found)


def test_no_subpackage_shadows_an_api_function():
    """Importing a subpackage sets it as an attribute of `transduce`: an API function named like one
    (`train`) would be replaced by the module once anything imported it."""
    import importlib
    import pkgutil

    for module in pkgutil.iter_modules(transduce.__path__):
        if module.name != "__main__":  # that one runs the command line
            importlib.import_module(f"transduce.{module.name}")
    for name in transduce.__all__:
        assert getattr(transduce, name).__module__ == "transduce", name
