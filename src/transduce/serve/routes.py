"""The routes, each a function of its request body and the served model (`app.state.served`)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from torch import nn

from ..config import DecodeConfig
from ..data.source import SourceAnnotation
from ..decode.pipeline import decode_options, encode_lines, render
from ..decode.search import Hypothesis
from ..store.load import LoadedModel
from .auth import require_key
from .limits import Limits, OverBudget, breadth, check_work
from .middleware import StrictJsonRoute
from .scheduler import Batcher, DecodeFailed, Overloaded, Unfinished, wait_for
from .schema import AttentionRequest, AttentionResponse, TranslateRequest, TranslateResponse, Translation

PAGE = Path(__file__).with_name("page.html")

router = APIRouter(route_class=StrictJsonRoute)
Protected = [Depends(require_key)]


@dataclass
class Served:
    """What the routes serve: the checkpoint that reads inputs and renders outputs, the model
    decoded with (it, or the ensemble of `members`), the limits and the batcher."""

    loaded: LoadedModel
    model: nn.Module
    members: list[LoadedModel]
    limits: Limits
    batcher: Batcher


def _served(request: Request) -> Served:
    return request.app.state.served


Service = Annotated[Served, Depends(_served)]


def package_version() -> str:
    try:
        return version("transduce")
    except PackageNotFoundError:
        return "unknown"


@router.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/info", dependencies=Protected)
def info(served: Service) -> dict:
    loaded, batcher = served.loaded, served.batcher
    return {
        "version": package_version(),
        "checkpoint": loaded.path.name,  # not the absolute path: it tells clients about the host
        "ensemble": [m.path.name for m in served.members],
        "config": loaded.config.model_dump(mode="json"),
        "src_vocab_size": len(loaded.src_vocab),
        "tgt_vocab_size": len(loaded.tgt_vocab),
        "limits": served.limits.__dict__,
        "batches_decoded": batcher.batches,
        "segments_decoded": batcher.segments,
        "requests_dropped": batcher.dropped,
        "queued_tokens": batcher.queued_work(),
    }


@router.post("/translate", response_model=TranslateResponse, dependencies=Protected)
async def translate(body: TranslateRequest, request: Request, served: Service) -> TranslateResponse:
    limits, loaded = served.limits, served.loaded
    if len(body.segments) > limits.max_segments:
        raise HTTPException(413, f"{len(body.segments)} segments; at most {limits.max_segments} per request")
    longest = max((len(s) for s in body.segments), default=0)
    if longest > limits.max_chars:
        raise HTTPException(413, f"a segment has {longest} characters; at most {limits.max_chars}")
    try:
        options = decode_options(
            loaded.config.decode,
            beam=body.beam,
            alpha=body.alpha,
            nbest=body.nbest,
            sample=body.sample,
            temperature=body.temperature,
            top_k=body.top_k,
            top_p=body.top_p,
            seed=body.seed,
            num_samples=body.num_samples,
        )
        encoded = encode_lines(loaded, body.segments)
    except ValueError as exc:  # ConfigError too
        raise HTTPException(422, str(exc)) from None
    results = await _decode(served, request, encoded.sources, encoded.annotations, options)
    out: list[Translation | list[Translation]] = []
    for found in render(loaded, body.segments, results):
        rows = [Translation(text=o.text, score=o.score) for o in found]
        out.append(rows if body.outputs() > 1 else rows[0])
    return TranslateResponse(translations=out)


@router.post("/attention", response_model=AttentionResponse, dependencies=Protected)
async def attention(body: AttentionRequest, request: Request, served: Service) -> AttentionResponse:
    limits, loaded = served.limits, served.loaded
    if len(body.segment) > limits.max_chars:
        raise HTTPException(
            413, f"the segment has {len(body.segment)} characters; at most {limits.max_chars}"
        )
    from ..attention_plot import check_plottable

    try:
        check_plottable(loaded.model)
        encoded = encode_lines(loaded, [body.segment])
        sources, annotations = encoded.sources, encoded.annotations
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    greedy = loaded.config.decode.model_copy(update={"beam": 1, "nbest": 1})
    hyps = await _decode(served, request, sources, annotations, greedy)
    target = hyps[0][0].tokens if hyps[0] else []
    weights = await served.batcher.thread.call(
        lambda: _cross_attention(loaded, sources[0], target, annotations)
    )
    return AttentionResponse(
        source=[loaded.src_vocab.token(i) for i in sources[0]] + ["</s>"],
        target=[loaded.tgt_vocab.token(i) for i in target] + ["</s>"],
        weights=weights,
    )


@router.get("/", response_class=HTMLResponse)
def page() -> str:
    return PAGE.read_text(encoding="utf-8")


async def _decode(
    served: Served,
    request: Request,
    sources: list[list[int]],
    annotations: list[SourceAnnotation] | None,
    options: DecodeConfig,
) -> list[list[Hypothesis]]:
    """The hypotheses per source, decoded in turn with other requests: 413 over the work limits,
    503 when the queue is full, the client left or the request timed out, 500 if decoding failed."""
    try:
        check_work(served.limits, sources, breadth(options))
        job = served.batcher.submit(sources, annotations, options)
    except OverBudget as exc:
        raise HTTPException(413, str(exc)) from None
    except Overloaded as exc:
        raise HTTPException(503, f"server busy ({exc}); try again later") from None
    try:
        return await wait_for(served.batcher, job, served.limits.request_timeout, request.is_disconnected)
    except Unfinished as exc:
        raise HTTPException(503, str(exc)) from None
    except DecodeFailed as exc:
        raise HTTPException(500, str(exc)) from None


def _cross_attention(
    loaded: LoadedModel, src: list[int], tgt: list[int], annotations: list[SourceAnnotation] | None
) -> list[list[float]]:
    from ..attention_plot import Example, collect_attention
    from ..data.batching import annotation_tensors

    extra = annotation_tensors(annotations, len(src) + 1) if annotations is not None else {}
    cross = collect_attention(loaded.model, Example(src, tgt, extra))["cross"][-1]  # (heads, n + 1, m + 1)
    return cross.mean(0).tolist()
