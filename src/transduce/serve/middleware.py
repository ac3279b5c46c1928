"""What every request passes through before a route: the body limit, JSON read strictly, and
422s that say what is wrong without echoing the input."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class _BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes")


class BodyLimit:
    """ASGI middleware: 413 for a body over `limit` bytes, by its Content-Length before reading
    any of it, or as soon as a streamed body passes the limit, so no request is buffered whole.
    The route that reads the body answers it (through the app's handlers, so the
    LibreTranslate-compatible API answers in its own shape); a route that reads no body never
    sees it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:

            async def refused() -> Message:  # the route reading the body answers, in its API's shape
                raise _BodyTooLarge(self.limit)

            await self.app(scope, refused, send)
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


async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
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
    so FastAPI answers 422 through `validation_error`, not 400 for an unexpected exception."""

    async def json(self) -> Any:
        try:
            return await super().json()
        except json.JSONDecodeError:
            raise
        except (ValueError, RecursionError) as exc:
            raise json.JSONDecodeError(str(exc).split(":")[0], "", 0) from None


class StrictJsonRoute(APIRoute):
    """The server's routes: each reads its body as a `_JsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_JsonRequest(request.scope, request.receive))

        return route
