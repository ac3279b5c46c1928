"""What each kind of data is: one table, so that code asks a kind's row instead of comparing its
name (data/meta.py declares the names; training's metrics per kind are train/validation.py's)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DataKindRow:
    """What a kind of data means for reading inputs, rendering outputs and evaluating."""

    name: str
    trees: bool  # targets are linearised trees: outputs are rendered as repaired bracketed trees
    labels: bool  # targets are labels, one per sequence or per source token (classifiers)
    own_splits: bool  # `evaluate --split` reads the dataset's own splits (generated examples)


DATA_KINDS: dict[str, DataKindRow] = {
    "text": DataKindRow("text", trees=False, labels=False, own_splits=False),
    "task": DataKindRow("task", trees=False, labels=False, own_splits=True),
    "parse": DataKindRow("parse", trees=True, labels=False, own_splits=False),
    "labels": DataKindRow("labels", trees=False, labels=True, own_splits=True),
}


def data_kind(name: str) -> DataKindRow:
    """The table's row for a dataset's `data_kind` (ValueError naming the kinds there are)."""
    if name not in DATA_KINDS:
        raise ValueError(f"unknown data_kind {name!r}; allowed: {', '.join(DATA_KINDS)}")
    return DATA_KINDS[name]
