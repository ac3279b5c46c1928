"""Typed metadata that crosses files: a dataset's `meta.json`, and the facts about its data that
a checkpoint keeps so that it decodes on its own. Validated on load, like the config: a
damaged or unknown field is an error naming it, never a KeyError later."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..config import TaskName
from .kinds import DATA_KINDS
from .languages import LanguagePair
from .source import SourceFormat

FORMAT_VERSION = 1
# text: parallel text; task: generated seq2seq tasks; parse: treebanks; labels: classification
DataKind = Literal["text", "task", "parse", "labels"]
LabelUnit = Literal["sequence", "token"]  # labelled data: one label per sequence or per source token

# Names earlier versions wrote, and the names they have now.
RENAMED = {"kind": "data_kind", "root": "parse_root"}
DROPPED = ("shared_vocab",)  # now read from the files: a `tgt.*` vocabulary exists or not


class MetaError(ValueError):
    """Metadata that is missing, malformed or of another format."""


class DataFacts(BaseModel):
    """What a model needs to know about its training data to read input and render output."""

    model_config = ConfigDict(extra="forbid")

    data_kind: DataKind = "text"
    task: TaskName | None = None  # generated tasks
    parse_root: str | None = None  # parsing: the most common root label, for repaired trees
    label_unit: LabelUnit | None = None  # labelled data: what each label belongs to
    source: SourceFormat = Field(default_factory=SourceFormat)
    # a multilingual dataset's pairs, in the order of their ids in {split}.pair.npy; none: one pair
    languages: list[LanguagePair] = Field(default_factory=list)
    src_vocab_size: int = Field(ge=4, strict=True)  # strict: a string or float is a damaged file
    tgt_vocab_size: int = Field(ge=4, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _earlier_names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {RENAMED.get(k, k): v for k, v in data.items() if k not in DROPPED}
            if data.get("source") is None:
                data.pop("source", None)
        return data

    @model_validator(mode="after")
    def _labels_have_a_unit(self) -> DataFacts:
        if DATA_KINDS[self.data_kind].labels != (self.label_unit is not None):
            raise ValueError("label_unit is set for labelled data (data_kind 'labels') and only for it")
        return self


class DatasetMeta(DataFacts):
    """A prepared dataset's `meta.json` (written last, so its presence means complete)."""

    format: Literal[1] = FORMAT_VERSION
    hash: str  # of the inputs and options: equal hashes mean `prepare` has nothing to do
    splits: list[str]
    sizes: dict[str, Annotated[int, Field(ge=0, strict=True)]]
    factors: int = Field(0, ge=0, strict=True)  # factored input: tag vocabularies src.factor0..k-1
    options: dict[str, Any] | None = None  # prepare's options, as given
    report: dict[str, Any] | None = None  # per split: pairs kept and skipped, and why


def read_model(path: Path, model: type[BaseModel]) -> Any:
    """Validate a JSON file into `model`; any problem is a MetaError naming the file and field."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MetaError(f"{path}: unreadable metadata ({exc})") from None
    return validate(data, model, path)


def validate(data: Any, model: type[BaseModel], path: Path) -> Any:
    """`data` as `model`, or a one-line MetaError naming the file and the bad fields."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'top level'}: {e['msg']}" for e in exc.errors()
        )
        raise MetaError(f"{path}: invalid metadata: {problems}") from None
