"""Bounds on one request and on the work the server takes on, and how work is counted."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..config import DecodeConfig


@dataclass
class Limits:
    """Bounds on one request and on the work the server takes on; each is the `serve` option of
    the same name. Work is counted in source tokens (with EOS) times beam."""

    max_segments: int = 64
    max_chars: int = 2000
    max_body_bytes: int = 1 << 20
    max_request_tokens: int = 32768
    max_batch_tokens: int = 4096
    max_queued_tokens: int = 65536
    request_timeout: float = 60.0
    max_wait_ms: float = 10.0
    batching: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Limits:
        """The limits from a `serve` command's parsed options, each the option of its name."""
        return cls(**{f.name: options[f.name] for f in fields(cls)})

    def __post_init__(self) -> None:
        """Refuse limits that would fail every request or bound nothing (`--max-segments -1`
        used to start a server that answered 413 to everything)."""
        for name in (
            "max_segments",
            "max_chars",
            "max_body_bytes",
            "max_request_tokens",
            "max_batch_tokens",
            "max_queued_tokens",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{option(name)} must be a positive integer, not {value!r}")
        if not (math.isfinite(self.request_timeout) and self.request_timeout > 0):
            raise ValueError(
                f"--request-timeout must be a positive number of seconds, not {self.request_timeout}"
            )
        if not (math.isfinite(self.max_wait_ms) and self.max_wait_ms >= 0):
            raise ValueError(f"--max-wait-ms must be a number >= 0, not {self.max_wait_ms}")
        if self.max_queued_tokens < self.max_request_tokens:
            raise ValueError(
                f"--max-queued-tokens ({self.max_queued_tokens}) must be at least --max-request-tokens "
                f"({self.max_request_tokens}), or the largest request allowed could never be queued"
            )


def option(name: str) -> str:
    """The `serve` option of a setting's name."""
    return "--" + name.replace("_", "-")


def segment_work(source: list[int], beam: int) -> int:
    """The decoding cost budgeted for a segment: its tokens with EOS times the beam, or the number
    of samples (an empty segment is not decoded, so 0)."""
    return (len(source) + 1) * beam if source else 0


def breadth(options: DecodeConfig) -> int:
    """Hypotheses decoded side by side per segment: the beam, or the samples when sampling."""
    return {"sample": options.num_samples, "greedy": 1, "beam": options.beam}[options.search]


class OverBudget(Exception):
    """A request over its decoding budget (the server answers 413)."""


def check_work(limits: Limits, sources: list[list[int]], beam: int) -> None:
    """OverBudget for a request over its decoding budget, or with a segment too big for one call
    (which could not take turns with other requests)."""
    works = [segment_work(s, beam) for s in sources]
    if max(works, default=0) > limits.max_batch_tokens:
        raise OverBudget(
            f"a segment of {max(works) // beam - 1} tokens at beam {beam} is {max(works)} source tokens "
            f"x beam; at most {limits.max_batch_tokens} per segment: shorten it or lower the beam"
        )
    if sum(works) > limits.max_request_tokens:
        raise OverBudget(
            f"the request is {sum(works)} source tokens x beam; at most {limits.max_request_tokens}: "
            "send fewer segments or lower the beam"
        )
