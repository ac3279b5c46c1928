"""The API key: where it comes from, and the check every protected route makes."""

from __future__ import annotations

import hmac
import os

from fastapi import HTTPException, Request


def same_key(given: str, expected: str) -> bool:
    """Constant-time comparison, so response timing does not reveal how much of a guess matched."""
    return hmac.compare_digest(given.encode(), expected.encode())


def require_key(request: Request) -> None:
    """401 unless the request's X-API-Key header is the server's key (if it has one)."""
    expected: str | None = request.app.state.api_key
    if expected is not None and not same_key(request.headers.get("x-api-key", ""), expected):
        raise HTTPException(401, "missing or wrong X-API-Key header")


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
