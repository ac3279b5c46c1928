"""HTML as markup and text: LibreTranslate's `format: html` translates the text between tags and
keeps the markup as it was sent.

Tags, comments, declarations and the contents of <script> and <style> are markup, copied
verbatim; each run of text between them is unescaped (`&amp;` -> `&`) for translation and its
translation escaped again. Runs are translated on their own: `Hello <b>world</b>!` is three
(`Hello `, `world`, `!`), so a sentence broken by inline tags is translated in pieces, where a
model that reads tags would do better.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

# Verbatim: raw-text elements whole, comments, then any tag, declaration or processing instruction.
MARKUP = re.compile(
    r"<(script|style)\b.*?</\1\s*>|<!--.*?-->|<[!?/]?[A-Za-z][^>]*>", re.DOTALL | re.IGNORECASE
)


@dataclass(frozen=True)
class Piece:
    """A run of a document: markup, copied as it is, or text to translate."""

    content: str
    markup: bool


def split_html(document: str) -> list[Piece]:
    """The document as alternating runs of text (unescaped) and markup."""
    pieces, at = [], 0
    for found in MARKUP.finditer(document):
        if found.start() > at:
            pieces.append(Piece(html.unescape(document[at : found.start()]), markup=False))
        pieces.append(Piece(found.group(0), markup=True))
        at = found.end()
    if at < len(document):
        pieces.append(Piece(html.unescape(document[at:]), markup=False))
    return pieces


def join_html(pieces: list[Piece]) -> str:
    """The document again, its text runs escaped (`<`, `>`, `&`)."""
    return "".join(p.content if p.markup else html.escape(p.content, quote=False) for p in pieces)
