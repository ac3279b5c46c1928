"""A LibreTranslate request, read as LibreTranslate reads one: a JSON object, or form fields
(urlencoded or multipart) with the query string's (deep-translator sends its fields there, in a
POST without a body; a field in both is the query's, as Flask's `request.values` gives it).
Refusals carry LibreTranslate's messages and are 400s, in its order: q, source, target, then
(in the route) the languages and the format.

Where we go beyond it: `q` repeated in a form is a list, answered with a list (LibreTranslate
reads the first); a `q` of another type is a 400 (LibreTranslate fails with a 500); a body that is
neither JSON nor a form (JSON sent as text/plain), or a multipart body without fields, is a 400
saying so (LibreTranslate ignores it, then asks for the key or the q it holds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qs

from fastapi import HTTPException, Request


@dataclass(frozen=True)
class LibreRequest:
    """POST /translate's fields: the texts (q, a string or a list: `batch`), the languages as
    given, the format, n-best alternatives wanted, and the key if one was sent."""

    texts: list[str]
    batch: bool
    source: str
    target: str
    format: str
    alternatives: int
    api_key: str | None


async def read_fields(request: Request) -> dict[str, Any]:
    """The request's fields: a JSON body's object, else the form's and the query string's, each
    its first value (`q` given more than once: the list of them)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    if kind == "application/json":
        try:
            fields = json.loads(body)
        except (ValueError, RecursionError):
            fields = None
        if not isinstance(fields, dict):
            raise HTTPException(400, "Invalid JSON format")
        return fields
    form: dict[str, list[str]] = {}
    if kind == "application/x-www-form-urlencoded":
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    elif kind == "multipart/form-data":
        form = _multipart(request.headers["content-type"], body)
        if body.strip() and not form:
            raise HTTPException(400, "multipart/form-data body without fields (is its boundary missing?)")
    elif body.strip():  # Flask would drop it, and ask for a key or a q the body holds
        raise HTTPException(
            400, f"a body of type {kind or '(none)'} is not read: send the fields as JSON or a form"
        )
    given = {**form, **parse_qs(request.url.query, keep_blank_values=True)}
    return {name: values if name == "q" and len(values) > 1 else values[0] for name, values in given.items()}


def _multipart(content_type: str, body: bytes) -> dict[str, list[str]]:
    """The text fields of a multipart/form-data body (files are left out)."""
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    fields: dict[str, list[str]] = {}
    for part in message.iter_parts() if message.is_multipart() else ():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str) and part.get_filename() is None:
            fields.setdefault(name, []).append(str(part.get_content()))
    return fields


def libre_request(fields: dict[str, Any]) -> LibreRequest:
    """The request in `fields`, or a 400 with LibreTranslate's message for the first problem."""
    q = fields.get("q")
    if not q:
        raise HTTPException(400, "Invalid request: missing q parameter")
    if not (isinstance(q, str) or (isinstance(q, list) and all(isinstance(t, str) for t in q))):
        raise HTTPException(400, "Invalid request: q must be a string or a list of strings")
    for name in ("source", "target"):
        if not isinstance(fields.get(name), str) or not fields[name]:
            raise HTTPException(400, f"Invalid request: missing {name} parameter")
    try:
        alternatives = max(0, int(fields.get("alternatives") or 0))
    except (TypeError, ValueError):
        raise HTTPException(400, "Invalid request: alternatives parameter is not a number") from None
    key, kind = fields.get("api_key"), fields.get("format") or "text"
    return LibreRequest(
        texts=[q] if isinstance(q, str) else q,
        batch=not isinstance(q, str),
        source=fields["source"],
        target=fields["target"],
        format=kind if isinstance(kind, str) else repr(kind),
        alternatives=alternatives,
        api_key=key if isinstance(key, str) and key else None,
    )
