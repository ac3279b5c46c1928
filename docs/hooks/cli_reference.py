"""An mkdocs hook: the command-line reference page (cli.md), made from the commands' own `--help`
when the site is built, so that it cannot fall behind the options (no copy is committed)."""

from __future__ import annotations

from typing import Any

PAGE = "cli.md"
INTRO = (
    "Every command and option of `transduce`, as its `--help` gives them (this page is generated from "
    "the command definitions when the site is built). Bad values are one `error:` line and exit status "
    "2 ([Guarantees](reliability.md)); the config keys that `train`'s overrides set are in "
    "[Configuration](configuration.md)."
)


def markdown() -> str:
    """The page: typer's Markdown for the whole command tree, under a title of our own."""
    import typer
    from typer.cli import get_docs_for_click

    from transduce.cli import app

    command = typer.main.get_command(app)
    body = get_docs_for_click(obj=command, ctx=typer.Context(command), name="transduce", title="Command line")
    title, _, rest = body.partition("\n\n")
    return f"{title}\n\n{INTRO}\n\n{rest.strip()}\n"


def on_files(files: Any, config: Any, **_: Any) -> Any:
    """Add the generated page beside the written ones (mkdocs calls this before building the nav)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=markdown()))
    return files
