"""The package's layers point one way: no import cycles, and no import up the layers.

Imports are read from the source (function-local ones included), so a cycle hidden inside a
function body is found too. docs/architecture.md draws the same layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transduce"
BENCH = PACKAGE.parents[1] / "bench"  # the benchmarks: under the same length rule as the package

# Top-level module or subpackage -> layer; a module may import only from lower layers or
# from inside its own subpackage.
LAYERS = {
    "config": 0,
    "choices": 0,
    "fileio": 0,
    "display": 0,
    "device": 0,
    "cpu_memory": 0,
    "data": 1,
    "model": 2,
    "evalb": 2,
    "parsing": 3,
    "store": 3,
    "cost": 3,
    "metrics": 3,
    "interop": 4,  # export writers and importers: below decode, whose CTranslate2 engine writes exports
    "decode": 5,
    "evaluate": 6,
    "attention_plot": 6,
    "train": 6,
    "serve": 7,
    "cli": 8,
    "__main__": 9,
    "__init__": 10,  # the package's own __init__: the Python API (load, translate, score, train) over all
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__") or "__init__"


def imports_of(path: Path) -> set[str]:
    """Modules of the package that `path` imports, as dotted names relative to the package."""
    own = module_name(path).split(".")
    if own == ["__init__"]:
        own = []  # the package's own __init__: its relative imports start at the package
    package = own if path.name == "__init__.py" else own[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] if node.level > 1 else package
                target = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and node.module.startswith("transduce"):
                target = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                candidate = ".".join([*target, alias.name])
                found.add(
                    candidate
                    if (PACKAGE / Path(*candidate.split("."))).with_suffix(".py").exists()
                    else ".".join(target)
                )
    return {name for name in found if name}


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {i for i in imports_of(path) if i in modules} for name, path in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (depth-first search), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_no_import_cycles():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checker_finds_a_planted_cycle():
    edges = graph()
    edges["config"] = {*edges["config"], "cli"}  # cli imports config: now a loop
    assert find_cycle(edges) is not None


def test_imports_only_point_down_the_layers():
    upward = []
    for name, targets in graph().items():
        top = name.split(".")[0]
        for target in targets:
            other = target.split(".")[0]
            if other != top and LAYERS[other] >= LAYERS[top]:
                upward.append(f"{name} -> {target}")
    assert not upward, "imports up or across the layers: " + ", ".join(sorted(upward))


def test_every_module_has_a_layer():
    assert {name.split(".")[0] for name in graph()} <= set(LAYERS)


def long_functions(root: Path = PACKAGE, limit: int = 80) -> list[str]:
    """Functions under `root` longer than `limit` lines (decorators and docstrings counted)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if parts[0] == "out" or any(part.startswith(".") for part in parts):  # bench/out, bench/.peers
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if node.end_lineno - first + 1 > limit:
                    name = path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
                    found.append(f"{name}.{node.name}: {node.end_lineno - first + 1} lines")
    return found


@pytest.mark.parametrize("root", [PACKAGE, BENCH], ids=["src", "bench"])
def test_no_function_is_over_80_lines(root):
    long = long_functions(root)
    assert not long, "split these by concern: " + ", ".join(long)


@pytest.mark.parametrize("root", [PACKAGE, BENCH], ids=["src", "bench"])
def test_the_length_check_finds_a_long_function(root):
    assert long_functions(root, limit=20)  # both have functions over 20 lines, so the walk sees them


def test_no_server_module_is_over_300_lines():
    long = [p.name for p in (PACKAGE / "serve").glob("*.py") if len(p.read_text().splitlines()) > 300]
    assert not long, f"serve/ modules over 300 lines: {long}"
