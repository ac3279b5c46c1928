"""LibreTranslate's error shape on the compatible API: `{"error": "..."}` with its status codes.

Under PREFIX every error is answered so, whoever raised it: the compatible routes themselves,
the decoding path they share with our own /translate, the body limit, the router (404). Our
codes that LibreTranslate does not use become the one it uses for the same case (STATUS); its
clients know 400 (a bad request), 403 (a bad key), 429 (slow down) and 500. Elsewhere the server
answers as it always has (`{"detail": ...}`).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

PREFIX = "/libretranslate"
STATUS = {
    413: 400,  # over a limit: LibreTranslate's "exceeds text limit" is a 400
    422: 400,  # settings the model cannot decode with
    503: 429,  # queue full or past its deadline: try again later
}


def under_prefix(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def message(detail: Any) -> str:
    """An error's detail as one line: our 422s list their errors (field and message)."""
    if isinstance(detail, list):
        return "; ".join(
            f"{e['loc'][-1]}: {e['msg']}" if len(e.get("loc", [])) > 1 else e["msg"] for e in detail
        )
    return str(detail)


def libretranslate_error(status: int, detail: Any) -> JSONResponse:
    code = STATUS.get(status, status)
    text = message(detail)
    return JSONResponse({"error": f"Slowdown: {text}" if code == 429 else text}, status_code=code)


async def http_error(request: Request, exc: HTTPException) -> Response:
    """An HTTPException under PREFIX in LibreTranslate's shape; elsewhere FastAPI's own."""
    if under_prefix(request.url.path):
        return libretranslate_error(exc.status_code, exc.detail)
    return await http_exception_handler(request, exc)
