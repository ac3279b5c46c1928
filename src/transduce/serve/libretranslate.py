"""A LibreTranslate-compatible API under /libretranslate: POST /translate and GET /languages as
LibreTranslate answers them, so its clients (libretranslatepy, deep-translator, ...) given
`http://HOST:PORT/libretranslate/` translate with this server. The prefix keeps our own
/translate (JSON `segments`) as it is.

A request is translated by our own /translate route: the same limits, batching, engine and
checkpoint settings, so a line comes back as /translate gives it. Each text is split into lines
(and, for `format: html`, into the runs of text between tags: serve/markup.py), each line one
segment, and put back together around them. `alternatives` asks for the n-best (beam widened
to hold them, as LibreTranslate does). The languages are the model's (store/languages.py, or
`serve --source-lang --target-lang`); `source: auto` is its source where it has one (there is
no language detector), answered with `detectedLanguage`; a text asked into its own language
comes back as it is, as LibreTranslate's identity translation gives it. The key is
LibreTranslate's `api_key` field or our X-API-Key header; GET /languages needs none.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, HTTPException, Request

from ..store.languages import Languages, language_name
from .auth import same_key
from .libretranslate_errors import PREFIX
from .libretranslate_request import LibreRequest, libre_request, read_fields
from .markup import Piece, join_html, split_html
from .routes import Served
from .routes import translate as translate_segments
from .schema import SERVER_BOUNDS, TranslateRequest

FORMATS = ("text", "html")
LINE_BREAK = re.compile(r"\r\n|\r|\n")
UNKNOWN = (
    "this server does not know its model's languages: start `transduce serve` with --source-lang and "
    "--target-lang"
)

router = APIRouter(prefix=PREFIX)


@router.get("/languages")
def languages(request: Request) -> list[dict[str, Any]]:
    """Every language with the targets it translates into (itself included, as LibreTranslate
    lists its identity translation); empty where the server does not know its languages."""
    known: Languages | None = request.app.state.languages
    if known is None:
        return []
    codes = sorted({*known.sources, *known.targets()})
    return [
        {
            "code": c,
            "name": language_name(c),
            "targets": sorted({c, *known.targets(c)} if c in known.sources else {c}),
        }
        for c in codes
    ]


@router.post("/translate")
async def translate(request: Request) -> dict[str, Any]:
    """`q` translated from `source` to `target`: `translatedText`, a string or (q a list) a list."""
    fields = await read_fields(request)
    _check_key(request, fields.get("api_key"))
    ask = libre_request(fields)
    source, target = _pair(request.app.state.languages, ask)
    if ask.format not in FORMATS:
        raise HTTPException(400, f"{ask.format} format is not supported")
    ranked = [[text] for text in ask.texts]  # into its own language: the text as it is
    if source != target:
        ranked = await _ranked(request, ask, (source, target))
    best = [texts[0] for texts in ranked]
    answer: dict[str, Any] = {"translatedText": best if ask.batch else best[0]}
    if ask.alternatives:
        others = [list(dict.fromkeys(t for t in texts[1:] if t != texts[0])) for texts in ranked]
        answer["alternatives"] = others if ask.batch else others[0]
    if ask.source == "auto":
        detected = {"confidence": 100.0, "language": source}
        answer["detectedLanguage"] = [detected] * len(ask.texts) if ask.batch else detected
    return answer


def _check_key(request: Request, given: Any) -> None:
    """LibreTranslate's answers on a server with a key: 400 without one, 403 for a wrong one."""
    expected: str | None = request.app.state.api_key
    if expected is None:
        return
    key = given if isinstance(given, str) and given else request.headers.get("x-api-key")
    if not key:
        raise HTTPException(400, "Please contact the server operator to get an API key (give api_key)")
    if not same_key(key, expected):
        raise HTTPException(403, "Invalid API key")


