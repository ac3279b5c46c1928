"""Jobs for the worker-process tests, in a module that imports little: each worker imports it."""

from __future__ import annotations

import os

from transduce.data.corpus import CorpusError


def die(job: int) -> int:
    """Work whose worker process dies (as one killed for want of memory would)."""
    os._exit(3)


def square(job: int) -> int:
    if job == 5:
        raise CorpusError("job 5 is bad")
    return job * job
