"""The model kind is looked up in tables, never compared by its name, so adding a kind touches
one place per concern: model/kinds.py (what it is made of, how it is built), train/objective.py
(how it is trained), decode/kinds.py (how it is decoded, scored and shown). The same holds for the
kind of data (data/kinds.py) and for the decoding engines (decode/engines.py).

Every module of src/transduce is read, and a comparison of something named `kind` (`cfg.kind`,
`model.kind`, a local `kind`, `getattr(x, "kind")`) with a model kind's name, or with another
kind, or a `match` on it, is a failure outside the allowed files; so is a comparison of a
`data_kind` with a data kind's name, or of anything with an engine's name.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from transduce.choices import ENGINES
from transduce.config import ModelConfig
from transduce.data.kinds import DATA_KINDS, data_kind
from transduce.data.meta import DataKind
from transduce.decode.engines import ENGINES as ENGINE_TABLE
from transduce.decode.engines import engine_kind
from transduce.decode.kinds import DECODINGS, decoding_for
from transduce.model.kinds import ASSEMBLIES, assembly_for
from transduce.train.objective import OBJECTIVES

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transduce"
KINDS = {"encoder_decoder", "encoder", "decoder"}
# config/schema.py declares the kinds (the schema's Literal) and validates which options each allows; it
# is layer 0 and cannot import the tables above it.
ALLOWED = {"config/schema.py"}
ENGINE_SUBJECTS = ("engine", "name")  # an engine's name: `engine`, `x.engine`, `engine.name`


def _is_named(node: ast.expr, name: str) -> bool:
    """`name`, `x.name` or `getattr(x, "name", ...)`."""
    if isinstance(node, ast.Name):
        return node.id == name
    if isinstance(node, ast.Attribute):
        return node.attr == name
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and any(isinstance(a, ast.Constant) and a.value == name for a in node.args)
    )


def _names_one(node: ast.expr, names: set[str]) -> bool:
    """One of `names`, or a tuple, list or set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in names
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_one(e, names) for e in node.elts)
    return False


def comparisons(source: str, subjects: tuple[str, ...], names: set[str]) -> list[str]:
    """The comparisons in `source`, as 'line: code', of something named as one of `subjects` with
    one of `names` or with another such thing, and the `match`es on it."""

    def is_subject(node: ast.expr) -> bool:
        return any(_is_named(node, subject) for subject in subjects)

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            count = sum(is_subject(o) for o in operands)
            if count and (count > 1 or any(_names_one(o, names) for o in operands)):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Match) and is_subject(node.subject):
            found.append(f"{node.lineno}: match {ast.unparse(node.subject)}")
    return found


def kind_comparisons(source: str) -> list[str]:
    """The model-kind comparisons in `source`."""
    return comparisons(source, ("kind",), KINDS)


def _found(check, allowed: set[str]) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE)}:{hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) not in allowed
        for hit in check(path.read_text(encoding="utf-8"))
    ]


def test_no_module_compares_the_model_kind_by_name():
    found = _found(kind_comparisons, ALLOWED)
    assert not found, "dispatch on the kind through its table instead: " + "; ".join(found)


def test_no_module_compares_a_data_kind_or_an_engine_by_name():
    data = _found(lambda source: comparisons(source, ("data_kind",), set(DATA_KINDS)), set())
    assert not data, "ask data/kinds.py's table instead: " + "; ".join(data)
    engines = _found(lambda source: comparisons(source, ENGINE_SUBJECTS, set(ENGINES)), {"decode/engines.py"})
    assert not engines, "ask decode/engines.py's table instead: " + "; ".join(engines)


@pytest.mark.parametrize(
    ("code", "subject", "names"),
    [
        ("if meta.data_kind == 'parse': pass", ("data_kind",), set(DATA_KINDS)),
        ("ok = data_kind in ('task', 'labels')", ("data_kind",), set(DATA_KINDS)),
        ("if engine != 'torch': pass", ENGINE_SUBJECTS, set(ENGINES)),
        ("same = loaded.engine.name == 'ctranslate2'", ENGINE_SUBJECTS, set(ENGINES)),
    ],
)
def test_the_checker_finds_planted_data_kind_and_engine_comparisons(code, subject, names):
    assert comparisons(code, subject, names)


def test_every_data_kind_and_engine_has_its_row():
    assert set(get_args(DataKind)) == set(DATA_KINDS)
    assert set(ENGINES) == set(ENGINE_TABLE) and all(engine_kind(e).name == e for e in ENGINES)
    with pytest.raises(ValueError, match=r"unknown data_kind 'audio'; allowed: text, task, parse, labels"):
        data_kind("audio")
    with pytest.raises(ValueError, match=r"engine 'onnx': allowed: torch, ctranslate2"):
        engine_kind("onnx")


@pytest.mark.parametrize(
    "code",
    [
        "if cfg.kind == 'encoder': pass",
        "x = 1 if model.kind != 'encoder_decoder' else 0",
        "ok = kind in ('decoder', 'encoder')",
        "same = getattr(m, 'kind', 'encoder_decoder') == 'decoder'",
        "same = self.kind == kind",
        "match cfg.kind:\n    case 'encoder': pass",
    ],
)
def test_the_checker_finds_planted_comparisons(code):
    assert kind_comparisons(code)


@pytest.mark.parametrize(
    "code", ["side == 'decoder'", "cfg.tie_embeddings in ('decoder', 'all')", "meta.data_kind == 'parse'"]
)
def test_the_checker_leaves_other_names_alone(code):
    assert not kind_comparisons(code)


def test_every_table_has_a_row_for_every_kind_of_the_schema():
    declared = set(get_args(ModelConfig.model_fields["kind"].annotation))
    assert declared == KINDS == set(ASSEMBLIES) == set(DECODINGS) == set(OBJECTIVES)


def test_an_unknown_kind_is_a_clear_error():
    message = r"unknown model\.kind 'seq2tree'; allowed: encoder_decoder, decoder, encoder"
    with pytest.raises(ValueError, match=message):
        assembly_for("seq2tree")
    with pytest.raises(ValueError, match=message):
        decoding_for("seq2tree")
