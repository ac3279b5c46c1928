"""Work on a stream of jobs in several processes, results in the jobs' order, memory bounded.

`multiprocessing.Pool.imap` reads its whole input ahead; here at most two jobs per process are
read ahead, so a corpus streams through in chunks. Workers are started fresh ("spawn"): the
parent may run threads (a progress display), which a forked child would inherit half-copied.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import Any

_WORK: list[Callable[[Any], Any]] = []  # in a worker process: the work it was started with


def available_cores() -> int:
    """The cores this process may run on (its affinity, which a batch scheduler may limit)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _start(work: Callable[[Any], Any]) -> None:
    _WORK[:] = [work]


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
    with context.Pool(workers, initializer=_start, initargs=(work,)) as pool:
        pending: deque = deque()
        for job in chain(head, jobs):
            pending.append(pool.apply_async(_run, (job,)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
