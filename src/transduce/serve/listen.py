"""Where the server listens, checked before the model loads, and running it with uvicorn."""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass

from fastapi import FastAPI


def is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


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
