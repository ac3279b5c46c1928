"""Engines: what turns source ids into hypotheses and scores target ids.

Everything around decoding (reading and encoding lines, forced prefixes, rendering, output files,
the server's batching, limits and schema) is the same whichever engine runs it; the engine plugs
in where `decode_all` and `score_all` are called. Ours (`TorchEngine`) runs the PyTorch model, or
an ensemble's members; `interop/ctranslate2_engine.py` runs a CTranslate2 export of the same
weights. A checkpoint decoded by another engine is an `EngineModel`: the checkpoint reads the
inputs and renders the outputs, its engine decodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from torch import nn

from ..config import DecodeConfig
from ..data.source import SourceAnnotation
from ..model.layers import Stack
from ..model.universal import UniversalStack
from ..store.load import LoadedModel
from .options import check_for_model
from .scoring import Score, score_all
from .search import Hypothesis
from .shortlist import Shortlist
from .translate import decode_all

Progress = Callable[[int, int], None]  # (sources done, output tokens) after each batch


class Engine(Protocol):
    """Decodes and scores sources given as our token ids (without EOS), in input order."""

    name: str  # what options and messages call it: torch, ctranslate2
    seeds_each_input: bool  # a sampling seed gives each input its own stream, whatever the batching

    def check(self, options: DecodeConfig, greedy: bool = False, prefixed: bool = False) -> None:
        """OptionsError for settings this engine cannot decode with, before any work is done."""
        ...

    def decode(
        self,
        sources: list[list[int]],
        options: DecodeConfig,
        *,
        greedy: bool = False,
        prefixes: Sequence[Sequence[int]] | None = None,
        numbers: Sequence[int] | None = None,
        annotations: list[SourceAnnotation] | None = None,
        on_batch: Progress | None = None,
        scores: bool = True,
    ) -> list[list[Hypothesis]]:
        """As `decode_all`: n-best hypotheses (or samples) per source, none for empty sources.
        scores=False: the caller reads no score, and an engine may leave them NaN where they
        cost time (CTranslate2 computes them on request)."""
        ...

    def score(
        self,
        sources: list[list[int]],
        targets: list[list[int]],
        *,
        max_tokens: int = 4096,
        per_token: bool = False,
        annotations: list[SourceAnnotation] | None = None,
        on_batch: Progress | None = None,
    ) -> list[Score]:
        """As `score_all`: log P(target + EOS | source) per pair, over the full vocabulary (a
        shortlist restricts search, never scoring)."""
        ...

    def shortlisted(self, shortlist: Shortlist | None) -> Engine:
        """This engine restricted to a shortlist's tokens (None: the full vocabulary)."""
        ...

    def between_steps(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Have `hook` called between decoding steps, or as often as the engine can (the server's
        turns); returns the function that stops it."""
        ...


@dataclass
class TorchEngine:
    """Our PyTorch model (any kind), or an Ensemble, decoded by `decode_all`, scored by `score_all`."""

    model: nn.Module
    shortlist: Shortlist | None = None
    name = "torch"
    seeds_each_input = True

    def check(self, options: DecodeConfig, greedy: bool = False, prefixed: bool = False) -> None:
        check_for_model(self.model, options, greedy, prefixed)

    def decode(
        self,
        sources: list[list[int]],
        options: DecodeConfig,
        *,
        greedy: bool = False,
        prefixes: Sequence[Sequence[int]] | None = None,
        numbers: Sequence[int] | None = None,
        annotations: list[SourceAnnotation] | None = None,
        on_batch: Progress | None = None,
        scores: bool = True,
    ) -> list[list[Hypothesis]]:
        return decode_all(
            self.model,
            sources,
            options,
            use_greedy=greedy,
            on_batch=on_batch,
            annotations=annotations,
            prefixes=prefixes,
            numbers=numbers,
            shortlist=self.shortlist,
        )

    def score(
        self,
        sources: list[list[int]],
        targets: list[list[int]],
        *,
        max_tokens: int = 4096,
        per_token: bool = False,
        annotations: list[SourceAnnotation] | None = None,
        on_batch: Progress | None = None,
    ) -> list[Score]:
        return score_all(
            self.model, sources, targets, max_tokens, per_token, annotations=annotations, on_batch=on_batch
        )

    def shortlisted(self, shortlist: Shortlist | None) -> TorchEngine:
        """ValueError if the shortlist does not fit the model (not one encoder-decoder, other
        vocabularies), before any work."""
        if shortlist is not None:
            shortlist.projection(self.model)
        return TorchEngine(self.model, shortlist)

    def between_steps(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Before every run of a layer stack: every decoding step runs the decoder stack once (an
        ensemble's once per member)."""
        stacks = [m for m in self.model.modules() if isinstance(m, Stack | UniversalStack)]
        handles = [stack.register_forward_pre_hook(lambda *_: hook()) for stack in stacks]

        def stop() -> None:
            for handle in handles:
                handle.remove()

        return stop


@dataclass
class EngineModel(LoadedModel):
    """A checkpoint decoded by another engine: the checkpoint's vocabularies, config and metadata
    read inputs and render outputs, `engine` decodes and scores. Its `model` is built on the meta
    device (shapes only, nothing to compute with): it says what kind of model this is."""

    engine: Engine


def engine_of(loaded: LoadedModel) -> Engine:
    """The engine that decodes for one checkpoint: an EngineModel's own, else ours on its model."""
    return loaded.engine if isinstance(loaded, EngineModel) else TorchEngine(loaded.model)
