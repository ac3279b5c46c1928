"""`transduce serve`: a REST translation server with dynamic batching and a demo page.

Requests that arrive together are decoded together: the batcher waits up to `max_wait_ms`
after the first queued request for others with the same search options, then decodes them in
one call on a single worker thread (one model, one decoder at a time). Work is counted in
source tokens x beam: a call holds at most `max_batch_tokens`, so a larger request is decoded
in several calls, taking turns with other requests. A request over its budget is refused
(413); one past its deadline, or arriving at a full queue, gets 503; one whose client left is
dropped. A failure while decoding fails only the requests of that batch; the server keeps
running.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
import os
import queue
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, fields
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from torch import nn

from .config import DecodeConfig
from .data.source import SourceAnnotation
from .decode.pipeline import Loaded, decode_options, decoding_model, encode_lines, render
from .decode.search import Hypothesis
from .decode.shortlist import Shortlist
from .decode.translate import decode_all
from .store.load import LoadedModel

T = TypeVar("T")
PAGE = Path(__file__).with_name("serve_page.html")
POLL_S = 0.1  # how often a waiting request checks for its client gone or its time up


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


@dataclass
class Limits:
    """Bounds on one request and on the work the server takes on; each is the `serve` option of
    the same name. Work is counted in source tokens (with EOS) times beam."""

    max_segments: int = 64
    max_chars: int = 2000
    max_body_bytes: int = 1 << 20
    max_request_tokens: int = 32768
    max_batch_tokens: int = 4096
    max_queued_tokens: int = 65536
    request_timeout: float = 60.0
    max_wait_ms: float = 10.0
    batching: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Limits:
        """The limits from a `serve` command's parsed options, each the option of its name."""
        return cls(**{f.name: options[f.name] for f in fields(cls)})

    def __post_init__(self) -> None:
        """Refuse limits that would fail every request or bound nothing (`--max-segments -1`
        used to start a server that answered 413 to everything)."""
        for name in (
            "max_segments",
            "max_chars",
            "max_body_bytes",
            "max_request_tokens",
            "max_batch_tokens",
            "max_queued_tokens",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{_option(name)} must be a positive integer, not {value!r}")
        if not (math.isfinite(self.request_timeout) and self.request_timeout > 0):
            raise ValueError(
                f"--request-timeout must be a positive number of seconds, not {self.request_timeout}"
            )
        if not (math.isfinite(self.max_wait_ms) and self.max_wait_ms >= 0):
            raise ValueError(f"--max-wait-ms must be a number >= 0, not {self.max_wait_ms}")
        if self.max_queued_tokens < self.max_request_tokens:
            raise ValueError(
                f"--max-queued-tokens ({self.max_queued_tokens}) must be at least --max-request-tokens "
                f"({self.max_request_tokens}), or the largest request allowed could never be queued"
            )


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def segment_work(source: list[int], beam: int) -> int:
    """The decoding cost budgeted for a segment: its tokens with EOS times the beam, or the number
    of samples (an empty segment is not decoded, so 0)."""
    return (len(source) + 1) * beam if source else 0


def breadth(options: DecodeConfig) -> int:
    """Hypotheses decoded side by side per segment: the beam, or the samples when sampling."""
    return options.num_samples if options.sample else options.beam


class Overloaded(Exception):
    """More queued work than `max_queued_tokens`: the request is refused, not queued."""


@dataclass(eq=False)
class _Job:
    """One request's segments; `pending` holds those not yet given to a decode call."""

    sources: list[list[int]]
    annotations: list[SourceAnnotation] | None
    options: DecodeConfig
    future: asyncio.Future[list[list[Hypothesis]]]
    arrived: float = field(default_factory=time.monotonic)
    key: str = field(init=False)  # requests batch together only with the same search options
    pending: deque[int] = field(init=False)
    results: list[list[Hypothesis]] = field(init=False)
    unfinished: int = field(init=False)

    def __post_init__(self) -> None:
        self.key = self.options.model_dump_json()
        self.pending = deque(i for i, s in enumerate(self.sources) if s)
        self.results = [[] for _ in self.sources]
        self.unfinished = len(self.pending)

    def work(self, i: int) -> int:
        return segment_work(self.sources[i], breadth(self.options))

    def queued_work(self) -> int:
        return sum(self.work(i) for i in self.pending)

    def finish(self, taken: list[int], hyps: list[list[Hypothesis]]) -> None:
        for i, h in zip(taken, hyps, strict=True):
            self.results[i] = h
        self.unfinished -= len(taken)
        if self.unfinished == 0 and not self.future.done():
            self.future.set_result(self.results)


class DecodeThread:
    """Runs decode calls one at a time on a daemon thread.

    Not a ThreadPoolExecutor: the interpreter joins those threads at exit, so a long decode kept
    a stopped server's process alive until it ended (over 100 s after SIGTERM). A daemon thread
    is abandoned at exit instead, which bounds shutdown by uvicorn's graceful timeout."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="decode", daemon=True)
        self._thread.start()

    async def call(self, fn: Callable[[], T]) -> T:
        future: Future[T] = Future()
        self._calls.put((fn, future))
        return await asyncio.wrap_future(future)

    def stop(self) -> None:
        """The thread ends after the call in progress, without anyone waiting for it."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, future = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # handed to the waiting request, not lost
                    future.set_exception(exc)


class Batcher:
    """Decodes requests on one thread in bounded calls that take turns between requests.

    A call holds at most `max_batch_tokens` of work: segments of requests with the same search
    options, one segment per request per round, starting with the request whose turn it is.
    The requests served by a call go to the back of the line when it ends, so a request arriving
    behind a large one waits for the call in progress and one call per request ahead of it, not
    for the whole large request. A failed call is retried per request, so only a failing
    request fails.
    """

    def __init__(self, model: nn.Module, limits: Limits, shortlist: Shortlist | None = None) -> None:
        self.model, self.limits, self.shortlist = model, limits, shortlist
        self.line: deque[_Job] = deque()  # requests with segments still to decode, in turn order
        self.changed = asyncio.Event()
        self.thread = DecodeThread()
        self.batches = 0  # decode calls made, for tests and /info
        self.segments = 0  # segments decoded
        self.dropped = 0  # requests given up (client gone, time up) with work left

    def queued_work(self) -> int:
        return sum(job.queued_work() for job in self.line)

    def submit(
        self, sources: list[list[int]], annotations: list[SourceAnnotation] | None, options: DecodeConfig
    ) -> _Job:
        """Queue a request; its future gets the hypotheses per segment. Overloaded if the queue
        would hold more than `max_queued_tokens`."""
        job = _Job(sources, annotations, options, asyncio.get_running_loop().create_future())
        if not job.pending:
            job.future.set_result(job.results)
            return job
        queued = self.queued_work()
        if queued + job.queued_work() > self.limits.max_queued_tokens:
            raise Overloaded(f"{queued} source tokens x beam already queued")
        self.line.append(job)
        self.changed.set()
        return job

    def drop(self, job: _Job) -> None:
        """Forget a request nobody waits for any more: its queued segments are never decoded."""
        if job in self.line:
            self.line.remove(job)
        job.pending.clear()
        if not job.future.done():
            job.future.cancel()
            self.dropped += 1

    async def run(self) -> None:
        while True:
            batch = await self._next_batch()
            await self._decode(batch)
            self._to_back([job for job, _ in batch])

    async def _next_batch(self) -> list[tuple[_Job, list[int]]]:
        """Wait for work; with batching, the request at the head waits up to max_wait_ms from
        its arrival for others with its options, unless a call's worth is already queued."""
        while True:
            self.changed.clear()
            wait = None
            if self.line:
                head = self.line[0]
                wait = head.arrived + self.limits.max_wait_ms / 1000 - time.monotonic()
                if (
                    not self.limits.batching
                    or wait <= 0
                    or self._work_like(head) >= self.limits.max_batch_tokens
                ):
                    return self._take(head)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), wait)

    def _work_like(self, head: _Job) -> int:
        return sum(job.queued_work() for job in self.line if job.key == head.key)

    def _take(self, head: _Job) -> list[tuple[_Job, list[int]]]:
        """Segments for one call, round-robin over the requests like `head` (itself first),
        within max_batch_tokens; the head's first segment is taken whatever its size."""
        jobs = [job for job in self.line if job.key == head.key] if self.limits.batching else [head]
        taken: dict[_Job, list[int]] = {}
        room = self.limits.max_batch_tokens
        took = True
        while took:
            took = False
            for job in jobs:
                if job.pending and (not taken or job.work(job.pending[0]) <= room):
                    room -= job.work(job.pending[0])
                    taken.setdefault(job, []).append(job.pending.popleft())
                    took = True
        return list(taken.items())

    def _to_back(self, served: list[_Job]) -> None:
        for job in served:
            if job in self.line:
                self.line.remove(job)
                if job.pending:
                    self.line.append(job)

    async def _decode(self, batch: list[tuple[_Job, list[int]]]) -> None:
        """Decode the batch in one call; if that fails, each request's part alone."""
        first = batch[0][0]
        sources = [job.sources[i] for job, taken in batch for i in taken]
        numbers = [i for _, taken in batch for i in taken]  # sampling seeds follow a segment's number
        annotations = None
        if first.annotations is not None:  # all or none: they come with the model's input format
            annotations = [job.annotations[i] for job, taken in batch for i in taken]  # type: ignore[index]
        self.batches += 1
        # One budget: the call is already bounded by max_batch_tokens (tokens x beam), so the
        # checkpoint's decode.max_tokens must not split it again.
        options = first.options.model_copy(update={"max_tokens": self.limits.max_batch_tokens})
        try:
            results = await self.thread.call(
                lambda: decode_all(
                    self.model,
                    sources,
                    options,
                    annotations=annotations,
                    numbers=numbers,
                    shortlist=self.shortlist,
                )
            )
        except Exception as exc:  # a bad batch never takes the server or other requests down
            if len(batch) > 1:
                for part in batch:
                    await self._decode([part])
            else:
                self._fail(first, exc)
            return
        self.segments += len(sources)
        start = 0
        for job, taken in batch:
            job.finish(taken, results[start : start + len(taken)])
            start += len(taken)

    def _fail(self, job: _Job, exc: Exception) -> None:
        job.pending.clear()
        if job in self.line:
            self.line.remove(job)
        if not job.future.done():
            job.future.set_exception(exc)


