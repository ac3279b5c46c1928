"""The gettext catalogs inside a .deb: which member paths are a language's catalogs, reading them
out of the package's file tree, and their messages (msgid, msgstr, msgctxt) from the binary .mo
format."""

from __future__ import annotations

import gettext
import io
import os
import re
import struct
import subprocess
import tarfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NamedTuple

# Catalogs that are test data or examples, not a program's interface.
EXCLUDED_PATH = re.compile(r"/(testdata|tests?|examples?)/")

MO_MAGIC_LE = 0x950412DE


class Message(NamedTuple):
    """One translated message of a catalog: the singular msgid of plural entries, with msgstr[0]."""

    msgid: str
    msgstr: str
    context: str


def catalog_pattern(lang: str) -> re.Pattern[str]:
    """Paths of `lang`'s catalogs: `de/LC_MESSAGES/x.mo` (also `de_DE`, `de.UTF-8`, `.gmo`) or
    a file named for the language (`messages_de.mo`, `po/de.gmo`). A regional code (`pt_BR`)
    matches only itself; a bare one (`de`) also its own region (`de_DE`), not `de_AT`."""
    variants = [lang] if "_" in lang else [lang, f"{lang}_{lang.upper()}"]
    code = "(?:{})".format("|".join(map(re.escape, variants)))
    return re.compile(rf"(?:(?:^|/){code}(?:\.[Uu][Tt][Ff]-?8)?/LC_MESSAGES/[^/]+\.g?mo|[/_.-]{code}\.g?mo)$")


def is_catalog(path: str, pattern: re.Pattern[str]) -> bool:
    """Whether `path` (relative, no leading ./) is a catalog of the pattern's language, outside
    test and example folders."""
    return bool(pattern.search(path)) and not EXCLUDED_PATH.search("/" + path)


def tar_catalogs(stream: IO[bytes], lang: str) -> list[tuple[str, bytes]]:
    """(member path, .mo bytes) of `lang`'s catalogs in a tar stream, sorted by path. A symbolic
    or hard link to a catalog of the same archive counts as a catalog of its own path (packages
    link `de_DE` to `de`, say)."""
    pattern = catalog_pattern(lang)
    found: dict[str, bytes] = {}
    links: dict[str, tarfile.TarInfo] = {}
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            name = member.name.removeprefix("./")
            if not is_catalog(name, pattern):
                continue
            if member.isfile():
                data = archive.extractfile(member)
                assert data is not None
                found[name] = data.read()
            elif member.issym() or member.islnk():
                links[name] = member
    for name, member in links.items():  # read after the stream: a link may come before its target
        if member.issym():
            target = os.path.normpath(os.path.join(os.path.dirname(name), member.linkname))
        else:
            target = member.linkname.removeprefix("./")
        if target in found:
            found[name] = found[target]
    return sorted(found.items())


def deb_catalogs(deb: Path, lang: str) -> list[tuple[str, bytes]]:
    """`lang`'s catalogs in a .deb, streamed out of `dpkg-deb --fsys-tarfile` (the package is
    never unpacked on disk)."""
    proc = subprocess.Popen(
        ["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    try:
        return tar_catalogs(proc.stdout, lang)
    finally:
        proc.stdout.close()
        proc.wait()


def parse_mo(data: bytes) -> tuple[list[Message], str]:
    """The messages of a .mo file and the reader that read it: Python's `gettext`, else
    `raw_mo` (for the few catalogs gettext refuses, such as odd Plural-Forms headers), else none
    ('failed'). The header entry (empty msgid) is left out; a msgctxt ('ctx\\x04msgid' in the
    file) goes to `context`; of a plural entry only msgstr[0] is kept, with the singular msgid."""
    try:
        catalog = gettext.GNUTranslations(io.BytesIO(data))._catalog  # type: ignore[attr-defined]
        reader = "gettext"
    except Exception:
        try:
            catalog = raw_mo(data)
            reader = "raw"
        except Exception:
            return [], "failed"
    messages = []
    for key, msgstr in catalog.items():
        if isinstance(key, tuple):  # a plural entry: (singular msgid, form index)
            if key[1] != 0:
                continue
            key = key[0]
        context = ""
        if "\x04" in key:
            context, key = key.split("\x04", 1)
        if key:
            messages.append(Message(key, msgstr, context))
    return messages, reader


def raw_mo(data: bytes) -> dict[str | tuple[str, int], str]:
    """A .mo file's table as gettext's `_catalog` holds it (plural entries keyed by (msgid, form)),
    read without gettext's checks of the header. Strings are decoded with the header's charset
    (UTF-8 when it names none or one Python lacks); entries that do not decode are skipped."""
    order = "<" if struct.unpack("<I", data[:4])[0] == MO_MAGIC_LE else ">"
    _, count, originals, translations = struct.unpack(order + "4I", data[4:20])
    raw = []
    for i in range(count):
        length, offset = struct.unpack(order + "II", data[originals + 8 * i : originals + 8 * i + 8])
        t_length, t_offset = struct.unpack(
            order + "II", data[translations + 8 * i : translations + 8 * i + 8]
        )
        raw.append((data[offset : offset + length], data[t_offset : t_offset + t_length]))
    charset = "utf-8"
    for msgid, msgstr in raw:
        if msgid == b"":
            named = re.search(rb"charset=([A-Za-z0-9_.:-]+)", msgstr)
            if named:
                charset = named.group(1).decode("ascii")
    try:
        "".encode(charset)
    except LookupError:
        charset = "utf-8"
    catalog: dict[str | tuple[str, int], str] = {}
    for msgid, msgstr in raw:
        if msgid == b"":
            continue
        try:
            if b"\x00" in msgid:  # singular\0plural: one entry per form
                singular = msgid.split(b"\x00")[0].decode(charset)
                for form, text in enumerate(msgstr.split(b"\x00")):
                    catalog[(singular, form)] = text.decode(charset)
            else:
                catalog[msgid.decode(charset)] = msgstr.decode(charset)
        except UnicodeDecodeError:
            continue
    return catalog


@dataclass
class DebMessages:
    """What one package's catalogs hold: (msgid, msgstr, msgctxt, catalog file name) in catalog
    order, how many catalogs, which reader read each, and the error of an archive that could not
    be read."""

    package: str
    messages: list[tuple[str, str, str, str]] = field(default_factory=list)
    catalogs: int = 0
    readers: Counter[str] = field(default_factory=Counter)
    error: str | None = None


def read_deb(job: tuple[str, Path, str]) -> DebMessages:
    """The messages of `lang`'s catalogs in one package's .deb, for job (package, .deb, lang);
    run in worker processes, so it takes one picklable argument."""
    package, deb, lang = job
    result = DebMessages(package)
    try:
        catalogs = deb_catalogs(deb, lang)
    except Exception as exc:  # a broken archive: counted in packages.tsv, not fatal
        result.error = repr(exc)
        return result
    result.catalogs = len(catalogs)
    for name, data in catalogs:
        messages, reader = parse_mo(data)
        result.readers[reader] += 1
        catalog = os.path.basename(name)
        result.messages.extend((m.msgid, m.msgstr, m.context, catalog) for m in messages)
    return result
