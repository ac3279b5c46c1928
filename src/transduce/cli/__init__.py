"""The `transduce` command line: one subcommand per job, options documented in --help.

Option parsing and printing only; the work is done by the library below it
(docs/architecture.md). `common` holds the app and the options several commands share; each
other module registers a group of commands on the app, imported here in the order that
`transduce --help` lists them."""

import os
import sys
import traceback

from . import preparation, training, decoding, plots, conversion, serving  # noqa: F401  # isort: skip
from .common import app

__all__ = ["app", "main"]


def main() -> None:
    """Run the command; a worker of a distributed run (torchrun sets WORLD_SIZE) then ends at
    once with the command's exit status, skipping the interpreter's finalization: there gloo's
    threads, still held past destroy_process_group, can abort or hang the process, and a node
    whose worker never exits hangs its launcher (seen on the guest of two nodes)."""
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        app()
        return
    try:
        app()
        status = 0
    except SystemExit as exc:
        status = exit_status(exc)
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def exit_status(exc: SystemExit) -> int:
    """The status Python's own exit gives a SystemExit: 0 for None, the code itself for an
    integer, 1 (with the message on stderr) for anything else."""
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)
    return 1
