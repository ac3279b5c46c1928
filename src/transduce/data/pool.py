"""Work on a stream of jobs in several processes, results in the jobs' order, memory bounded.

`multiprocessing.Pool.imap` reads its whole input ahead, and waits for ever for the result of a
worker that died; here at most two jobs per process are read ahead, and a dead worker is an
error. Workers are started fresh ("spawn"): the parent may run threads (a progress display),
which a forked child would inherit half-copied. They ignore Ctrl-C from their start (they
inherit it ignored), and the parent, which handles it (and SIGTERM, in `prepare`), stops them.
A parent killed outright (SIGKILL) cannot: its workers see that their parent is gone and exit,
rather than wait for work for ever while holding the standard output and error they share
with it (whoever reads those, a pipeline or a `subprocess.run`, would wait with them).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from itertools import chain, islice
from typing import Any

_WORK: list[Callable[[Any], Any]] = []  # in a worker process: the work it was started with
ORPHAN_CHECK_SECONDS = 0.5  # how often a worker looks whether its parent is still there


class WorkerError(RuntimeError):
    """A worker process ended without a result (killed, perhaps for want of memory)."""


def available_cores() -> int:
    """The cores this process may run on (its affinity, which a batch scheduler may limit)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _start(work: Callable[[Any], Any], parent: int) -> None:
    _WORK[:] = [work]
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


def _exit_when_orphaned(parent: int) -> None:
    """End this worker once `parent` is no longer its parent (it died and the worker was handed
    to init or a subreaper); polling works wherever os.getppid does, unlike Linux's prctl."""
    while os.getppid() == parent:
        time.sleep(ORPHAN_CHECK_SECONDS)
    os._exit(1)


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ctrl-C ignored for a moment: processes started then inherit it ignored, and Python keeps
    it so (a worker interrupted while it imports would print a traceback)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _run(job: Any) -> Any:
    return _WORK[0](job)


def ordered_map(work: Callable[[Any], Any], jobs: Iterable[Any], workers: int) -> Iterator[Any]:
    """`work(job)` for every job, in order: in `workers` processes (`work` is pickled to each
    once), or in this one when `workers` is 1 or there is a single job. An exception raised by
    `work` is raised here, at its job's turn, and stops the workers."""
    jobs = iter(jobs)
    head = list(islice(jobs, 2))
    if workers <= 1 or len(head) < 2:
        yield from map(work, chain(head, jobs))
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start, initargs=(work, os.getpid())
    ) as pool:
        pending: deque[Future] = deque()
        jobs = chain(head, jobs)
        try:
            with _sigint_ignored():  # each of the first submissions starts a worker
                pending.extend(pool.submit(_run, job) for job in islice(jobs, workers))
            for job in jobs:
                pending.append(pool.submit(_run, job))
                if len(pending) >= 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        except BrokenProcessPool:
            raise WorkerError(
                f"a worker process ended without its result (killed, perhaps for want of memory); "
                f"try fewer than {workers} workers"
            ) from None
        finally:
            for future in pending:
                future.cancel()
