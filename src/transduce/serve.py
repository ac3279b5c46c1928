"""`transduce serve`: a REST translation server with dynamic batching and a demo page.

Requests that arrive together are decoded together: the batcher waits up to `max_wait_ms`
after the first queued request for others with the same search options, up to
`max_batch_tokens` source tokens, then decodes them in one call on a single worker thread
(one model, one decoder at a time). A failure while decoding fails only the requests of that
batch; the server keeps running.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .config import DecodeConfig
from .data.source import SourceAnnotation
from .decode.search import Hypothesis
from .decode.translate import decode_all
from .inference import LoadedModel, encode_inputs

PAGE = Path(__file__).with_name("serve_page.html")


class TranslateRequest(BaseModel):
    """POST /translate body: every field but `segments` is optional."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    segments: list[str]
    beam: int | None = Field(None, ge=1, le=64)
    alpha: float | None = Field(None, ge=0.0, le=10.0)
    nbest: int = Field(1, ge=1, le=64)

    @model_validator(mode="after")
    def _nbest_within_beam(self) -> TranslateRequest:
        if self.beam is not None and self.nbest > self.beam:
            raise ValueError(f"nbest ({self.nbest}) must not exceed beam ({self.beam})")
        return self


class Translation(BaseModel):
    text: str
    score: float


class TranslateResponse(BaseModel):
    """One entry per segment, in input order; a list per segment when nbest > 1."""

    translations: list[Translation | list[Translation]]


class AttentionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    segment: str = Field(min_length=1)


class AttentionResponse(BaseModel):
    """Greedy translation with the last decoder layer's cross-attention, mean over heads."""

    source: list[str]
    target: list[str]
    weights: list[list[float]]  # (target tokens + EOS) x (source tokens + EOS)


@dataclass
class Limits:
    max_segments: int = 64
    max_chars: int = 2000
    max_body_bytes: int = 1 << 20
    max_batch_tokens: int = 4096
    max_wait_ms: float = 10.0
    batching: bool = True


@dataclass
class _Job:
    sources: list[list[int]]
    annotations: list[SourceAnnotation] | None
    options: DecodeConfig
    future: asyncio.Future[list[list[Hypothesis]]]
    tokens: int = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = sum(len(s) + 1 for s in self.sources)


class Batcher:
    """Queue of translation jobs, decoded in groups of the same options on one thread."""

    def __init__(self, loaded: LoadedModel, limits: Limits) -> None:
        self.loaded, self.limits = loaded, limits
        self.queue: asyncio.Queue[_Job] = asyncio.Queue()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode")
        self.batches = 0  # decode calls made, for tests and /info

    async def submit(
        self, sources: list[list[int]], annotations: list[SourceAnnotation] | None, options: DecodeConfig
    ) -> list[list[Hypothesis]]:
        job = _Job(sources, annotations, options, asyncio.get_running_loop().create_future())
        await self.queue.put(job)
        return await job.future

    async def run(self) -> None:
        while True:
            jobs = [await self.queue.get()]
            if self.limits.batching:
                jobs += await self._gather_more(jobs[0])
            for group in _by_options(jobs):
                await self._decode(group)

    async def _gather_more(self, first: _Job) -> list[_Job]:
        """Jobs arriving within max_wait_ms of the first, within the token budget."""
        more: list[_Job] = []
        tokens = first.tokens
        deadline = time.monotonic() + self.limits.max_wait_ms / 1000
        while tokens < self.limits.max_batch_tokens:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                job = await asyncio.wait_for(self.queue.get(), left)
            except TimeoutError:
                break
            more.append(job)
            tokens += job.tokens
        return more

    async def _decode(self, jobs: list[_Job]) -> None:
        """Decode jobs together; if that fails, one by one, so only a failing job fails."""
        sources = [s for job in jobs for s in job.sources]
        annotated = jobs[0].annotations is not None
        annotations = [a for job in jobs for a in job.annotations or []] if annotated else None
        loop = asyncio.get_running_loop()
        self.batches += 1
        try:
            results = await loop.run_in_executor(
                self.executor,
                lambda: decode_all(self.loaded.model, sources, jobs[0].options, annotations=annotations),
            )
        except Exception as exc:  # a bad batch never takes the server or other requests down
            if len(jobs) > 1:
                for job in jobs:
                    await self._decode([job])
            elif not jobs[0].future.done():
                jobs[0].future.set_exception(exc)
            return
        start = 0
        for job in jobs:
            if not job.future.done():
                job.future.set_result(results[start : start + len(job.sources)])
            start += len(job.sources)


def _by_options(jobs: list[_Job]) -> list[list[_Job]]:
    groups: dict[str, list[_Job]] = {}
    for job in jobs:
        groups.setdefault(job.options.model_dump_json(), []).append(job)
    return list(groups.values())


class _BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes")


