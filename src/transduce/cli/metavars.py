"""What `--help` shows for the value each option or argument takes.

Typer labels a value with its Python type: `<bool>` after every flag (even `--help`),
`<list[Path]>`, `<str>` for an option whose values are a closed set. Here a flag shows nothing,
a path PATH (FILE or DIR where the option says so), a number INTEGER or NUMBER, text TEXT, and an
option that declares a metavar (`one_of`: its choices) that metavar. Every command and group of
the app is built from the classes below (`App`), so each of their parameters is labelled so.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, get_args

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

_NAMES: dict[Any, str] = {int: "INTEGER", float: "NUMBER", str: "TEXT"}


def one_of(choices: Iterable[str]) -> str:
    """The metavar of an option whose values are a closed set, e.g. [none|int8]."""
    return "[" + "|".join(choices) + "]"


def value_label(param: TyperOption | TyperArgument) -> str:
    """The label of the value `param` takes, as --help shows it."""
    if isinstance(param, TyperOption):
        if param.is_flag or param.count:
            return ""
        if param.metavar is not None:
            return param.metavar
    described = param.type_descriptor
    kind = get_args(described.annotation)[0] if described.is_list else described.annotation
    if described.is_path or (isinstance(kind, type) and issubclass(kind, Path)):
        return described.path_type.upper()
    return _NAMES.get(kind, "TEXT")


class _Option(TyperOption):
    def display_type_rich(self, ctx: typer.Context) -> str:
        return value_label(self)


class _Argument(TyperArgument):
    def display_type_rich(self, ctx: typer.Context) -> str:
        return value_label(self)


def _relabel(params: Iterable[Any]) -> None:
    """Typer builds the parameters itself (no hook chooses their class): each becomes the
    subclass above, which differs only in its label."""
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = _Option
        elif type(param) is TyperArgument:
            param.__class__ = _Argument


class _Labelled:
    """A command or group whose parameters, --help included, are labelled by `value_label`."""

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _relabel(self.params)

    def get_help_option(self, ctx: typer.Context) -> Any:
        option = super().get_help_option(ctx)
        _relabel([option])
        return option


class Command(_Labelled, TyperCommand):
    """A command of the app."""


class Group(_Labelled, TyperGroup):
    """A group of commands of the app."""


class App(typer.Typer):
    """A typer app whose groups and commands are `Group` and `Command` unless told otherwise."""

    def __init__(self, *, cls: type[TyperGroup] = Group, **kwargs: Any) -> None:
        super().__init__(cls=cls, **kwargs)

    def command(self, name: str | None = None, *, cls: type[TyperCommand] = Command, **kwargs: Any) -> Any:
        return super().command(name, cls=cls, **kwargs)
