"""Turning a catalog message into a training pair, or saying why not: translator credits,
untranslated or identical strings, control characters, too few or too many words, and
placeholders (printf, Qt, Python braces) that differ between the sides are dropped; keyboard
accelerator markers (&File, _File, ~File) are removed and whitespace is normalised."""

from __future__ import annotations

import re

WHITESPACE = re.compile(r"\s+")  # Unicode whitespace, NBSP and narrow NBSP included
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);")
# C and GNU printf conversions (positional too), without the ' ' flag so that "100% sure" holds
# none; Python's %(name)s; and %% (counted apart).
PRINTF = re.compile(
    r"%(?!%)(?:\d+\$)?[-+#0']*(?:\d+|\*(?:\d+\$)?)?(?:\.(?:\d+|\*(?:\d+\$)?))?"
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32|I)?[diouxXeEfFgGaAcspnCSm@]"
    r"|%\([A-Za-z0-9_]+\)[-+#0]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"
    r"|%%"
)
QT_ARG = re.compile(r"%L?\d{1,2}(?![\d$])")  # Qt/KDE %1 .. %99
BRACES = re.compile(r"\{[A-Za-z0-9_]*\}")  # Python/C# {0} {name}
# glib's Q_("context|msgid") pseudo-context
PIPE_CONTEXT = re.compile(r"^[A-Za-z][\w.-]*\|(\S.*)$", re.S)

CREDIT_MSGIDS = frozenset(
    {
        "translator-credits",
        "Your names",
        "Your emails",
        "Your name",
        "Your email",
        "Your e-mail",
        "Your e-mails",
        "translator_credits",
        "TRANSLATORS",
    }
)
CREDIT_CONTEXTS = frozenset({"NAME OF TRANSLATORS", "EMAIL OF TRANSLATORS"})


def placeholders(text: str) -> tuple[int, int, int]:
    """How many printf, Qt and brace placeholders `text` holds (%% is not one)."""
    printf = [m for m in PRINTF.findall(text) if m != "%%"]
    return len(printf), len(QT_ARG.findall(text)), len(BRACES.findall(text))


def accelerator_positions(text: str, marker: str) -> list[int]:
    """Indices of `marker` ('&', '_' or '~') that look like a keyboard-accelerator marker.

    Not markers: escaped doubles (&&, __, ~~), HTML/XML entities (&amp;), a marker not followed
    by a letter or digit ("Drag & Drop", "%s_%d", "~/"), '~' not followed by two letters (Lisp
    format directives ~S, ~A), and markers inside identifier-like tokens: AT&T, R&D, LC_ALL,
    WM_NET (upper case on both sides) and, for '_', snake_case names such as file_name."""
    found = []
    i, n = 0, len(text)
    while i < n:
        if text[i] != marker:
            i += 1
            continue
        after = text[i + 1] if i + 1 < n else ""
        if after == marker:  # an escaped literal
            i += 2
            continue
        at = i
        i += 1
        if not after or not after.isalnum():
            continue
        if marker == "&" and ENTITY.match(text, at):
            continue
        if marker == "~" and not (after.isalpha() and at + 2 < n and text[at + 2].isalpha()):
            continue
        start = at
        while start > 0 and text[start - 1].isalnum():
            start -= 1
        end = at + 1
        while end < n and text[end].isalnum():
            end += 1
        left, right = text[start:at], text[at + 1 : end]
        if marker == "_" and end < n and text[end] == "_":
            continue  # _NET_WM_NAME, _PG_init: part of a longer identifier
        if left:  # a marker inside a token
            if left.upper() == left and right.upper() == right and any(c.isalpha() for c in left + right):
                continue  # AT&T, R&D, LC_ALL, WM_NET, X11_DISPLAY
            if marker == "_" and len(left) >= 2 and left.lower() == left and right.lower() == right:
                continue  # a snake_case identifier
            if start > 0 and text[start - 1] in "_&~$%@.":  # part of a longer identifier or format
                continue
        elif start > 0 and text[start - 1] in "_&~$%@\\":
            continue
        found.append(at)
    return found


def strip_marker(text: str, marker: str) -> str:
    """`text` without its accelerator marker when it has exactly one candidate (escaped doubles
    of '&' and '~' then become single); several candidates are ambiguous (Lisp's ~S ~S,
    Mercurial's "$$ &Yes $$ &No" prompts) and leave it as it is."""
    positions = accelerator_positions(text, marker)
    if len(positions) != 1:
        return text
    text = text[: positions[0]] + text[positions[0] + 1 :]
    return text.replace(marker * 2, marker) if marker != "_" else text


def strip_accelerators(src: str, tgt: str) -> tuple[str, str]:
    """Both sides without their accelerator markers (&X KDE/Qt/wx, _X GTK, ~X LibreOffice), the
    same rule on each side."""
    for marker in "&_~":
        if marker in src:
            src = strip_marker(src, marker)
        if marker in tgt:
            tgt = strip_marker(tgt, marker)
    return src, tgt


def normalise_space(text: str) -> str:
    """Runs of whitespace (newlines and tabs too) as one space, none at either end."""
    return WHITESPACE.sub(" ", text).strip()


def clean_pair(
    msgid: str, msgstr: str, context: str, min_words: int = 2, max_words: int = 100
) -> tuple[tuple[str, str] | None, str]:
    """The training pair a message gives and 'ok', or None and the reason it gives none (a key of
    stats.json's filter_reasons). Words are counted on the source, split at spaces."""
    if context in CREDIT_CONTEXTS or msgid in CREDIT_MSGIDS:
        return None, "credits"
    if msgid.startswith("_:"):  # KDE3's embedded context: "_: context\nmsgid"
        msgid = msgid.split("\n", 1)[1] if "\n" in msgid else ""
    if not msgstr or not msgstr.strip():
        return None, "untranslated"
    pseudo = PIPE_CONTEXT.match(msgid)
    if pseudo and "|" not in msgstr:
        msgid = pseudo.group(1)
    if CONTROL.search(msgid) or CONTROL.search(msgstr):
        return None, "control-chars"
    src, tgt = strip_accelerators(msgid, msgstr)
    src, tgt = normalise_space(src), normalise_space(tgt)
    if not src or not tgt:
        return None, "untranslated"
    if src == tgt:
        return None, "identical"
    words = len(src.split(" "))
    if words < min_words:
        return None, "too-short"
    if words > max_words:
        return None, "too-long"
    if placeholders(src) != placeholders(tgt):
        return None, "placeholder-mismatch"
    return (src, tgt), "ok"
