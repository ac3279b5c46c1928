"""Serving: `serve` a checkpoint over HTTP (the server itself is transduce.serve)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer

from .common import (
    Checkpoints,
    Device,
    EngineOption,
    Quantize,
    ShortlistFile,
    StaticCache,
    Threads,
    app,
    console,
    engine_honours,
    fail,
    loaded_models,
    read_shortlist,
    user_errors,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..decode.shortlist import Shortlist
    from ..serve import Limits, Listen
    from ..store.languages import Languages
    from ..store.load import LoadedModel


ApiKey = Annotated[
    str | None,
    typer.Option(help="Require this X-API-Key header (default: $TRANSDUCE_API_KEY); empty: error."),
]
SourceLang = Annotated[
    str | None,
    typer.Option(
        help="The source language's code for the LibreTranslate-compatible API (default: the checkpoint's: "
        "its dataset's prepare --src, a multilingual model's pairs)."
    ),
]
TargetLang = Annotated[
    str | None,
    typer.Option(help="The target language's code for the LibreTranslate-compatible API (as --source-lang)."),
]


@app.command()
def serve(
    ctx: typer.Context,
    checkpoints: Checkpoints,
    host: Annotated[str, typer.Option(help="Address to bind; loopback by default.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    api_key: ApiKey = None,
    max_segments: Annotated[int, typer.Option(help="Most segments per request (more: 413).")] = 64,
    max_chars: Annotated[int, typer.Option(help="Most characters per segment (more: 413).")] = 2000,
    max_body_bytes: Annotated[
        int, typer.Option(help="Largest request body in bytes (more: 413, read no further).")
    ] = 1 << 20,
    max_request_tokens: Annotated[
        int, typer.Option(help="Most work per request, in source tokens (with EOS) x beam (more: 413).")
    ] = 32768,
    max_batch_tokens: Annotated[
        int,
        typer.Option(
            help="Most work per decode call (source tokens x beam), so also per segment (more: 413); "
            "larger requests are decoded in such calls, taking turns with other requests."
        ),
    ] = 4096,
    max_queued_tokens: Annotated[
        int, typer.Option(help="Most work waiting to be decoded (source tokens x beam); more: 503.")
    ] = 65536,
    request_timeout: Annotated[
        float,
        typer.Option(help="Seconds a request may take, queueing included (more: 503, its work dropped)."),
    ] = 60.0,
    max_wait_ms: Annotated[
        float, typer.Option(help="How long the first queued request waits for others to batch with.")
    ] = 10.0,
    batching: Annotated[bool, typer.Option(help="Dynamic batching of concurrent requests.")] = True,
    graceful_seconds: Annotated[
        float,
        typer.Option(
            help="On SIGINT/SIGTERM, how long in-flight requests may still finish; then the rest get 503 "
            "and the process exits, even mid-decode."
        ),
    ] = 10.0,
    receive_timeout: Annotated[
        float,
        typer.Option(
            help="Seconds a client has to send a whole request (headers and body), from connecting or "
            "from its first byte; a slower connection is closed."
        ),
    ] = 10.0,
    threads: Threads = None,
    quantize: Quantize = "none",
    device: Device = "auto",
    shortlist: ShortlistFile = None,
    static_cache: StaticCache = False,
    engine: EngineOption = "torch",
    source_lang: SourceLang = None,
    target_lang: TargetLang = None,
) -> None:
    """A REST translation server: POST /translate, /attention; GET /health, /info, / (demo page);
    a LibreTranslate-compatible API under /libretranslate/ (POST /translate, GET /languages).

    Several checkpoints are served as their ensemble (/attention shows the first one's weights).
    With --engine ctranslate2, requests are batched, bounded and answered as on the torch engine;
    calls take turns between batches instead of between decoding steps, /attention is refused
    (CTranslate2 gives no attention weights here) and so is a request's sampling seed.
    The OpenAPI schema is at /openapi.json (no /docs page: it would load its scripts from a CDN)."""
    from ..serve import Limits, Listen, check_listen, run_server, server_api_key

    with user_errors(ValueError):
        key = server_api_key(api_key)
        listen = Listen(host, port, graceful_seconds, receive_timeout)
        limits = Limits.from_options(ctx.params)  # --max-segments to --batching, by name
        check_listen(listen)
    _warn_if_open(host, key)
    engine_honours(engine, static_cache=static_cache)
    listed = read_shortlist(shortlist)
    loaded = loaded_models(checkpoints, quantize, threads, device, engine, listed)
    if static_cache:
        loaded = _with_static_cache(loaded)
    run_server(_application(loaded, limits, key, listed, listen, source_lang, target_lang), listen)


def _application(
    loaded: list[LoadedModel],
    limits: Limits,
    key: str | None,
    listed: Shortlist | None,
    listen: Listen,
    source: str | None,
    target: str | None,
) -> FastAPI:
    """The app, its languages named where the user gives them (else the checkpoint's), and a line
    saying where the LibreTranslate-compatible API is."""
    from ..serve import create_app
    from ..store.languages import model_languages

    with user_errors(ValueError):
        named = source is not None or target is not None  # an empty code too: refused, not read as none
        given = model_languages(loaded[0], source, target) if named else None
        application = create_app(loaded, limits, key, listed, given)
    _say_languages(application.state.languages, listen)
    return application


def _say_languages(languages: Languages | None, listen: Listen) -> None:
    """Where the LibreTranslate-compatible API is and what it translates, or how to name that."""
    host = f"[{listen.host}]" if ":" in listen.host else listen.host
    where = f"http://{host}:{listen.port}/libretranslate/"
    if languages is None:
        console.print(
            f"LibreTranslate-compatible API at {where}: the model's languages are unknown; "
            "give --source-lang and --target-lang to use it"
        )
        return
    pairs = ", ".join(f"{s} -> {t}" for s, t in languages.pairs)
    console.print(f"LibreTranslate-compatible API at {where}: {pairs} (from {languages.origin})")


def _warn_if_open(host: str, key: str | None) -> None:
    """A warning when the server listens beyond this machine to anyone."""
    from ..serve import is_loopback

    if not is_loopback(host) and key is None:
        console.print(
            f"[yellow]warning:[/] serving on {host} without an API key; anyone who can reach it may use it "
            "(set --api-key or TRANSDUCE_API_KEY)"
        )


def _with_static_cache(loaded: list[LoadedModel]) -> list[LoadedModel]:
    """The checkpoints with `static_cache` as their decoding default, so every request decodes
    with it; a model that cannot is refused before the server starts."""
    from ..decode.options import OptionsError, check_for_model
    from ..decode.pipeline import decoding_model

    changed = [
        replace(
            m,
            config=m.config.model_copy(
                update={"decode": m.config.decode.model_copy(update={"static_cache": True})}
            ),
        )
        for m in loaded
    ]
    try:
        check_for_model(decoding_model(changed)[1], changed[0].config.decode)
    except OptionsError as exc:
        fail(exc.describe(lambda field: "--" + field.replace("_", "-")))
    return changed