async def outcome(batcher: Batcher, job: _Job, request: Request, timeout: float) -> list[list[Hypothesis]]:
    """The job's hypotheses. A job whose client disconnected or whose `timeout` (seconds from
    arrival) passed is dropped, so no work is done for nobody; the latter answers 503. So does
    a job still waiting when the server's graceful shutdown period ends (uvicorn then cancels
    the request), rather than a 500 with a CancelledError traceback."""
    try:
        while not job.future.done():
            left = job.arrived + timeout - time.monotonic()
            if left <= 0:
                raise HTTPException(
                    503, f"not decoded within {timeout:g} s; try later, or fewer segments or a smaller beam"
                )
            await asyncio.wait({job.future}, timeout=min(left, POLL_S))
            if not job.future.done() and await request.is_disconnected():
                raise HTTPException(503, "the client disconnected")
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and hasattr(task, "uncancel"):  # Python 3.11+: the cancellation is handled
            task.uncancel()
        raise HTTPException(503, "the server is shutting down") from None
    finally:
        if not job.future.done():
            batcher.drop(job)
    try:
        return job.future.result()
    except Exception as exc:
        raise HTTPException(500, f"decoding failed: {exc}") from None


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
    errors = [{"loc": list(e["loc"]), "msg": _message(e), "type": e["type"]} for e in exc.errors()]
    return JSONResponse({"detail": errors}, status_code=422)


