"""SIGTERM as a stop the command sees: `kill`, `timeout` and batch schedulers send it, and by
default it ends a process at once, skipping every `finally` (worker processes left running,
temporary folders left behind)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import NoReturn


def terminated(signum: int, frame: object) -> NoReturn:
    """A SIGTERM handler: the command unwinds as it does for Ctrl-C, with exit status 143
    (128 + SIGTERM) where Ctrl-C's is 130."""
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def sigterm_stops() -> Iterator[None]:
    """SIGTERM handled by `terminated` inside the block, the caller's handling back after it."""
    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
