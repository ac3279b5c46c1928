"""Where the server listens, checked before the model loads, and running it with uvicorn."""

from __future__ import annotations

import asyncio
import math
import socket
from dataclasses import dataclass
from typing import Any

import h11
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol


def is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


@dataclass
class Listen:
    """Where the server listens and how long in-flight requests may finish on SIGINT/SIGTERM;
    each is the `serve` option of the same name."""

    host: str = "127.0.0.1"
    port: int = 8000
    graceful_seconds: float = 10.0
    receive_timeout: float = 10.0

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be in 0..65535, not {self.port}")
        if not (math.isfinite(self.graceful_seconds) and self.graceful_seconds >= 0):
            raise ValueError(f"--graceful-seconds must be a number >= 0, not {self.graceful_seconds}")
        if not (math.isfinite(self.receive_timeout) and self.receive_timeout > 0):
            raise ValueError(
                f"--receive-timeout must be a positive number of seconds, not {self.receive_timeout}"
            )


class ReceiveDeadline(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on receiving each request: a connection that
    has not sent a whole request (headers and body) `receive_timeout` seconds after it opened, or
    after the first byte of a request, is closed. uvicorn bounds only the idle time between
    requests, so connections fed a byte at a time used to stay open for ever, each holding a
    socket and a buffer. Set by `subclass_for`; the time to decode and answer is not counted."""

    receive_timeout = 10.0
    _deadline: asyncio.TimerHandle | None = None

    @classmethod
    def subclass_for(cls, receive_timeout: float) -> type[ReceiveDeadline]:
        return type(cls.__name__, (cls,), {"receive_timeout": receive_timeout})

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start()

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self._receiving():
            self._start()  # the first byte of the next request
        super().data_received(data)
        if not self._receiving():
            self._stop()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop()
        super().connection_lost(exc)

    def _receiving(self) -> bool:
        """Whether a request is still to come in whole: none started yet, or its body unfinished."""
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY)

    def _start(self) -> None:
        self._stop()
        self._deadline = self.loop.call_later(self.receive_timeout, self._too_slow)

    def _stop(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self._receiving() and not self.transport.is_closing():
            self.transport.close()  # a route still reading the body sees the client gone


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


def uvicorn_settings(listen: Listen) -> dict[str, Any]:
    """uvicorn's settings (`uvicorn.run`'s or `uvicorn.Config`'s keywords) for `listen`."""
    return {
        "host": listen.host,
        "port": listen.port,
        "http": ReceiveDeadline.subclass_for(listen.receive_timeout),
        "timeout_graceful_shutdown": listen.graceful_seconds,
    }


def run_server(app: FastAPI, listen: Listen) -> None:
    """Serve `app` with uvicorn until SIGINT/SIGTERM, then give in-flight requests
    `graceful_seconds` to finish."""
    import uvicorn

    uvicorn.run(app, log_level="info", **uvicorn_settings(listen))