class BodyLimit:
    """ASGI middleware: 413 for a body over `limit` bytes, by its Content-Length before reading
    any of it, or as soon as a streamed body passes the limit, so no request is buffered whole."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            error = _BodyTooLarge(self.limit)
            await JSONResponse({"detail": error.detail}, 413)(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _BodyTooLarge(self.limit)  # FastAPI answers an HTTPException raised while reading
            return message

        await self.app(scope, counted, send)


def _package_version() -> str:
    try:
        return version("transduce")
    except PackageNotFoundError:
        return "unknown"


async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    """422 saying where and what is wrong but not the input: echoing a huge body back costs
    bandwidth, and a NaN or Infinity in it cannot even be written as JSON (that made a 500)."""
    errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    return JSONResponse({"detail": errors}, status_code=422)


def create_app(loaded: LoadedModel, limits: Limits | None = None, api_key: str | None = None) -> FastAPI:
    """The ASGI application serving one loaded model."""
    limits = limits or Limits()
    if api_key == "":
        raise ValueError("the API key is empty; give a non-empty key, or none to serve without one")
    if loaded.config.model.syntax_mask != "none":
        raise ValueError("serving syntax-aware models (which need source trees) is not supported")
    batcher = Batcher(loaded, limits)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        worker = asyncio.create_task(batcher.run())
        yield
        worker.cancel()
        batcher.executor.shutdown(wait=True)

    # No /docs or /redoc: their pages load scripts from a CDN, so they break offline; /openapi.json stays.
    app = FastAPI(
        title="transduce", version=_package_version(), lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes)
    app.state.batcher = batcher

    def check_key(request: Request) -> None:
        if api_key is not None and not _same_key(request.headers.get("x-api-key", ""), api_key):
            raise HTTPException(401, "missing or wrong X-API-Key header")

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/info", dependencies=[Depends(check_key)])
    def info() -> dict:
        return {
            "version": _package_version(),
            "checkpoint": loaded.path.name,  # not the absolute path: it tells clients about the host
            "config": loaded.config.model_dump(mode="json"),
            "src_vocab_size": len(loaded.src_vocab),
            "tgt_vocab_size": len(loaded.tgt_vocab),
            "limits": limits.__dict__,
            "batches_decoded": batcher.batches,
        }

    @app.post("/translate", response_model=TranslateResponse, dependencies=[Depends(check_key)])
    async def translate(body: TranslateRequest) -> TranslateResponse:
        if len(body.segments) > limits.max_segments:
            raise HTTPException(
                413, f"{len(body.segments)} segments; at most {limits.max_segments} per request"
            )
        longest = max((len(s) for s in body.segments), default=0)
        if longest > limits.max_chars:
            raise HTTPException(413, f"a segment has {longest} characters; at most {limits.max_chars}")
        options = loaded.config.decode.model_copy(
            update={
                k: v
                for k, v in {"beam": body.beam, "alpha": body.alpha, "nbest": body.nbest}.items()
                if v is not None
            }
        )
        if options.nbest > options.beam:
            raise HTTPException(422, f"nbest ({options.nbest}) must not exceed beam ({options.beam})")
        try:
            sources, annotations = encode_inputs(loaded, body.segments)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        try:
            results = await batcher.submit(sources, annotations, options)
        except Exception as exc:
            raise HTTPException(500, f"decoding failed: {exc}") from None
        out: list[Translation | list[Translation]] = []
        for hyps in results:
            found = [Translation(text=loaded.tgt_vocab.decode(h.tokens), score=h.score) for h in hyps]
            found = found or [Translation(text="", score=0.0)]
            out.append(found if body.nbest > 1 else found[0])
        return TranslateResponse(translations=out)

    @app.post("/attention", response_model=AttentionResponse, dependencies=[Depends(check_key)])
    async def attention(body: AttentionRequest) -> AttentionResponse:
        if len(body.segment) > limits.max_chars:
            raise HTTPException(
                413, f"the segment has {len(body.segment)} characters; at most {limits.max_chars}"
            )
        try:
            sources, annotations = encode_inputs(loaded, [body.segment])
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        greedy = loaded.config.decode.model_copy(update={"beam": 1, "nbest": 1})
        hyps = await batcher.submit(sources, annotations, greedy)
        target = hyps[0][0].tokens if hyps[0] else []
        loop = asyncio.get_running_loop()
        weights = await loop.run_in_executor(
            batcher.executor, lambda: _cross_attention(loaded, sources[0], target, annotations)
        )
        return AttentionResponse(
            source=[loaded.src_vocab.token(i) for i in sources[0]] + ["</s>"],
            target=[loaded.tgt_vocab.token(i) for i in target] + ["</s>"],
            weights=weights,
        )

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return PAGE.read_text(encoding="utf-8")

    return app


def _cross_attention(
    loaded: LoadedModel, src: list[int], tgt: list[int], annotations: list[SourceAnnotation] | None
) -> list[list[float]]:
    from .attention_plot import collect_attention
    from .data.batching import annotation_tensors

    extra = annotation_tensors(annotations, len(src) + 1) if annotations is not None else {}
    cross = collect_attention(loaded.model, src, tgt, extra)["cross"][-1]  # (heads, n + 1, m + 1)
    return cross.mean(0).tolist()


def _same_key(given: str, expected: str) -> bool:
    """Constant-time comparison, so response timing does not reveal how much of a guess matched."""
    return hmac.compare_digest(given.encode(), expected.encode())


def is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


def api_key_from_env() -> str | None:
    """$TRANSDUCE_API_KEY as set: an empty value is returned as "" so the caller can refuse it
    instead of silently serving without a key."""
    return os.environ.get("TRANSDUCE_API_KEY")
