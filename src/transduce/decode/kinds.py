"""How each model kind is decoded: one table, so that a new kind is added in one place.

`decode_all`, `score`, the commands and the attention plots ask a model's `Decoding` what to do
instead of comparing the name of its kind. The model package keeps its own table of what each
kind is made of (model/kinds.py), training its own of how each is trained (train/objective.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Decoding:
    """What decoding does with a model of one kind."""

    name: str  # what messages call it
    gives: str  # what it gives each input, for messages
    labels: bool  # one forward pass gives each input its labels (decode/classify.py), not search
    prompted: bool  # the input is forced as the output's start (a prompt), and left out of the output
    samples: bool  # sampling applies
    prefixes: bool  # forced prefixes apply
    plots: bool  # attention plots: encoder, decoder and cross-attention between input and output

    def refusal(self, what: str, verb: str = "does") -> str:
        """The message refusing `what` ('sampling' does, 'forced prefixes' do) for this kind."""
        return f"{what} {verb} not apply to {self.name}: it gives each input {self.gives}"


DECODINGS: dict[str, Decoding] = {
    "encoder_decoder": Decoding(
        name="an encoder-decoder",
        gives="its best outputs, by search",
        labels=False,
        prompted=False,
        samples=True,
        prefixes=True,
        plots=True,
    ),
    "decoder": Decoding(
        name="a language model",
        gives="the best continuations of it, by search",
        labels=False,
        prompted=True,
        samples=True,
        prefixes=True,
        plots=False,
    ),
    "encoder": Decoding(
        name="a classifier",
        gives="its most probable labels",
        labels=True,
        prompted=False,
        samples=False,
        prefixes=False,
        plots=False,
    ),
}


def decoding_for(kind: str) -> Decoding:
    """The table's row for model.kind `kind` (ValueError naming the kinds there are)."""
    if kind not in DECODINGS:
        raise ValueError(f"unknown model.kind '{kind}'; allowed: {', '.join(DECODINGS)}")
    return DECODINGS[kind]


def decoding_of(model: Any) -> Decoding:
    """The row for a model's kind, or an Ensemble's; anything without a `kind` (a test's reference
    decoder) decodes as an encoder-decoder."""
    return decoding_for(getattr(model, "kind", "encoder_decoder"))
