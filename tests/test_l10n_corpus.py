"""The l10n corpus builder (bench/data/l10n/) on catalogs made here: reading .mo files and .deb
trees, the cleaning rules, the grouped split, package selection, and a whole build whose
'.debs' are tar files (no apt, no dpkg, no network)."""

from __future__ import annotations

import io
import random
import struct
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from bench.data.l10n import build as build_module
from bench.data.l10n import catalogs
from bench.data.l10n.build import Options, build
from bench.data.l10n.catalogs import Message, catalog_pattern, parse_mo, raw_mo, tar_catalogs
from bench.data.l10n.clean import clean_pair, placeholders, strip_accelerators
from bench.data.l10n.debian import Deb, load_rank, packages_with_catalogs, parse_apt_show, select_packages
from bench.data.l10n.split import most_frequent_translations, near_duplicate_key, split_sources

HEADER = "Content-Type: text/plain; charset={charset}\nPlural-Forms: {plural}\n"
PLURAL = "nplurals=2; plural=(n != 1);"


def mo_file(
    messages: dict[str, str], charset: str = "UTF-8", plural: str = PLURAL, order: str = "<"
) -> bytes:
    """A .mo catalog as msgfmt writes it: the header entry, then `messages` (msgid -> msgstr; a
    msgctxt as 'ctx\\x04msgid', a plural as 'one\\x00many' -> 'form0\\x00form1'), keys sorted."""
    entries = {"": HEADER.format(charset=charset, plural=plural)} | messages
    keys = sorted(entries)
    ids = [k.encode(charset) for k in keys]
    strs = [entries[k].encode(charset) for k in keys]
    count, originals = len(keys), 28
    translations = originals + 8 * count
    data_start = translations + 8 * count
    table, blob = [], b""
    for texts in (ids, strs):
        for text in texts:
            table.append((len(text), data_start + len(blob)))
            blob += text + b"\0"
    head = struct.pack(order + "7I", 0x950412DE, 0, count, originals, translations, 0, 0)
    return head + b"".join(struct.pack(order + "II", *entry) for entry in table) + blob


# ------------------------------------------------------------------ .mo files


def test_a_catalog_gives_its_messages_with_context_and_the_singular_of_plurals():
    data = mo_file(
        {
            "Open file": "Datei öffnen",
            "menu\x04Quit": "Beenden",
            "%d file\x00%d files": "%d Datei\x00%d Dateien",
        }
    )
    messages, reader = parse_mo(data)
    assert reader == "gettext"
    assert sorted(messages) == [
        Message("%d file", "%d Datei", ""),
        Message("Open file", "Datei öffnen", ""),
        Message("Quit", "Beenden", "menu"),
    ]


@pytest.mark.parametrize("order", ["<", ">"])
def test_a_catalog_gettext_refuses_is_read_raw_in_its_own_charset(order):
    """gettext refuses a Plural-Forms expression it does not trust; the raw reader takes the
    catalog in either byte order and decodes it with the header's charset (Latin-1 here)."""
    data = mo_file(
        {"Size of file": "Größe der Datei", "one\x00many": "eins\x00viele"},
        charset="ISO-8859-1",
        plural="nplurals=2; plural=n > 1 ? 1 : bogus;",
        order=order,
    )
    messages, reader = parse_mo(data)
    assert reader == "raw"
    assert sorted(messages) == [Message("Size of file", "Größe der Datei", ""), Message("one", "eins", "")]
    assert raw_mo(data)[("one", 1)] == "viele"


def test_a_file_that_is_no_catalog_gives_no_messages():
    assert parse_mo(b"not a catalog at all") == ([], "failed")


# ------------------------------------------------------------------ .deb trees


@pytest.mark.parametrize(
    ("path", "lang", "matches"),
    [
        ("usr/share/locale/de/LC_MESSAGES/app.mo", "de", True),
        ("usr/share/locale/de_DE/LC_MESSAGES/app.mo", "de", True),
        ("usr/share/locale/de.UTF-8/LC_MESSAGES/app.gmo", "de", True),
        ("usr/share/app/po/messages_de.mo", "de", True),
        ("usr/share/locale/de_AT/LC_MESSAGES/app.mo", "de", False),
        ("usr/share/locale/fr/LC_MESSAGES/app.mo", "de", False),
        ("usr/share/locale/pt_BR/LC_MESSAGES/app.mo", "pt_BR", True),
        ("usr/share/locale/pt/LC_MESSAGES/app.mo", "pt_BR", False),
        ("usr/share/locale/de/LC_MESSAGES/app.po", "de", False),
    ],
)
def test_catalog_paths_of_a_language(path, lang, matches):
    assert bool(catalog_pattern(lang).search(path)) is matches


