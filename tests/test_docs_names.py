"""What the pages and docstrings name exists: a dotted name of the package (`decode.beam.beam_search`,
`transduce.load`) resolves to a module or an attribute, and a file path in backticks
(`decode/pipeline.py`, `bench/gpu/gpu.sh`) is a file of the repository. A function that moves
leaves no page or docstring pointing at its old place.

The dated notes under docs/results/ and the records are history (they name things as they were)
and are not read; neither are code blocks, where names stand in commands and examples."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from transduce.config import Config

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "transduce"
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "reference").glob("*.md")),
]
TOP = {p.stem for p in SOURCE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()} - {"__init__"}
QUOTED = re.compile(r"`([A-Za-z_][\w.]*\.[A-Za-z_]\w*)`")  # `a.b.c`
PATH = re.compile(r"`?((?:[\w-]+/)+[\w.-]+\.(?:py|md|sh|toml|json))`?")  # a/b/c.py
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
# what ends a file's name rather than a name of the package (`metrics.py`, `train.SRC`)
FILE_TYPES = {"py", "md", "sh", "toml", "json", "yaml", "txt", "bin", "safetensors", "npy", "gz", "html"}
FILE_TYPES |= {"SRC", "TGT", "tree", "trees", "conllu"}
REPOSITORY = {"src", "bench", "tests", "docs", "configs", "demo", ".ci"}
RETIRED = {"bench/RESULTS.md"}  # kept for its history; current figures are on the results page


def resolves(name: str) -> bool:
    """Whether `name` (with or without its `transduce.` prefix) is a key of the config
    (`train.steps`, `decode.search`), a module of the package, or an attribute reached from one or
    from the package itself."""
    parts = name.removeprefix("transduce.").split(".")
    section = getattr(Config(), parts[0], None) if len(parts) == 2 else None
    if section is not None and parts[1] in type(section).model_fields:
        return True
    for cut in range(len(parts), -1, -1):
        try:
            found: object = importlib.import_module(".".join(["transduce", *parts[:cut]]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def package_names(text: str) -> list[str]:
    """The dotted names in backticks that start in the package (`transduce.` or a top-level
    module), file names (`metrics.py`) aside."""
    return [
        n
        for n in QUOTED.findall(text)
        if (n.split(".")[0] in TOP or n.startswith("transduce.")) and n.rsplit(".", 1)[1] not in FILE_TYPES
    ]


def repository_paths(text: str) -> list[str]:
    """The paths in `text` that point into the repository (a top folder of it, or of the package);
    others (`runs/x/config.json`, a user's files) are examples."""
    return [p for p in PATH.findall(text) if p.split("/")[0] in {*REPOSITORY, *TOP, "transduce"}]


def path_exists(path: str) -> bool:
    """A path as the repository, the package or a docs page names it."""
    return any((base / path).exists() for base in (ROOT, ROOT / "src", SOURCE, ROOT / "docs"))


def docstrings(path: Path) -> str:
    """The docstrings of a source file, joined."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
    return "\n".join(ast.get_docstring(n) or "" for n in nodes)


def texts() -> list[tuple[str, str]]:
    pages = [(str(p.relative_to(ROOT)), FENCE.sub("", p.read_text(encoding="utf-8"))) for p in PAGES]
    sources = [(str(p.relative_to(ROOT)), docstrings(p)) for p in sorted(SOURCE.rglob("*.py"))]
    return pages + sources


@pytest.mark.parametrize(("where", "text"), texts(), ids=[w for w, _ in texts()])
def test_named_definitions_and_files_exist(where, text):
    missing = [n for n in package_names(text) if not resolves(n)]
    missing += [p for p in repository_paths(text) if not path_exists(p) or p in RETIRED]
    assert not missing, f"{where} names what is not there: {', '.join(sorted(set(missing)))}"


def test_the_checker_finds_a_moved_function_and_a_missing_file():
    text = "see `decode.translate.decode_all` and `decode/translate.py`; `decode.beam.beam_search` stays"
    assert [n for n in package_names(text) if not resolves(n)] == ["decode.translate.decode_all"]
    assert [p for p in repository_paths(text) if not path_exists(p)] == ["decode/translate.py"]