def _pair(known: Languages | None, ask: LibreRequest) -> tuple[str, str]:
    """The source and target codes as the model names them (matched ignoring case, as
    LibreTranslate lowercases codes); 400 with LibreTranslate's messages otherwise."""
    if known is None:
        raise HTTPException(400, UNKNOWN)
    codes = {c.lower(): c for c in (*known.sources, *known.targets())}
    if ask.source == "auto" and len(known.sources) != 1:
        raise HTTPException(
            400, f"auto is not supported: no language detector here; name one of {', '.join(known.sources)}"
        )
    source = known.sources[0] if ask.source == "auto" else codes.get(ask.source.lower())
    target = codes.get(ask.target.lower())
    for given, found in ((ask.source, source), (ask.target, target)):
        if found is None:
            raise HTTPException(400, f"{given} is not supported")
    if target != source and target not in known.targets(source):
        raise HTTPException(
            400,
            f"{language_name(target)} ({target}) is not available as a target language from "
            f"{language_name(source)} ({source})",
        )
    return source, target


async def _ranked(request: Request, ask: LibreRequest, pair: tuple[str, str]) -> list[list[str]]:
    """Per text, its translation and then its alternatives: each line (of each text run, for
    html) one segment of one call to our /translate, put back in place."""
    documents = [_pieces(text, ask.format) for text in ask.texts]
    segments = [p.content.strip() for doc in documents for p in doc if _sent(p)]
    outputs = iter(await _translate(request, segments, pair, ask.alternatives))
    found = [[next(outputs) for p in doc if _sent(p)] for doc in documents]
    return [
        [_joined(doc, outs, ask.format, rank) for rank in range(ask.alternatives + 1)]
        for doc, outs in zip(documents, found, strict=True)
    ]


def _pieces(text: str, format: str) -> list[Piece]:
    """A text as markup and the lines to translate: each line of each text run is a piece."""
    runs = split_html(text) if format == "html" else [Piece(text, markup=False)]
    pieces = []
    for run in runs:
        if run.markup:
            pieces.append(run)
            continue
        for i, line in enumerate(LINE_BREAK.split(run.content)):
            pieces.extend([Piece("\n", markup=True)] * (i > 0) + [Piece(line, markup=False)])
    return pieces


def _sent(piece: Piece) -> bool:
    """Whether a piece is a line to translate (not markup, not blank)."""
    return not piece.markup and bool(piece.content.strip())


async def _translate(
    request: Request, segments: list[str], pair: tuple[str, str], alternatives: int
) -> list[list[str]]:
    """Per segment its outputs, best first, from our /translate; a multilingual model is told
    the target language (`tgt_lang`; M2M100 the source's too), a model of one pair translates
    into its one."""
    source, target = pair
    if not segments:
        return []
    served: Served = request.app.state.served
    known: Languages = request.app.state.languages
    given: dict[str, Any] = {"tgt_lang": target} if known.tagged else {}
    if known.reads_source:
        given["src_lang"] = source
    if alternatives > SERVER_BOUNDS["nbest"] - 1:
        raise HTTPException(
            400, f"Invalid request: alternatives parameter must be <= {SERVER_BOUNDS['nbest'] - 1}"
        )
    if alternatives:
        given |= {"nbest": alternatives + 1, "beam": max(served.loaded.config.decode.beam, alternatives + 1)}
    answer = await translate_segments(TranslateRequest(segments=segments, **given), request, served)
    return [[t.text for t in (a if isinstance(a, list) else [a])] for a in answer.translations]


def _joined(doc: list[Piece], outputs: list[list[str]], format: str, rank: int) -> str:
    """The document with each line to translate replaced by its output of `rank` (0: the best;
    the last where there are fewer), keeping the line's surrounding white space and the markup."""
    found = iter(outputs)
    pieces = []
    for p in doc:
        if _sent(p):
            outs = next(found)
            lead = p.content[: len(p.content) - len(p.content.lstrip())]
            p = Piece(
                lead + outs[min(rank, len(outs) - 1)] + p.content[len(p.content.rstrip()) :], markup=False
            )
        pieces.append(p)
    return join_html(pieces) if format == "html" else "".join(p.content for p in pieces)
