"""The scheduler: requests queued as jobs, decoded in bounded calls that take turns on one thread.

Plain asyncio and threading, no web framework: the routes submit a job, then wait for it with
`wait_for`, which gives up on a client gone or a deadline passed; what that means in HTTP is the
routes' business.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from torch import nn

from ..config import DecodeConfig
from ..data.source import SourceAnnotation
from ..decode.search import Hypothesis
from ..decode.shortlist import Shortlist
from ..decode.translate import decode_all
from .limits import Limits, breadth, segment_work

T = TypeVar("T")
POLL_S = 0.1  # how often a waiting request checks for its client gone or its time up


class Overloaded(Exception):
    """More queued work than `max_queued_tokens`: the request is refused, not queued."""


class Unfinished(Exception):
    """A job given up before its hypotheses came: client gone, deadline passed, server stopping."""


class DecodeFailed(Exception):
    """Decoding a job's segments raised; the message says what."""


@dataclass(eq=False)
class Work:
    """What a request asks to have decoded: its segments in the model's input format, and how."""

    sources: list[list[int]]
    annotations: list[SourceAnnotation] | None
    options: DecodeConfig
    prefixes: list[list[int]] | None = None  # per segment, target ids its outputs start with
    greedy: bool = False  # greedy search instead of beam search


@dataclass(eq=False)
class Job(Work):
    """A request's work in the queue; `pending` holds the segments not yet given to a decode call."""

    future: asyncio.Future[list[list[Hypothesis]]] = field(kw_only=True)
    arrived: float = field(default_factory=time.monotonic, kw_only=True)
    key: str = field(init=False)  # requests batch together only with the same search options
    pending: deque[int] = field(init=False)
    results: list[list[Hypothesis]] = field(init=False)
    unfinished: int = field(init=False)

    def __post_init__(self) -> None:
        self.key = self.options.model_dump_json() + ("greedy" if self.greedy else "")
        self.pending = deque(i for i, s in enumerate(self.sources) if s)
        self.results = [[] for _ in self.sources]
        self.unfinished = len(self.pending)

    def work(self, i: int) -> int:
        return segment_work(self.sources[i], breadth(self.options))

    def queued_work(self) -> int:
        return sum(self.work(i) for i in self.pending)

    def finish(self, taken: list[int], hyps: list[list[Hypothesis]]) -> None:
        for i, h in zip(taken, hyps, strict=True):
            self.results[i] = h
        self.unfinished -= len(taken)
        if self.unfinished == 0 and not self.future.done():
            self.future.set_result(self.results)


class DecodeThread:
    """Runs decode calls one at a time on a daemon thread.

    Not a ThreadPoolExecutor: the interpreter joins those threads at exit, so a long decode kept
    a stopped server's process alive until it ended (over 100 s after SIGTERM). A daemon thread
    is abandoned at exit instead, which bounds shutdown by uvicorn's graceful timeout."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="decode", daemon=True)
        self._thread.start()

    async def call(self, fn: Callable[[], T]) -> T:
        future: Future[T] = Future()
        self._calls.put((fn, future))
        return await asyncio.wrap_future(future)

    def stop(self) -> None:
        """The thread ends after the call in progress, without anyone waiting for it."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, future = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # handed to the waiting request, not lost
                    future.set_exception(exc)


Batch = list[tuple[Job, list[int]]]  # per job, the numbers of its segments in one call


