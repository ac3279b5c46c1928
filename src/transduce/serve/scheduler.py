"""The scheduler: requests queued as jobs, decoded in bounded calls that take turns.

Plain asyncio, no web framework: the routes submit a job, then wait for it with `wait_for`, which
gives up on a client gone or a deadline passed; what that means in HTTP is the routes' business.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..decode.engine import Engine, Request
from ..decode.search import Hypothesis
from .jobs import Job, Work
from .limits import Limits
from .turns import DecodeThreads, Turns

T = TypeVar("T")
POLL_S = 0.1  # how often a waiting request checks for its client gone or its time up
CALLS_AT_ONCE = 4  # decode calls in progress at once, taking turns between steps (turns.py)
BESIDE_AFTER_S = 0.5  # how long a small call in progress runs before another may start beside it


class Overloaded(Exception):
    """More queued work than `max_queued_tokens`: the request is refused, not queued."""


class Unfinished(Exception):
    """A job given up before its hypotheses came: client gone, deadline passed, server stopping."""


class DecodeFailed(Exception):
    """Decoding a job's segments raised; the message says what."""


Batch = list[tuple[Job, list[int]]]  # per job, the numbers of its segments in one call


class Batcher:
    """Decodes requests in bounded calls that take turns between requests and between steps.

    A call holds at most `max_batch_tokens` of work: segments of requests with the same search
    options, one segment per request per round, starting with the request whose turn it is; a
    request has at most one call in progress. Up to CALLS_AT_ONCE calls are in progress at once,
    each on its own thread, taking turns on the model between decoding steps (turns.py), so a
    request arriving behind a long call is decoded beside it instead of waiting for it to end
    (its single segments can take seconds). Another call starts beside those in progress only
    once each is large (half of max_batch_tokens) or has run BESIDE_AFTER_S: under a steady
    load of small requests, those arriving while a small call is young wait and go into one
    call together, as one call's steps cost about what several calls' steps cost each (a
    server with 16 clients that started a call for each group of arrivals made half the
    segments a second). A request served by a call goes
    to the back of the line when it ends. A failed call is retried per request, so only a
    failing request fails.
    """

    def __init__(self, engine: Engine, limits: Limits) -> None:
        self.engine, self.limits = engine, limits
        self.line: deque[Job] = deque()  # requests with segments still to decode, in turn order
        self.changed = asyncio.Event()
        self.threads = DecodeThreads(CALLS_AT_ONCE)
        self.turns = Turns()
        self.running: dict[asyncio.Task[None], tuple[float, int]] = {}  # calls in progress: start, work
        self.batches = 0  # decode calls made, for tests and /info
        self.segments = 0  # segments decoded
        self.dropped = 0  # requests given up (client gone, time up) with work left

    def queued_work(self) -> int:
        return sum(job.queued_work() for job in self.line)

    def submit(self, work: Work) -> Job:
        """Queue a request; its future gets the hypotheses per segment. Overloaded if the queue
        would hold more than `max_queued_tokens`."""
        future = asyncio.get_running_loop().create_future()
        job = Job(work.sources, work.annotations, work.options, work.prefixes, future=future)
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
        """Start calls as work arrives and room allows, until cancelled."""
        stop_hooks = self.engine.between_steps(self.turns.step)
        try:
            while True:
                batch = await self._next_batch()
                for job, _ in batch:
                    job.busy = True
                call = asyncio.create_task(self._call(batch))
                work = sum(job.work(i) for job, taken in batch for i in taken)
                self.running[call] = (time.monotonic(), work)
        finally:
            stop_hooks()
            for call in list(self.running):
                call.cancel()

    def stop(self) -> None:
        """The decode threads end after their calls in progress, without anyone waiting for them."""
        self.threads.stop()

    async def exclusive(self, fn: Callable[[], T]) -> T:
        """`fn()` on a decode thread, with no decode call running meanwhile (it holds the turn
        without handing it over): for work that records the model's attention."""

        def alone() -> T:
            with self.turns.turn(exclusive=True):
                return fn()

        return await self.threads.call(alone)

    async def _call(self, batch: Batch) -> None:
        try:
            await self._decode(batch)
        finally:
            self.running.pop(asyncio.current_task(), None)  # type: ignore[arg-type]
            for job, _ in batch:
                job.busy = False
            self._to_back([job for job, _ in batch])
            self.changed.set()

    async def _next_batch(self) -> Batch:
        """Wait for work and room for a call; with batching, the first request in line with no
        call in progress waits up to max_wait_ms from its arrival for others with its options,
        unless a call's worth is already queued."""
        while True:
            self.changed.clear()
            wait = None
            head = next((job for job in self.line if not job.busy), None)
            beside = self._beside_in()
            if head is not None and beside > 0:
                wait = None if beside == math.inf else beside
            elif head is not None:
                wait = head.arrived + self.limits.max_wait_ms / 1000 - time.monotonic()
                if (
                    not self.limits.batching
                    or wait <= 0
                    or self._work_like(head) >= self.limits.max_batch_tokens
                ):
                    return self._take(head)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), wait)

    def _beside_in(self) -> float:
        """Seconds until a call may start: 0 with no call in progress or once each is large or
        has run BESIDE_AFTER_S; inf while CALLS_AT_ONCE are."""
        if len(self.running) >= CALLS_AT_ONCE:
            return math.inf
        large = self.limits.max_batch_tokens / 2
        small = [began for began, work in self.running.values() if work < large]
        return max(0.0, max(small, default=-math.inf) + BESIDE_AFTER_S - time.monotonic())

    def _like(self, head: Job) -> list[Job]:
        """The requests that may share a call with `head`: same options, no call in progress."""
        return [job for job in self.line if job.key == head.key and not job.busy]

    def _work_like(self, head: Job) -> int:
        return sum(job.queued_work() for job in self._like(head))

    def _take(self, head: Job) -> Batch:
        """Segments for one call, round-robin over the requests like `head` (itself first),
        within max_batch_tokens; the head's first segment is taken whatever its size."""
        jobs = self._like(head) if self.limits.batching else [head]
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

        request = Request(sources, options, prefixes=prefixes, numbers=numbers, annotations=annotations)

        def call() -> list[list[Hypothesis]]:
            with self.turns.turn():
                return self.engine.decode(request)

        try:
            results = await self.threads.call(call)
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
