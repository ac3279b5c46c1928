"""The routes, each a function of its request body and the served model (`app.state.served`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from ..decode.engine import Engine
from ..decode.engines import engine_kind
from ..decode.languages import TargetLanguageError
from ..decode.options import OptionsError, check_min_len, decode_options
from ..decode.pipeline import encode_lines, encode_prefixes, render
from ..decode.search import Hypothesis
from ..decode.torch_engine import checked_prefixes
from ..store.load import LoadedModel
from .auth import require_key
from .jobs import Work
from .limits import Limits, OverBudget, breadth, check_work
from .middleware import StrictJsonRoute
from .scheduler import Batcher, DecodeFailed, Overloaded, Unfinished, wait_for
from .schema import (
    DECODING,
    SEARCH,
    SEARCH_FLAGS,
    Attention,
    AttentionRequest,
    AttentionResponse,
    TranslateRequest,
    TranslateResponse,
    Translation,
)

PAGE = Path(__file__).with_name("page.html")

router = APIRouter(route_class=StrictJsonRoute)
Protected = [Depends(require_key)]


@dataclass
class Served:
    """What the routes serve: the checkpoint that reads inputs and renders outputs, the engine
    decoding with it (or with the ensemble of `members`), the limits and the batcher."""

    loaded: LoadedModel
    engine: Engine
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
        "engine": served.engine.name,
        "attention": engine_kind(served.engine.name).attention,  # whether POST /attention answers
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
    """Translate `segments`, each on its own, with the checkpoint's decoding settings or those given
    (the fields of `translate`'s options, with DecodeConfig's bounds). Answers one translation per
    segment in input order, or a list of them when nbest or num_samples > 1. A setting the chosen
    decoding would ignore (temperature without sample, nbest > 1 with it) is a 422 naming it."""
    loaded = served.loaded
    _check_size(served.limits, body.segments)
    with _unprocessable():
        given = body.given((*DECODING, *SEARCH_FLAGS))
        options = decode_options(loaded.config.decode, **given)
        served.engine.check(options, prefixed=body.prefixes is not None)
        if options.sample and "seed" in given and not served.engine.seeds_each_input:
            raise OptionsError([("seed", _seeds_refused(served.engine))])
        encoded = encode_lines(loaded, body.segments, tgt_lang=body.tgt_lang, src_lang=body.src_lang)
        check_min_len(encoded.sources, options)
        given = (
            encode_prefixes(loaded, body.prefixes, len(body.segments)) if body.prefixes is not None else None
        )
        prefixes = encoded.forced(given)  # a target language's token first (M2M100's convention)
        if prefixes is not None:
            prefixes = checked_prefixes(encoded.sources, prefixes, options)
    work = Work(encoded.sources, encoded.annotations, options, prefixes)
    results = await _decode(served, request, work)
    several = options.num_samples > 1 if options.sample else options.nbest > 1
    out: list[Translation | list[Translation]] = []
    for found in render(loaded, body.segments, results):
        rows = [Translation(text=o.text, score=o.score) for o in found]
        out.append(rows if several else rows[0])
    return TranslateResponse(translations=out)


@router.post("/attention", response_model=AttentionResponse | Attention, dependencies=Protected)
async def attention(
    body: AttentionRequest, request: Request, served: Service
) -> AttentionResponse | Attention:
    """Translate `segments` as /translate does with the same search settings, and give per segment
    the translation and the last decoder layer's cross-attention while writing it (rows: its
    tokens and EOS; columns: the source's). The earlier form, one `segment`, is answered with one
    such object instead of a list."""
    from ..attention_plot import check_plottable

    loaded, texts = served.loaded, body.texts()
    _check_size(served.limits, texts)
    if not engine_kind(served.engine.name).attention:
        raise HTTPException(
            422,
            f"/attention needs the torch engine (`serve --engine torch`); this server decodes with "
            f"{served.engine.name}, which gives no attention weights",
        )
    with _unprocessable():
        check_plottable(loaded.model)
        base = loaded.config.decode
        if base.sample:  # /attention shows a search's translation: beam search where sampling is the default
            base = base.model_copy(update={"search": "beam"})
        options = decode_options(base, **body.given(SEARCH), nbest=1)
        encoded = encode_lines(loaded, texts)
    work = Work(encoded.sources, encoded.annotations, options)
    results = await _decode(served, request, work)
    shown = render(loaded, texts, results)
    maps = [
        await served.batcher.exclusive(lambda i=i: _attention(loaded, work, i, results[i]))
        for i in range(len(texts))
    ]
    found = [Attention(text=out[0].text, **found) for out, found in zip(shown, maps, strict=True)]
    return found[0] if body.segment is not None else AttentionResponse(attentions=found)


@router.get("/", response_class=HTMLResponse)
def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def _seeds_refused(engine: Engine) -> str:
    """Why a request's sampling seed is refused: the engine cannot give a request's segments
    streams of their own, so the seed would not make its samples repeat."""
    return (
        f"{{seed}}: the {engine.name} engine seeds its random generator once for the whole server, so "
        "a request's samples depend on what is decoded beside it and a seed would not repeat them; "
        "leave it out, or serve with --engine torch"
    )


def _check_size(limits: Limits, segments: list[str]) -> None:
    """413 for more segments, or a longer one, than the limits allow."""
    if len(segments) > limits.max_segments:
        raise HTTPException(413, f"{len(segments)} segments; at most {limits.max_segments} per request")
    longest = max((len(s) for s in segments), default=0)
    if longest > limits.max_chars:
        raise HTTPException(413, f"a segment has {longest} characters; at most {limits.max_chars}")


@contextlib.contextmanager
def _unprocessable() -> Iterator[None]:
    """422 for a request the model cannot decode: an OptionsError names the JSON fields at fault
    (as the body's own validation errors do), another ValueError says what is wrong."""
    try:
        yield
    except OptionsError as exc:
        errors = [
            {"loc": ["body", field] if field else ["body"], "msg": message, "type": "value_error"}
            for field, message in exc.messages()
        ]
        raise HTTPException(422, errors) from None
    except TargetLanguageError as exc:  # its message names the command line's options: name the fields
        text = exc.by_field()
        field = "src_lang" if text.startswith("src_lang") else "tgt_lang"
        raise HTTPException(422, [{"loc": ["body", field], "msg": text, "type": "value_error"}]) from None
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None


async def _decode(served: Served, request: Request, work: Work) -> list[list[Hypothesis]]:
    """The hypotheses per source, decoded in turn with other requests: 413 over the work limits,
    503 when the queue is full, the client left or the request timed out, 500 if decoding failed."""
    try:
        check_work(served.limits, work.sources, breadth(work.options))
        job = served.batcher.submit(work)
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


def _attention(loaded: LoadedModel, work: Work, i: int, hyps: list[Hypothesis]) -> dict[str, list]:
    """Segment i's best hypothesis with the last decoder layer's cross-attention over its source,
    mean over heads (nothing for an empty segment); labelled as `transduce attention` labels it:
    rows the tokens written, columns the source's."""
    from ..attention_plot import Example, axis_labels, collect_attention
    from ..data.batching import annotation_tensors

    src = work.sources[i]
    if not src:
        return {"source": [], "target": [], "weights": []}
    extra = {}
    if work.annotations is not None:
        extra = annotation_tensors([work.annotations[i]], len(src) + 1)
    example = Example(src, hyps[0].tokens if hyps else [], extra)
    cross = collect_attention(loaded.model, example)["cross"][-1]  # (heads, n + 1, m + 1)
    rows, cols = axis_labels(example, loaded)["cross"]
    return {"source": cols, "target": rows, "weights": cross.mean(0).tolist()}
