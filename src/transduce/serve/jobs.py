"""What the scheduler queues: a request's work, and its progress through decode calls."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from ..config import DecodeConfig
from ..data.source import SourceAnnotation
from ..decode.search import Hypothesis
from .limits import breadth, segment_work


@dataclass(eq=False)
class Work:
    """What a request asks to have decoded: its segments in the model's input format, and how."""

    sources: list[list[int]]
    annotations: list[SourceAnnotation] | None
    options: DecodeConfig
    prefixes: list[list[int]] | None = None  # per segment, target ids its outputs start with


@dataclass(eq=False)
class Job(Work):
    """A request's work in the queue; `pending` holds the segments not yet given to a decode call."""

    future: asyncio.Future[list[list[Hypothesis]]] = field(kw_only=True)
    arrived: float = field(default_factory=time.monotonic, kw_only=True)
    key: str = field(init=False)  # requests batch together only with the same search options
    pending: deque[int] = field(init=False)
    results: list[list[Hypothesis]] = field(init=False)
    unfinished: int = field(init=False)
    busy: bool = field(init=False, default=False)  # a call of it is in progress

    def __post_init__(self) -> None:
        self.key = self.options.model_dump_json()
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