class Batcher:
    """Decodes requests on one thread in bounded calls that take turns between requests.

    A call holds at most `max_batch_tokens` of work: segments of requests with the same search
    options, one segment per request per round, starting with the request whose turn it is.
    The requests served by a call go to the back of the line when it ends, so a request arriving
    behind a large one waits for the call in progress and one call per request ahead of it, not
    for the whole large request. A failed call is retried per request, so only a failing
    request fails.
    """

    def __init__(self, model: nn.Module, limits: Limits, shortlist: Shortlist | None = None) -> None:
        self.model, self.limits, self.shortlist = model, limits, shortlist
        self.line: deque[Job] = deque()  # requests with segments still to decode, in turn order
        self.changed = asyncio.Event()
        self.thread = DecodeThread()
        self.batches = 0  # decode calls made, for tests and /info
        self.segments = 0  # segments decoded
        self.dropped = 0  # requests given up (client gone, time up) with work left

    def queued_work(self) -> int:
        return sum(job.queued_work() for job in self.line)

    def submit(self, work: Work) -> Job:
        """Queue a request; its future gets the hypotheses per segment. Overloaded if the queue
        would hold more than `max_queued_tokens`."""
        future = asyncio.get_running_loop().create_future()
        job = Job(work.sources, work.annotations, work.options, work.prefixes, work.greedy, future=future)
        if not job.pending:
            job.future.set_result(job.results)
            return job
        queued = self.queued_work()
        if queued + job.queued_work() > self.limits.max_queued_tokens:
            raise Overloaded(f"{queued} source tokens x beam already queued")
        self.line.append(job)
        self.changed.set()
        return job

    def drop(self, job: Job) -> None:
        """Forget a request nobody waits for any more: its queued segments are never decoded."""
        if job in self.line:
            self.line.remove(job)
        job.pending.clear()
        if not job.future.done():
            job.future.cancel()
            self.dropped += 1

    async def run(self) -> None:
        while True:
            batch = await self._next_batch()
            await self._decode(batch)
            self._to_back([job for job, _ in batch])

    async def _next_batch(self) -> Batch:
        """Wait for work; with batching, the request at the head waits up to max_wait_ms from
        its arrival for others with its options, unless a call's worth is already queued."""
        while True:
            self.changed.clear()
            wait = None
            if self.line:
                head = self.line[0]
                wait = head.arrived + self.limits.max_wait_ms / 1000 - time.monotonic()
                if (
                    not self.limits.batching
                    or wait <= 0
                    or self._work_like(head) >= self.limits.max_batch_tokens
                ):
                    return self._take(head)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), wait)

    def _work_like(self, head: Job) -> int:
        return sum(job.queued_work() for job in self.line if job.key == head.key)

    def _take(self, head: Job) -> Batch:
        """Segments for one call, round-robin over the requests like `head` (itself first),
        within max_batch_tokens; the head's first segment is taken whatever its size."""
        jobs = [job for job in self.line if job.key == head.key] if self.limits.batching else [head]
        taken: dict[Job, list[int]] = {}
        room = self.limits.max_batch_tokens
        took = True
        while took:
            took = False
            for job in jobs:
                if job.pending and (not taken or job.work(job.pending[0]) <= room):
                    room -= job.work(job.pending[0])
                    taken.setdefault(job, []).append(job.pending.popleft())
                    took = True
        return list(taken.items())

    def _to_back(self, served: list[Job]) -> None:
        for job in served:
            if job in self.line:
                self.line.remove(job)
                if job.pending:
                    self.line.append(job)

    async def _decode(self, batch: Batch) -> None:
        """Decode the batch in one call; if that fails, each request's part alone."""
        first = batch[0][0]
        sources = [job.sources[i] for job, taken in batch for i in taken]
        numbers = [i for _, taken in batch for i in taken]  # sampling seeds follow a segment's number
        annotations = prefixes = None
        if first.annotations is not None:  # all or none: they come with the model's input format
            annotations = [job.annotations[i] for job, taken in batch for i in taken]  # type: ignore[index]
        if any(job.prefixes is not None for job, _ in batch):
            prefixes = [job.prefixes[i] if job.prefixes else [] for job, taken in batch for i in taken]
        self.batches += 1
        # One budget: the call is already bounded by max_batch_tokens (tokens x beam), so the
        # checkpoint's decode.max_tokens must not split it again.
        options = first.options.model_copy(update={"max_tokens": self.limits.max_batch_tokens})
        try:
            results = await self.thread.call(
                lambda: decode_all(
                    self.model,
                    sources,
                    options,
                    use_greedy=first.greedy,
                    annotations=annotations,
                    prefixes=prefixes,
                    numbers=numbers,
                    shortlist=self.shortlist,
                )
            )
        except Exception as exc:  # a bad batch never takes the server or other requests down
            if len(batch) > 1:
                for part in batch:
                    await self._decode([part])
            else:
                self._fail(first, exc)
            return
        self.segments += len(sources)
        start = 0
        for job, taken in batch:
            job.finish(taken, results[start : start + len(taken)])
            start += len(taken)

    def _fail(self, job: Job, exc: Exception) -> None:
        job.pending.clear()
        if job in self.line:
            self.line.remove(job)
        if not job.future.done():
            job.future.set_exception(exc)


async def wait_for(
    batcher: Batcher, job: Job, timeout: float, disconnected: Callable[[], Awaitable[bool]]
) -> list[list[Hypothesis]]:
    """The job's hypotheses. A job whose client disconnected or whose `timeout` (seconds from
    arrival) passed is dropped, so no work is done for nobody (Unfinished). So is a job still
    waiting when the server's graceful shutdown period ends (the server then cancels the
    request), rather than a CancelledError. DecodeFailed if decoding raised."""
    try:
        while not job.future.done():
            left = job.arrived + timeout - time.monotonic()
            if left <= 0:
                raise Unfinished(
                    f"not decoded within {timeout:g} s; try later, or fewer segments or a smaller beam"
                )
            await asyncio.wait({job.future}, timeout=min(left, POLL_S))
            if not job.future.done() and await disconnected():
                raise Unfinished("the client disconnected")
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and hasattr(task, "uncancel"):  # Python 3.11+: the cancellation is handled
            task.uncancel()
        raise Unfinished("the server is shutting down") from None
    finally:
        if not job.future.done():
            batcher.drop(job)
    try:
        return job.future.result()
    except Exception as exc:
        raise DecodeFailed(f"decoding failed: {exc}") from None
