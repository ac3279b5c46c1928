"""Turns on the model between decode calls, handed over between decoding steps.

A decode call cannot be cut in two: one segment of 511 tokens decodes 561 steps in one search,
seconds on one CPU thread, and a request arriving meanwhile used to wait for all of it. So
several calls run at once, each on its own thread, but only the one holding the turn computes;
the others wait. Between decoding steps (the engine calls `step` where it can: ours before each
run of a layer stack, so every decoding step, an ensemble's once per member; CTranslate2, which
decodes a batch in one call, between batches) the holder hands the turn over if another call is
waiting and it has held the turn for `slice_s`: calls in progress advance in turn, a step or so
at a time, whatever their size. Work stays one computation at a time, as on one decode thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
SLICE_S = 0.02  # how long a call keeps the turn while others wait: ~1% of it goes to handing over


class Turns:
    """Calls on several threads take turns: one at a time holds the turn (`turn`), and hands it
    to the longest waiting call when its slice is over (`step`, called between steps)."""

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self.slice_s = slice_s
        self._changed = threading.Condition()
        self._waiting: deque[int] = deque()  # threads waiting for the turn, first come first
        self._holder: int | None = None
        self._since = 0.0
        self._exclusive = False
        self.handovers = 0  # for tests

    @contextlib.contextmanager
    def turn(self, exclusive: bool = False) -> Iterator[None]:
        """Hold the turn for the block, handing it over between steps unless `exclusive` (work
        that records the model's attention must not have other calls run in between)."""
        self._take()
        self._exclusive = exclusive
        try:
            yield
        finally:
            self._exclusive = False
            self._give()

    def step(self) -> None:
        """Between steps: if this thread holds the turn, its slice is over and another call
        waits, go to the back of the line. Other threads (not serving) pass straight through."""
        if self._holder != threading.get_ident() or self._exclusive or not self._waiting:
            return
        if time.monotonic() - self._since < self.slice_s:
            return
        self.handovers += 1
        self._give()
        self._take()

    def _take(self) -> None:
        me = threading.get_ident()
        with self._changed:
            self._waiting.append(me)
            self._changed.wait_for(lambda: self._holder is None and self._waiting[0] == me)
            self._waiting.popleft()
            self._holder, self._since = me, time.monotonic()

    def _give(self) -> None:
        with self._changed:
            self._holder = None
            self._changed.notify_all()


class DecodeThreads:
    """Runs calls on `n` daemon threads, each call on whichever is free.

    Not a ThreadPoolExecutor: the interpreter joins those threads at exit, so a long decode kept
    a stopped server's process alive until it ended (over 100 s after SIGTERM). Daemon threads
    are abandoned at exit instead, which bounds shutdown by uvicorn's graceful timeout."""

    def __init__(self, n: int) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._serve, name="decode", daemon=True) for _ in range(n)]
        for thread in self._threads:
            thread.start()

    async def call(self, fn: Callable[[], T]) -> T:
        future: Future[T] = Future()
        self._calls.put((fn, future))
        return await asyncio.wrap_future(future)

    def stop(self) -> None:
        """The threads end after their calls in progress, without anyone waiting for them."""
        for _ in self._threads:
            self._calls.put(None)

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, future = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # handed to the waiting request, not lost
                    future.set_exception(exc)
