"""bench/README.md's table lists every script in bench/, and names none that is gone: a row per
module or shell script (a folder's row, `data/l10n/`, stands for the modules inside it)."""

from __future__ import annotations

import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
ROW = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)  # | `decode/speed.py` | what it measures |
SKIPPED = {"out", "records"}  # what the scripts write (bench/out is ignored, records are data)


def table_rows() -> set[str]:
    return set(ROW.findall((BENCH / "README.md").read_text(encoding="utf-8")))


def scripts() -> set[str]:
    """Every module (packages' __init__ aside) and shell script of bench/, relative to it."""
    found = set()
    for path in BENCH.rglob("*"):
        relative = path.relative_to(BENCH)
        if relative.parts[0] in SKIPPED or any(part.startswith(".") for part in relative.parts):
            continue
        if path.suffix in (".py", ".sh") and path.name != "__init__.py":
            found.add(relative.as_posix())
    return found


def unlisted(rows: set[str], files: set[str]) -> set[str]:
    """The files no row names, itself or by a folder above it."""
    folders = {row for row in rows if row.endswith("/")}
    return {f for f in files if f not in rows and not any(f.startswith(folder) for folder in folders)}


def test_every_script_has_a_row():
    missing = unlisted(table_rows(), scripts())
    assert not missing, f"add these to bench/README.md's table: {sorted(missing)}"


def test_every_row_names_a_file_or_folder():
    gone = {row for row in table_rows() if not (BENCH / row).exists()}
    assert not gone, f"bench/README.md names what bench/ does not hold: {sorted(gone)}"


def test_the_comparison_sees_a_missing_row():
    rows, files = table_rows(), scripts()
    assert "decode/speed.py" in rows and "data/l10n/build.py" in files  # the walk and the table are read
    assert unlisted(rows - {"decode/speed.py"}, files) == {"decode/speed.py"}
    assert unlisted(rows - {"data/l10n/"}, files) >= {"data/l10n/build.py", "data/l10n/__main__.py"}
