"""The model kind is looked up in tables, never compared by its name, so adding a kind touches
one place per concern: model/kinds.py (what it is made of, how it is built), train/objective.py
(how it is trained), decode/kinds.py (how it is decoded, scored and shown).

Every module of src/transduce is read, and a comparison of something named `kind` (`cfg.kind`,
`model.kind`, a local `kind`, `getattr(x, "kind")`) with a model kind's name, or with another
kind, or a `match` on it, is a failure outside the allowed files.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from transduce.config import ModelConfig
from transduce.decode.kinds import DECODINGS, decoding_for
from transduce.model.kinds import ASSEMBLIES, assembly_for
from transduce.train.objective import OBJECTIVES

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transduce"
KINDS = {"encoder_decoder", "encoder", "decoder"}
# config/schema.py declares the kinds (the schema's Literal) and validates which options each allows; it
# is layer 0 and cannot import the tables above it.
ALLOWED = {"config/schema.py"}


def _is_kind(node: ast.expr) -> bool:
    """`kind`, `x.kind` or `getattr(x, "kind", ...)`."""
    if isinstance(node, ast.Name):
        return node.id == "kind"
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and any(isinstance(a, ast.Constant) and a.value == "kind" for a in node.args)
    )


def _names_a_kind(node: ast.expr) -> bool:
    """A model kind's name, or a tuple, list or set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in KINDS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_kind(e) for e in node.elts)
    return False


def kind_comparisons(source: str) -> list[str]:
    """The kind comparisons in `source`, as 'line: code'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            kinds = sum(_is_kind(o) for o in operands)
            if kinds and (kinds > 1 or any(_names_a_kind(o) for o in operands)):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Match) and _is_kind(node.subject):
            found.append(f"{node.lineno}: match {ast.unparse(node.subject)}")
    return found


def test_no_module_compares_the_model_kind_by_name():
    found = [
        f"{path.relative_to(PACKAGE)}:{hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) not in ALLOWED
        for hit in kind_comparisons(path.read_text(encoding="utf-8"))
    ]
    assert not found, "dispatch on the kind through its table instead: " + "; ".join(found)


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
