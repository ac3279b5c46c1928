"""Engines: what turns a request's source ids into hypotheses, or scores its targets.

Everything around decoding (reading and encoding lines, forced prefixes, rendering, output files,
the server's batching, limits and schema) is the same whichever engine runs it: it builds one
`Request` and hands it to the engine of the loaded model (`LoadedModel.engine`). Ours
(`decode/torch_engine.py`) runs the PyTorch model, or an ensemble's members; CTranslate2's
(`decode/ctranslate2_engine.py`) runs an export of the same weights. `decode/engines.py` opens a
checkpoint for an engine by the engine's name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..config import DecodeConfig
from ..data.source import SourceAnnotation
from .scoring import Score
from .search import Hypothesis
from .shortlist import Shortlist

Progress = Callable[[int, int], None]  # (sources done, output or target tokens) after each batch


@dataclass(frozen=True, slots=True)
class Request:
    """One call of an engine: sources as our token ids (without EOS; empty for empty lines), in
    input order, and everything that says how to decode or score them. Options are by name only."""

    sources: Sequence[Sequence[int]]
    options: DecodeConfig  # search (beam, greedy or sample) and its settings; max_tokens batches
    prefixes: Sequence[Sequence[int]] | None = None  # per source, target ids every output starts with
    numbers: Sequence[int] | None = None  # each source's number in its own input (sampling seeds)
    annotations: Sequence[SourceAnnotation] | None = None  # factored or syntax-aware models' inputs
    on_batch: Progress | None = None  # after each batch, for progress displays
    scores: bool = True  # False: no caller reads the outputs' scores, which may then be NaN
    targets: Sequence[Sequence[int]] | None = None  # `score`: the target ids scored against each source
    per_token: bool = False  # `score`: each target token's log-probability too

    def source_numbers(self) -> list[int]:
        """Each source's number (0, 1, ... unless `numbers` says otherwise)."""
        numbers = list(range(len(self.sources))) if self.numbers is None else list(self.numbers)
        if len(numbers) != len(self.sources):
            raise ValueError(f"{len(numbers)} source numbers for {len(self.sources)} sources")
        return numbers


class Engine(Protocol):
    """Decodes and scores requests, in input order."""

    name: str  # what options and messages call it: torch, ctranslate2
    seeds_each_input: bool  # a sampling seed gives each input its own stream, whatever the batching

    def check(self, options: DecodeConfig, prefixed: bool = False) -> None:
        """OptionsError for settings this engine cannot decode with, before any work is done."""
        ...

    def decode(self, request: Request) -> list[list[Hypothesis]]:
        """Per source its n-best hypotheses (or samples), best first; none for empty sources.
        A language model's hypotheses are its continuation of the source; a classifier's its
        labels. With `request.scores` False an engine may leave scores NaN where they cost time."""
        ...

    def score(self, request: Request) -> list[Score]:
        """log P(target + EOS | source) per pair of `request.sources` and `request.targets`, over
        the full vocabulary (a shortlist restricts search, never scoring), batched under
        `request.options.max_tokens` source plus target tokens."""
        ...

    def shortlisted(self, shortlist: Shortlist | None) -> Engine:
        """This engine restricted to a shortlist's tokens (None: the full vocabulary)."""
        ...

    def between_steps(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Have `hook` called between decoding steps, or as often as the engine can (the server's
        turns); returns the function that stops it."""
        ...
