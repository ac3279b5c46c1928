"""The `transduce` command line: one subcommand per job, options documented in --help.

Option parsing and printing only; the work is done by the library below it
(docs/architecture.md). `common` holds the app and the options several commands share; each
other module registers a group of commands on the app, imported here in the order that
`transduce --help` lists them."""

from . import preparation, training, decoding, plots, conversion, serving  # noqa: F401  # isort: skip
from .common import app

__all__ = ["app", "main"]


def main() -> None:
    app()
