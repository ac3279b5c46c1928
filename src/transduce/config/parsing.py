"""Building a Config: a preset or a TOML/YAML/JSON file, dotted overrides merged over it, and
one validation whose errors name every bad key (and the allowed keys or values)."""

from __future__ import annotations

import json
import reprlib
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .presets import PRESETS
from .schema import Config, ConfigError


def _section_fields(path: tuple[str | int, ...]) -> list[str]:
    """The keys allowed at a dotted location, for error messages."""
    model: type[BaseModel] = Config
    for part in path:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            break
        model = annotation
    return sorted(model.model_fields)


def _explain(err: ValidationError) -> str:
    """One line naming every bad key; inputs are shortened, as a bad value can be huge."""
    problems = []
    for e in err.errors():
        loc = tuple(e["loc"])
        key = ".".join(str(p) for p in loc) or "<config>"
        if e["type"] == "extra_forbidden":
            allowed = ", ".join(_section_fields(loc[:-1]))
            problems.append(f"unknown key '{key}'; allowed keys here: {allowed}")
        elif e["type"] == "value_error":
            problems.append(str(e["msg"]).removeprefix("Value error, "))
        else:
            problems.append(f"{key}: {e['msg']} (got {reprlib.repr(e.get('input'))})")
    return "invalid configuration: " + "; ".join(problems)


def _merge(base: dict[str, Any], extra: dict[str, Any], path: str = "") -> dict[str, Any]:
    """`extra`'s keys over `base`'s, section by section; a section replaced by a value or a value
    given keys is an error (it would otherwise hide the bad value from validation)."""
    out = dict(base)
    for key, value in extra.items():
        name, old = f"{path}{key}", out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = _merge(old, value, f"{name}.")
        elif isinstance(value, dict) and old is not None:
            raise ConfigError(f"{name} is a value ({reprlib.repr(old)}), not a section: it has no keys")
        elif isinstance(old, dict) and value is not None:
            raise ConfigError(
                f"{name} is a section: set its keys ({name}.{next(iter(old), 'key')}=...), "
                f"not {reprlib.repr(value)}"
            )
        else:
            out[key] = value
    return out


MAX_CONFIG_BYTES = 1 << 20  # a config is a few sections of keys; more is a wrong file


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases: each `*name` re-uses a whole subtree, so a few lines
    of nested aliases ("billion laughs") expand to billions of nodes for anything that walks them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed in a config; write the value out", mark
            )
        return super().compose_node(parent, index)


MAX_NESTING = 64  # a config is a few levels deep; PyYAML takes seconds to refuse thousands


def _load_yaml(text: str) -> Any:
    depth = deepest = 0
    for ch in text:
        depth += (ch in "[{") - (ch in "]}")
        deepest = max(deepest, depth)
    if deepest > MAX_NESTING:
        raise RecursionError(f"more than {MAX_NESTING} nested brackets")
    return yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader: plain data only


PARSERS: dict[str, tuple[str, Callable[[str], Any]]] = {
    ".toml": ("TOML", tomllib.loads),
    ".yaml": ("YAML", _load_yaml),
    ".yml": ("YAML", _load_yaml),
    ".json": ("JSON", json.loads),
}


def _parse_problem(exc: BaseException) -> str:
    """A parser's complaint on one line, with its position where the parser gives one."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem or exc.context}"
    if isinstance(exc, json.JSONDecodeError):
        return f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
    return " ".join(str(exc).split())


def _parse(text: str, what: str, parser: Callable[[str], Any], fmt: str) -> Any:
    """Parse `text`; every failure (syntax, a 5000-digit number, deep nesting) is a ConfigError."""
    try:
        return parser(text)
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        raise ConfigError(f"{what}: not valid {fmt}: {_parse_problem(exc)}") from None


def _read_text(path: Path) -> str:
    """A config file's UTF-8 text, refusing unreadable and oversized files."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes, too large for a config file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def _read_file(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise ConfigError(
            f"{path}: is a directory; give a preset ({', '.join(PRESETS)}) or a config file "
            "(.toml, .yaml or .json)"
        )
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path}: not a regular file (a pipe or device); give a config file")
    if path.suffix not in PARSERS:
        raise ConfigError(f"{path}: unknown config format '{path.suffix}'; use .toml, .yaml or .json")
    fmt, parser = PARSERS[path.suffix]
    data = _parse(_read_text(path), str(path), parser, fmt)
    if data is None:  # an empty YAML file
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return data


def parse_override(item: str) -> dict[str, Any]:
    """Turn `model.d_model=256` into {'model': {'d_model': 256}} (values parsed as YAML)."""
    if "=" not in item:
        raise ConfigError(f"override '{item}' must look like section.key=value")
    dotted, raw = item.split("=", 1)
    parts = dotted.strip().split(".")
    if not all(parts):
        raise ConfigError(f"override '{item}' has an empty key")
    value: Any = _parse(raw, f"override '{item}'", _load_yaml, "YAML") if raw.strip() else ""
    for part in reversed(parts):
        value = {part: value}
    return value


def resolve_source(source: str) -> dict[str, Any]:
    """A preset name or a config file path, as a plain dict (with its preset expanded)."""
    if source in PRESETS:
        return PRESETS[source]
    path = Path(source)
    if not path.exists():
        raise ConfigError(
            f"'{source}' is neither a preset ({', '.join(PRESETS)}) nor an existing config file"
        )
    data = _read_file(path)
    preset = data.pop("preset", None)
    if preset is not None:
        if not isinstance(preset, str) or preset not in PRESETS:
            raise ConfigError(
                f"{path}: preset: unknown {reprlib.repr(preset)}; allowed: {', '.join(PRESETS)}"
            )
        data = _merge(PRESETS[preset], data)
    return data


def build_config(data: dict[str, Any], overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Validate a dict plus overrides into a Config, raising ConfigError with named keys."""
    for item in overrides:
        data = _merge(data, parse_override(item))
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_explain(exc)) from None


def load_config(source: str, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Load a preset name or a TOML/YAML/JSON file, then apply dotted overrides."""
    return build_config(resolve_source(source), overrides)