def _message(error: Mapping[str, Any]) -> str:
    """A validation error's message; for a body that is not JSON, with the decoder's reason
    (which names a position, never the body's text)."""
    reason = error.get("ctx", {}).get("error") if error["type"] == "json_invalid" else None
    return f"{error['msg']}: {reason}" if reason else error["msg"]


class _JsonRequest(Request):
    """A request whose JSON body fails to decode as a syntax error does whatever the reason (a
    number of more than 4300 digits, Python's limit; bytes that are not UTF-8; nesting too deep),
    so FastAPI answers 422 through `_validation_error`, not 400 for an unexpected exception."""

    async def json(self) -> Any:
        try:
            return await super().json()
        except json.JSONDecodeError:
            raise
        except (ValueError, RecursionError) as exc:
            raise json.JSONDecodeError(str(exc).split(":")[0], "", 0) from None


class _Route(APIRoute):
    """The server's routes: each reads its body as a `_JsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_JsonRequest(request.scope, request.receive))

        return route


def create_app(
    models: Loaded,
    limits: Limits | None = None,
    api_key: str | None = None,
    shortlist: Shortlist | None = None,
) -> FastAPI:
    """The ASGI application serving one loaded model, or the ensemble of several (`shortlist`:
    decode every batch with it)."""
    limits = limits or Limits()
    if api_key == "":
        raise ValueError("the API key is empty; give a non-empty key, or none to serve without one")
    loaded, model = decoding_model(models)
    if loaded.config.model.syntax_mask != "none":
        raise ValueError("serving syntax-aware models (which need source trees) is not supported")
    if shortlist is not None:
        shortlist.projection(model)  # fits, or refuse to start
    members = [models] if isinstance(models, LoadedModel) else list(models)
    batcher = Batcher(model, limits, shortlist)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        worker = asyncio.create_task(batcher.run())
        yield
        worker.cancel()
        batcher.thread.stop()

    # No /docs or /redoc: their pages load scripts from a CDN, so they break offline; /openapi.json stays.
    app = FastAPI(
        title="transduce", version=_package_version(), lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.router.route_class = _Route
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
            "ensemble": [m.path.name for m in members],
            "config": loaded.config.model_dump(mode="json"),
            "src_vocab_size": len(loaded.src_vocab),
            "tgt_vocab_size": len(loaded.tgt_vocab),
            "limits": limits.__dict__,
            "batches_decoded": batcher.batches,
            "segments_decoded": batcher.segments,
            "requests_dropped": batcher.dropped,
            "queued_tokens": batcher.queued_work(),
        }

    def check_work(sources: list[list[int]], beam: int) -> None:
        """413 for a request over its decoding budget, or with a segment too big for one call
        (which could not take turns with other requests)."""
        works = [segment_work(s, beam) for s in sources]
        if max(works, default=0) > limits.max_batch_tokens:
            raise HTTPException(
                413,
                f"a segment of {max(works) // beam - 1} tokens at beam {beam} is {max(works)} source tokens "
                f"x beam; at most {limits.max_batch_tokens} per segment: shorten it or lower the beam",
            )
        if sum(works) > limits.max_request_tokens:
            raise HTTPException(
                413,
                f"the request is {sum(works)} source tokens x beam; at most {limits.max_request_tokens}: "
                "send fewer segments or lower the beam",
            )

    async def decode(
        request: Request,
        sources: list[list[int]],
        annotations: list[SourceAnnotation] | None,
        options: DecodeConfig,
    ) -> list[list[Hypothesis]]:
        check_work(sources, breadth(options))
        try:
            job = batcher.submit(sources, annotations, options)
        except Overloaded as exc:
            raise HTTPException(503, f"server busy ({exc}); try again later") from None
        return await outcome(batcher, job, request, limits.request_timeout)

    @app.post("/translate", response_model=TranslateResponse, dependencies=[Depends(check_key)])
    async def translate(body: TranslateRequest, request: Request) -> TranslateResponse:
        if len(body.segments) > limits.max_segments:
            raise HTTPException(
                413, f"{len(body.segments)} segments; at most {limits.max_segments} per request"
            )
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
        results = await decode(request, encoded.sources, encoded.annotations, options)
        out: list[Translation | list[Translation]] = []
        for found in render(loaded, body.segments, results):
            rows = [Translation(text=o.text, score=o.score) for o in found]
            out.append(rows if body.outputs() > 1 else rows[0])
        return TranslateResponse(translations=out)

    @app.post("/attention", response_model=AttentionResponse, dependencies=[Depends(check_key)])
    async def attention(body: AttentionRequest, request: Request) -> AttentionResponse:
        if len(body.segment) > limits.max_chars:
            raise HTTPException(
                413, f"the segment has {len(body.segment)} characters; at most {limits.max_chars}"
            )
        from .attention_plot import check_plottable

        try:
            check_plottable(loaded.model)
            encoded = encode_lines(loaded, [body.segment])
            sources, annotations = encoded.sources, encoded.annotations
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        greedy = loaded.config.decode.model_copy(update={"beam": 1, "nbest": 1})
        hyps = await decode(request, sources, annotations, greedy)
        target = hyps[0][0].tokens if hyps[0] else []
        weights = await batcher.thread.call(lambda: _cross_attention(loaded, sources[0], target, annotations))
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
    from .attention_plot import Example, collect_attention
    from .data.batching import annotation_tensors

    extra = annotation_tensors(annotations, len(src) + 1) if annotations is not None else {}
    cross = collect_attention(loaded.model, Example(src, tgt, extra))["cross"][-1]  # (heads, n + 1, m + 1)
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


def server_api_key(given: str | None) -> str | None:
    """The X-API-Key to require: `given` (--api-key), else $TRANSDUCE_API_KEY, else None (no
    key). An empty key is a ValueError: it would look like protection and be none."""
    key = given if given is not None else api_key_from_env()
    if key == "":
        source = "--api-key" if given is not None else "TRANSDUCE_API_KEY"
        raise ValueError(f"{source} is empty; give a non-empty key, or leave it out to serve without one")
    return key


@dataclass
class Listen:
    """Where the server listens and how long in-flight requests may finish on SIGINT/SIGTERM;
    each is the `serve` option of the same name."""

    host: str = "127.0.0.1"
    port: int = 8000
    graceful_seconds: float = 10.0

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be in 0..65535, not {self.port}")
        if not (math.isfinite(self.graceful_seconds) and self.graceful_seconds >= 0):
            raise ValueError(f"--graceful-seconds must be a number >= 0, not {self.graceful_seconds}")


def check_listen(listen: Listen) -> None:
    """Bind, and release, each address uvicorn will listen on (as asyncio binds them), so that a
    bad host or a port in use is a ValueError before the model loads, not uvicorn's log and exit
    status 3 after. (Another process taking the port in between still meets uvicorn's error.)"""
    try:
        infos = socket.getaddrinfo(listen.host, listen.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in set(infos):
            with socket.socket(family, kind, proto) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
    except (OSError, UnicodeError) as exc:  # UnicodeError: a host name that is not valid IDNA
        reason = getattr(exc, "strerror", None) or exc
        raise ValueError(f"cannot listen on {listen.host}:{listen.port}: {reason}") from None


def run_server(app: FastAPI, listen: Listen) -> None:
    """Serve `app` with uvicorn until SIGINT/SIGTERM, then give in-flight requests
    `graceful_seconds` to finish."""
    import uvicorn

    uvicorn.run(
        app,
        host=listen.host,
        port=listen.port,
        log_level="info",
        timeout_graceful_shutdown=listen.graceful_seconds,
    )
