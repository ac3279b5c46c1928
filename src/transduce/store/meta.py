"""A checkpoint's metadata (`config.json` beside the weights), typed and validated on load."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..data.meta import DataFacts


class DataIdentity(BaseModel):
    """What a resumed run must find unchanged: the token ids and the examples. The dataset's hash
    is of what `prepare` read; the arrays' is of what it wrote, so it sees arrays edited later
    (None in checkpoints written before it was recorded)."""

    model_config = ConfigDict(extra="forbid")
    vocab_sha256: str
    dataset_hash: str | None = None
    arrays_sha256: str | None = None


class Averaged(BaseModel):
    """One checkpoint that went into an average."""

    model_config = ConfigDict(extra="forbid")
    checkpoint: str
    step: int = Field(ge=0)


class InitSource(BaseModel):
    """Where a fine-tuning run's first weights came from (`train --init-from`)."""

    model_config = ConfigDict(extra="forbid")
    checkpoint: str
    step: int = Field(ge=0)
    kept_optimizer: bool = False
    kept_step: bool = False


class CheckpointMeta(DataFacts):
    """Everything in `config.json`: the config, the data facts, and how the weights came to be."""

    config: dict[str, Any] = Field(default_factory=dict)  # validated by config.build_config
    step: int = Field(0, ge=0)
    factor_vocab_sizes: list[int] = Field(default_factory=list)  # factored input: tag vocabularies
    metrics: dict[str, float] = Field(default_factory=dict)  # the last validation's, if any
    checksums: dict[str, str] = Field(default_factory=dict)  # sha256 of every tensor file
    data_identity: DataIdentity | None = None
    imported_from: str | None = None  # `import marian`: the source directory's name
    averaged_from: list[Averaged] = Field(default_factory=list)  # `average`: what it averaged
    initialised_from: InitSource | None = None  # `train --init-from`: the starting weights
