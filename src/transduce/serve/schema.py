"""The JSON bodies of the routes, as pydantic models (the OpenAPI schema is made from them).

The decoding fields of a request are made from `DecodeConfig`'s: the same names, bounds and
descriptions, so the server cannot drift from the command line and the checkpoint's config.
What the API leaves out, and where the server is stricter, is said here, once.
"""

from __future__ import annotations

from typing import Annotated, Any

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from ..config import DecodeConfig

# Bounds stricter than DecodeConfig's: the work one request may ask of a shared server.
SERVER_BOUNDS: dict[str, int] = {"beam": 64, "nbest": 64, "num_samples": 64}

# Decoding options of `translate` (its options and DecodeConfig's fields) the API has not, and why.
# Options `serve` itself takes (--threads, --quantize, --device, --shortlist) hold for every request.
NOT_IN_API: dict[str, str] = {
    "max_tokens": "the server bounds every decode call by `serve --max-batch-tokens` (tokens x beam)",
    "max_src_len": "a segment over `serve --max-chars` or the work limits is refused (413), never cut",
    "src_trees": "syntax-aware models, which read source trees, are not served",
    "input": "the request body carries the segments",
    "output": "the response body carries the translations",
    "static_cache": "a server setting, not a request's: `serve --static-cache` decodes every request so",
}

# `translate`'s options that the API names otherwise: a file of lines there, a list here.
RENAMED: dict[str, str] = {"prefix": "prefixes"}

SEARCH = ("beam", "alpha", "max_len_a", "max_len_b", "min_len")  # what /attention decodes with
SEARCH_FLAGS = ("greedy", "sample")  # `search` as the command line's flags spell it, true or false
DECODING = tuple(name for name in DecodeConfig.model_fields if name not in NOT_IN_API)


def _bounded(name: str, metadata: list[Any]) -> list[Any]:
    """A field's constraints with the server's stricter upper bound, if it has one."""
    cap = SERVER_BOUNDS.get(name)
    if cap is None:
        return metadata
    kept = [m for m in metadata if not isinstance(m, annotated_types.Le)]
    bounds = [m.le for m in metadata if isinstance(m, annotated_types.Le)]
    return [*kept, annotated_types.Le(min([cap, *bounds]))]


def _decoding_fields(names: tuple[str, ...]) -> dict[str, Any]:
    """DecodeConfig's fields `names`, each optional (absent: the checkpoint's setting)."""
    fields: dict[str, Any] = {}
    for name in names:
        source = DecodeConfig.model_fields[name]
        description = source.description or name
        if name in SERVER_BOUNDS:
            description += f" (this server: at most {SERVER_BOUNDS[name]})"
        bounds = _bounded(name, source.metadata)
        constrained = Annotated[(source.annotation, *bounds)] if bounds else source.annotation
        fields[name] = (constrained | None, Field(None, description=description))
    return fields


class _Body(BaseModel):
    """Strict: JSON's types as they are, so `"beam": "4"` or `"beam": true` is a 422, not
    silently converted; unknown fields are a 422 too."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    def given(self, names: tuple[str, ...]) -> dict[str, Any]:
        """The decoding settings the request gives (the others are the checkpoint's)."""
        return {name: value for name in names if (value := getattr(self, name)) is not None}


class _TranslateBody(_Body):
    segments: list[str] = Field(description="the texts to translate, one output (or list) each")
    prefixes: list[str] | None = Field(
        None,
        description="per segment, target text every output of it starts with (search continues "
        'after it; "" forces nothing); as many as segments',
    )
    tgt_lang: str | None = Field(
        None,
        description="a multilingual model: the language to translate into, for the segments that do not "
        "start with one of its tags",
    )
    src_lang: str | None = Field(
        None,
        description="with tgt_lang, for a model that reads the source language from a token (M2M100, "
        "NLLB): the segments' language",
    )
    greedy: bool | None = Field(None, description='greedy search instead of beam search (search: "greedy")')
    sample: bool | None = Field(None, description='draw outputs at random (search: "sample")')

    @model_validator(mode="after")
    def _a_prefix_per_segment(self) -> _TranslateBody:
        if self.prefixes is not None and len(self.prefixes) != len(self.segments):
            raise ValueError(f"{len(self.prefixes)} prefixes for {len(self.segments)} segments")
        return self


TranslateRequest = create_model(
    "TranslateRequest",
    __base__=_TranslateBody,
    __doc__="POST /translate body: `segments`, and optionally decoding settings (the checkpoint's "
    "when absent), DecodeConfig's fields with its bounds (stricter ones: SERVER_BOUNDS).",
    **_decoding_fields(DECODING),
)


class Translation(BaseModel):
    text: str
    score: float


class TranslateResponse(BaseModel):
    """One entry per segment, in input order; a list per segment when nbest or num_samples > 1."""

    translations: list[Translation | list[Translation]]


class _AttentionBody(_Body):
    segments: list[str] | None = Field(None, description="the texts to translate and show attention for")
    segment: str | None = Field(
        None,
        min_length=1,
        description='the earlier form: one text, answered with one object instead of "attentions"',
    )

    @model_validator(mode="after")
    def _segments_or_segment(self) -> _AttentionBody:
        if (self.segments is None) == (self.segment is None):
            raise ValueError('give "segments" (a list of texts), or "segment" (one text)')
        return self

    def texts(self) -> list[str]:
        return self.segments if self.segments is not None else [self.segment or ""]


AttentionRequest = create_model(
    "AttentionRequest",
    __base__=_AttentionBody,
    __doc__="POST /attention body: `segments`, and optionally the search settings of /translate.",
    **_decoding_fields(SEARCH),
)


class Attention(BaseModel):
    """A segment's translation, as /translate gives it with the same settings, and the last decoder
    layer's cross-attention while writing it (mean over heads); all empty for an empty segment."""

    text: str
    source: list[str]  # source tokens + EOS: the columns
    target: list[str]  # the translation's tokens + EOS: the rows
    weights: list[list[float]]  # (target tokens + EOS) x (source tokens + EOS)


class AttentionResponse(BaseModel):
    """One entry per segment, in input order."""

    attentions: list[Attention]
