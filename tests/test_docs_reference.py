"""The reference pages keep up with the code: every key of the typed config is a row of
docs/configuration.md with its default, and the command-line page that the site's hook generates
lists every option of every command."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

from typer.main import get_command

from transduce.cli import app
from transduce.config import Config

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATION = ROOT / "docs" / "configuration.md"
HOOK = ROOT / "docs" / "hooks" / "cli_reference.py"


def documented_rows(section: str) -> dict[str, str]:
    """docs/configuration.md's table for `section` (`| \\`model.\\` | default | meaning |`): each key
    of a row's first column -> its default, the second column split at commas outside brackets."""
    lines = iter(CONFIGURATION.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if line.startswith(f"| `{section}.` |"):
            break
    else:
        raise AssertionError(f"docs/configuration.md has no table of {section}.* keys")
    next(lines)  # |---|---|---|
    rows: dict[str, str] = {}
    for line in lines:
        if not line.startswith("|"):
            break
        keys, defaults = line.split("|")[1:3]
        names = re.findall(r"`(\w+)`", keys)
        values = [v.strip() for v in re.split(r",\s*(?![^()]*\))", defaults)]
        assert len(names) == len(values), f"{section}: {len(values)} defaults for {names}"
        for name, value in zip(names, values, strict=True):
            assert name not in rows, f"{section}.{name} has two rows"
            rows[name] = value
    return rows


def shows(documented: str, default: Any) -> bool:
    """Whether a documented default is the field's: literals as TOML writes them; a default of None
    is `none`, or, where None stands for a value computed from other keys, that value's description
    (`all` layers, `task_train_max_len` + 1)."""
    if default is None:
        return documented in ("none", "all") or "`" in documented
    if isinstance(default, bool):
        return documented == str(default).lower()
    if isinstance(default, str):
        return documented == f"`{default}`"
    if isinstance(default, tuple):
        return documented == "(" + ", ".join(map(str, default)) + ")"
    return re.fullmatch(r"[-+0-9.e]+", documented) is not None and float(documented) == default


SECTIONS = {name: field.annotation for name, field in Config.model_fields.items()}


def test_every_config_key_has_a_row_with_its_default():
    for section, model in SECTIONS.items():
        rows = documented_rows(section)
        fields = model.model_fields
        assert set(rows) == set(fields), (
            f"{section}.*: undocumented {sorted(set(fields) - set(rows))}, "
            f"documented but not in the config {sorted(set(rows) - set(fields))}"
        )
        wrong = [
            f"{k}: {rows[k]} vs {f.default!r}" for k, f in fields.items() if not shows(rows[k], f.default)
        ]
        assert not wrong, f"{section}.* defaults: {wrong}"


def test_the_row_parser_sees_a_missing_key_and_a_wrong_default():
    """The check above can fail: the parser reads keys and defaults, not just any backticked text."""
    rows = documented_rows("decode")
    assert rows["beam"] == "4" and rows["alpha"] == "0.6" and rows["seed"] == "none"
    assert not shows("5", 4) and not shows("`pre`", "post") and not shows("none", 0)
    assert "static_cache" in rows and "static_cache" in SECTIONS["decode"].model_fields


def load_hook() -> Any:
    spec = importlib.util.spec_from_file_location("cli_reference", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def commands(group: Any, words: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """(the words that name it, the command) for every command under `group` (typer's click
    objects), and under its groups."""
    found: list[tuple[tuple[str, ...], Any]] = []
    for name, command in group.commands.items():
        found.append(((*words, name), command))
        if hasattr(command, "commands"):  # a group: typer's own copy of click.Group
            found += commands(command, (*words, name))
    return found


def test_the_generated_cli_page_lists_every_option_of_every_command():
    page = load_hook().markdown()
    sections = re.split(r"^#+ `(transduce[^`]*)`$", page, flags=re.M)
    by_command = dict(zip(sections[1::2], sections[2::2], strict=True))
    top = get_command(app)
    every = commands(top)
    for param in top.params:  # the app's own options (--version), above the first command
        assert all(name in sections[0] for name in param.opts), param.opts
    assert {"transduce " + " ".join(words) for words, _ in every} == set(by_command)
    for words, command in every:
        text = by_command["transduce " + " ".join(words)]
        for param in command.params:
            if param.param_type_name == "option":
                for name in param.opts:
                    assert re.search(rf"`[^`]*{re.escape(name)}\b", text), (words, name)
            else:
                assert f"`{param.name}" in text, (words, param.name)
