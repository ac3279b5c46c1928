"""The console's progress displays: kept when the work succeeds, cleared when it fails."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.progress import Progress


@contextlib.contextmanager
def cleared_on_error(progress: Progress) -> Iterator[Progress]:
    """Run `progress` for the block; an error (or any exception) clears it, so the command's
    `error:` line is all that is left, not a half-done display."""
    progress.start()
    try:
        yield progress
    except BaseException:
        # erased from a terminal, never printed to a file or pipe; Progress.stop is skipped, as it
        # prints a blank line to a file or pipe
        progress.live.transient = True
        progress.live.stop()
        raise
    progress.stop()