def tar_of(files: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    """A tar archive as `dpkg-deb --fsys-tarfile` streams it (./-prefixed names), with symlinks."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo("./" + name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return buffer.getvalue()


def test_a_package_tree_gives_its_catalogs_and_links_to_them_but_not_tests():
    de = "usr/share/locale/de/LC_MESSAGES/app.mo"
    tree = tar_of(
        {
            de: b"de catalog",
            "usr/share/locale/fr/LC_MESSAGES/app.mo": b"fr catalog",
            "usr/share/app/tests/de/LC_MESSAGES/t.mo": b"test data",
            "usr/share/doc/app/copyright": b"text",
        },
        links={"usr/share/locale/de_DE/LC_MESSAGES/app.mo": "../../de/LC_MESSAGES/app.mo"},
    )
    found = tar_catalogs(io.BytesIO(tree), "de")
    assert found == [(de, b"de catalog"), ("usr/share/locale/de_DE/LC_MESSAGES/app.mo", b"de catalog")]


# ------------------------------------------------------------------ cleaning


@pytest.mark.parametrize(
    ("src", "tgt", "expected"),
    [
        ("&Open File", "Datei ö&ffnen", ("Open File", "Datei öffnen")),  # KDE/Qt
        ("_Open File", "Datei _öffnen", ("Open File", "Datei öffnen")),  # GTK
        ("~Save As", "Speichern ~unter", ("Save As", "Speichern unter")),  # LibreOffice
        ("Drag & Drop", "Ziehen & Ablegen", ("Drag & Drop", "Ziehen & Ablegen")),  # no letter after
        ("AT&T and R&D", "AT&T und R&D", ("AT&T and R&D", "AT&T und R&D")),  # inside upper-case tokens
        ("Set LC_ALL", "LC_ALL setzen", ("Set LC_ALL", "LC_ALL setzen")),
        ("the file_name key", "der Schlüssel file_name", ("the file_name key", "der Schlüssel file_name")),
        ("&Copy && Paste", "&Kopieren && Einfügen", ("Copy & Paste", "Kopieren & Einfügen")),
        ("&Yes or &No", "&Ja oder &Nein", ("&Yes or &No", "&Ja oder &Nein")),  # two: ambiguous, kept
        ("Use &amp; here", "&amp; hier", ("Use &amp; here", "&amp; hier")),  # an entity
    ],
)
def test_accelerator_markers_are_removed_by_one_rule_on_both_sides(src, tgt, expected):
    assert strip_accelerators(src, tgt) == expected


def test_placeholders_are_counted_by_kind_and_percent_signs_are_not_placeholders():
    assert placeholders("%s of %1$d and %(name)s, %1 %L2, {0} {name}, 100% sure, 5%%") == (3, 2, 2)


@pytest.mark.parametrize(
    ("msgid", "msgstr", "context", "expected"),
    [
        ("Open  the\nfile", "Die\u00a0Datei  öffnen ", "", (("Open the file", "Die Datei öffnen"), "ok")),
        ("translator-credits", "Max Muster", "", (None, "credits")),
        ("Your names", "Max", "NAME OF TRANSLATORS", (None, "credits")),
        ("Open file", "", "", (None, "untranslated")),
        ("Open file", "   ", "", (None, "untranslated")),
        ("Open file", "Open file", "", (None, "identical")),
        ("Open", "Öffnen", "", (None, "too-short")),
        ("Open file\x07", "Datei öffnen", "", (None, "control-chars")),
        ("%s files left", "Dateien übrig", "", (None, "placeholder-mismatch")),
        ("_: menu entry\nOpen file", "Datei öffnen", "", (("Open file", "Datei öffnen"), "ok")),  # KDE3
        (
            "File|Open a file",
            "Eine Datei öffnen",
            "",
            (("Open a file", "Eine Datei öffnen"), "ok"),
        ),  # glib Q_
    ],
)
def test_a_message_becomes_a_pair_or_a_reason(msgid, msgstr, context, expected):
    assert clean_pair(msgid, msgstr, context) == expected


def test_the_word_limits_count_source_words():
    assert clean_pair("one two three", "eins zwei drei", "", max_words=2) == (None, "too-long")
    assert clean_pair("one two", "eins zwei", "", min_words=3) == (None, "too-short")


# ------------------------------------------------------------------ splitting


def test_near_duplicates_share_a_key():
    keys = {near_duplicate_key(s) for s in ("Open file", "Open File...", "open file:", "Open  file!")}
    assert keys == {"open file"}
    assert near_duplicate_key("Page 3 of 10") == near_duplicate_key("Page 12 of 7")
    assert near_duplicate_key("...") == "..."  # nothing left: the source itself


def test_the_most_frequent_translation_wins_and_ties_go_to_the_smallest():
    counts = {"Open": Counter({"Öffnen": 3, "Aufmachen": 1}), "Close": Counter({"b": 1, "a": 1})}
    assert most_frequent_translations(counts) == ({"Open": "Öffnen", "Close": "a"}, 2)


def generated_sources(count: int) -> list[str]:
    """Sources from `count` bases, each given as one to three spellings; numbers are one to the
    key, so the bases themselves fall into 130 near-duplicate groups."""
    rng = random.Random(1)
    sources = []
    for i in range(count):
        base = f"message number {'abcdefghij'[i % 10]} {i // 10} {chr(97 + i % 26)}x{i}"
        sources += [base, base.upper() + "!", base + "..."][: rng.randint(1, 3)]
    return sources


def test_the_split_keeps_groups_whole_and_does_not_depend_on_input_order():
    sources = generated_sources(300)
    occurrences = {s: 1 + len(s) % 3 for s in sources}
    splits = split_sources(sources, occurrences, test_size=20, dev_size=10)
    assert (len(splits.test), len(splits.dev)) == (20, 10)
    keys = {name: {near_duplicate_key(s) for s in getattr(splits, name)} for name in ("train", "dev", "test")}
    assert (
        not keys["train"] & keys["dev"]
        and not keys["train"] & keys["test"]
        and not keys["dev"] & keys["test"]
    )
    assert len(keys["test"]) == 20 and len(keys["dev"]) == 10  # one source per held-out group
    for src in splits.test + splits.dev:  # the group's most frequent source represents it
        mates = [s for s in sources if near_duplicate_key(s) == near_duplicate_key(src)]
        assert src == min(mates, key=lambda s: (-occurrences[s], s))
    kept = len(splits.train) + len(splits.dev) + len(splits.test)
    assert kept + splits.group_mates_dropped == len(sources)
    shuffled = sources[:]
    random.Random(2).shuffle(shuffled)
    assert split_sources(shuffled, occurrences, test_size=20, dev_size=10) == splits


def test_reserved_sources_go_to_no_split():
    sources = generated_sources(50)
    reserved = frozenset({near_duplicate_key(sources[0])})
    splits = split_sources(sources, dict.fromkeys(sources, 1), 5, 5, reserved)
    everything = splits.train + splits.dev + splits.test
    assert splits.reserved_dropped >= 1
    assert all(near_duplicate_key(s) not in reserved for s in everything)


# ------------------------------------------------------------------ Debian's indices


def test_packages_with_catalogs_from_contents_lines():
    lines = [
        "usr/share/locale/de/LC_MESSAGES/app.mo                 utils/app,utils/app-extra\n",
        "usr/share/locale/fr/LC_MESSAGES/app.mo                 utils/app\n",
        "usr/share/doc/app/copyright                            utils/app\n",
        "usr/share/locale/de/LC_MESSAGES/castle.mo              doc/castle-game-engine-doc\n",
    ]
    assert packages_with_catalogs(lines, "de") == {
        "app": ["usr/share/locale/de/LC_MESSAGES/app.mo"],
        "app-extra": ["usr/share/locale/de/LC_MESSAGES/app.mo"],
    }


def test_apt_cache_records_give_the_file_apt_get_download_writes():
    text = "Package: akregator\nVersion: 4:22.12.3-1\nArchitecture: amd64\nSize: 2567340\n\nPackage: x\n"
    assert parse_apt_show(text) == {
        "akregator": Deb("4:22.12.3-1", 2567340, "akregator_4%3a22.12.3-1_amd64.deb")
    }


def test_the_budget_takes_a_prefix_of_the_ranking_after_small_unranked_packages(tmp_path):
    table = tmp_path / "rank.tsv"
    table.write_text("# rank\tpackage\n1\tbig-first\n2\tlibreoffice-l10n-{lang}\n3\tsmall-third\n")
    rank = load_rank("fr", table)
    assert rank == {"big-first": 1, "libreoffice-l10n-fr": 2, "small-third": 3}
    debs = {
        "big-first": Deb("1", 600_000, "a"),
        "libreoffice-l10n-fr": Deb("1", 500_000, "b"),
        "small-third": Deb("1", 10_000, "c"),
        "unranked-small": Deb("1", 20_000, "d"),
        "unranked-large": Deb("1", 3_000_000, "e"),
    }
    chosen = select_packages(debs, debs, rank, budget_mb=1.0, max_unranked_mb=2.0, log=lambda _: None)
    # 20 kB unranked, then 600 kB; the 500 kB second does not fit, so the third is not taken either
    assert chosen == ["big-first", "unranked-small"]
    assert select_packages(debs, debs, rank, 0, 2.0, lambda _: None) == sorted(set(debs) - {"unranked-large"})


# ------------------------------------------------------------------ a whole build


WORDS = [f"{c}{v}" for c in "bdfgklmnpr" for v in "aeiou"]  # 50 words, no two near-duplicates


def fake_debs(cache: Path) -> dict[str, Deb]:
    """Three packages whose '.debs' are tar files of their trees: 62 German messages, one source
    in two packages with two translations, one too short, and a French catalog to ignore."""
    apps = {
        "alpha": {f"Open the file {w}": f"Die Datei {w} öffnen" for w in WORDS[:30]},
        "beta": {f"&Save the document {w}": f"Dokument {w} &speichern" for w in WORDS[:25]},
        "gamma": {"Open the file be": "Öffne die Datei be", "Quit": "Beenden"},
    }
    apps["gamma"] |= {f"Close window {w} now": f"Fenster {w} jetzt schließen" for w in WORDS[:5]}
    debs = {}
    for name, messages in apps.items():
        tree = {
            f"usr/share/locale/de/LC_MESSAGES/{name}.mo": mo_file(messages),
            f"usr/share/locale/fr/LC_MESSAGES/{name}.mo": mo_file({"Open": "Ouvrir"}),
        }
        deb = Deb("1.0", 1000 * len(messages), f"{name}_1.0_all.deb")
        (cache / deb.filename).write_bytes(tar_of(tree))
        debs[name] = deb
    return debs


@pytest.fixture
def offline_build(tmp_path, monkeypatch):
    """`build` with the packages chosen here and the '.debs' read as plain tar files."""
    cache = tmp_path / "debs"
    cache.mkdir()
    debs = fake_debs(cache)
    monkeypatch.setattr(build_module, "choose", lambda options, log: (sorted(debs), debs))
    monkeypatch.setattr(
        catalogs, "deb_catalogs", lambda deb, lang: tar_catalogs(io.BytesIO(deb.read_bytes()), lang)
    )

    def run(out: Path) -> Path:
        build(Options(lang="de", out=out, cache_dir=cache, download=False, dev_size=5, test_size=5, jobs=1))
        return out

    return run


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_a_build_writes_aligned_splits_with_provenance_and_is_deterministic(tmp_path, offline_build):
    out = offline_build(tmp_path / "a")
    sizes = {name: len(lines(out / f"{name}.en")) for name in ("train", "dev", "test")}
    assert sizes == {"train": 50, "dev": 5, "test": 5}  # 60 distinct sources in 60 groups
    for name in sizes:
        assert len(lines(out / f"{name}.de")) == len(lines(out / f"{name}.meta")) == sizes[name]
    pairs = {}
    for name in sizes:
        for src, tgt, meta in zip(*(lines(out / f"{name}.{x}") for x in ("en", "de", "meta")), strict=True):
            pairs[src] = (tgt, meta)
    assert pairs["Save the document ka"][0] == "Dokument ka speichern"  # markers gone
    # two packages give 'Open the file be', with different translations, once each: the tie goes
    # to the smaller string, whose package the meta names, with the source's two occurrences
    assert pairs["Open the file be"] == ("Die Datei be öffnen", "alpha\talpha.mo\t2")
    assert "Ouvrir" not in (out / "train.de").read_text(encoding="utf-8")
    table = lines(out / "packages.tsv")
    assert table[1:] == [
        "alpha\t1.0\t30000\t1\t30\t30",
        "beta\t1.0\t25000\t1\t25\t25",
        "gamma\t1.0\t7000\t1\t7\t6",
    ]
    again = offline_build(tmp_path / "b")
    for name in ("train.en", "train.de", "dev.en", "dev.de", "test.en", "test.de", "train.meta"):
        assert (out / name).read_bytes() == (again / name).read_bytes()
