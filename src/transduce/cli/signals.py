"""SIGTERM as a stop the command sees: `kill`, `timeout` and batch schedulers send it, and by
default it ends a process at once, skipping every `finally` (worker processes left running,
temporary folders left behind)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import NoReturn


def terminated(signum: int, frame: object) -> NoReturn:
    """A SIGTERM handler: the command unwinds as it does for Ctrl-C, with exit status 143
    (128 + SIGTERM) where Ctrl-C's is 130."""
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def sigterm_stops() -> Iterator[None]:
    """SIGTERM handled by `terminated` inside the block, the caller's handling back after it;
    in a thread other than the main one (which alone may set handlers), the caller's throughout."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
