"""The JSON bodies of the routes, as pydantic models (the OpenAPI schema is made from them)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TranslateRequest(BaseModel):
    """POST /translate body: every field but `segments` is optional. Strict: JSON's types as
    they are, so `"beam": "4"` or `"beam": true` is a 422, not silently converted."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
    segments: list[str]
    beam: int | None = Field(None, ge=1, le=64)
    alpha: float | None = Field(None, ge=0.0, le=10.0)
    nbest: int = Field(1, ge=1, le=64)
    sample: bool = False  # draw outputs at random instead of beam search
    temperature: float | None = Field(None, gt=0.0, le=100.0)
    top_k: int | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=0, le=2**63 - 1)  # the same seed and segment give the same samples
    num_samples: int = Field(1, ge=1, le=64)

    def outputs(self) -> int:
        """How many outputs each segment gets: a list of them when more than one."""
        return self.num_samples if self.sample else self.nbest


class Translation(BaseModel):
    text: str
    score: float


class TranslateResponse(BaseModel):
    """One entry per segment, in input order; a list per segment when nbest > 1."""

    translations: list[Translation | list[Translation]]


class AttentionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    segment: str = Field(min_length=1)


class AttentionResponse(BaseModel):
    """Greedy translation with the last decoder layer's cross-attention, mean over heads."""

    source: list[str]
    target: list[str]
    weights: list[list[float]]  # (target tokens + EOS) x (source tokens + EOS)
