"""Serving: `serve` a checkpoint over HTTP (the server itself is transduce.serve)."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import (
    Checkpoints,
    Device,
    Quantize,
    ShortlistFile,
    Threads,
    app,
    console,
    loaded_models,
    read_shortlist,
    user_errors,
)


@app.command()
def serve(
    ctx: typer.Context,
    checkpoints: Checkpoints,
    host: Annotated[str, typer.Option(help="Address to bind; loopback by default.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(help="Require this X-API-Key header (default: $TRANSDUCE_API_KEY); empty: error."),
    ] = None,
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
) -> None:
    """A REST translation server: POST /translate, /attention; GET /health, /info, / (demo page).

    Several checkpoints are served as their ensemble (/attention shows the first one's weights).
    The OpenAPI schema is at /openapi.json (no /docs page: it would load its scripts from a CDN)."""
    from ..serve import Limits, Listen, check_listen, create_app, is_loopback, run_server, server_api_key

    with user_errors(ValueError):
        key = server_api_key(api_key)
        listen = Listen(host, port, graceful_seconds, receive_timeout)
        limits = Limits.from_options(ctx.params)  # --max-segments to --batching, by name
        check_listen(listen)
    if not is_loopback(host) and key is None:
        console.print(
            f"[yellow]warning:[/] serving on {host} without an API key; anyone who can reach it may use it "
            "(set --api-key or TRANSDUCE_API_KEY)"
        )
    loaded = loaded_models(checkpoints, quantize, threads, device)
    listed = read_shortlist(shortlist)
    with user_errors(ValueError):
        application = create_app(loaded, limits, key, listed)
    run_server(application, listen)
