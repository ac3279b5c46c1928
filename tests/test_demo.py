"""`make demo`'s inputs: the English->German corpus shipped in demo/en-de/ is whole and clean
(what `prepare` would otherwise skip or refuse), its sources are listed with the licences their
copyright files declare (read as bench/data/demo_corpus.py reads them), and both demo configs
load."""

from __future__ import annotations

import lzma
import re
from pathlib import Path

import pytest

from bench.data.demo_corpus import declared_license, dep5_matches
from transduce.config import load_config

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "demo" / "en-de"
SIZES = {"train": 92561, "dev": 500, "test": 1000}  # as bench/data/demo_corpus.py built it
CONTROL_OR_TAB = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc: `prepare` skips them


def read_lines(path: Path) -> list[str]:
    """The lines of a plain or .xz file, decoded strictly as UTF-8 (a bad byte fails the test)."""
    data = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
    text = data.decode("utf-8")
    assert text.endswith("\n"), f"{path}: no newline at the end"
    return text[:-1].split("\n")


def side(split: str, lang: str) -> Path:
    return CORPUS / (f"{split}.{lang}.xz" if split == "train" else f"{split}.{lang}")


@pytest.mark.parametrize("split", list(SIZES))
def test_each_split_has_aligned_clean_lines(split):
    src, tgt = read_lines(side(split, "en")), read_lines(side(split, "de"))
    assert len(src) == len(tgt) == SIZES[split]
    for lang, lines in (("en", src), ("de", tgt)):
        for number, line in enumerate(lines, 1):
            where = f"{split}.{lang}:{number}"
            assert line.strip() == line and line, f"{where}: empty or padded: {line!r}"
            assert not CONTROL_OR_TAB.search(line), f"{where}: a tab or control character: {line!r}"
    assert all(s != t for s, t in zip(src, tgt, strict=True))  # the builder drops untranslated pairs


def test_no_test_or_dev_source_is_in_training():
    train = set(read_lines(side("train", "en")))
    for split in ("dev", "test"):
        assert not train & set(read_lines(side(split, "en"))), split


def test_every_pair_is_attributed_to_a_package_with_a_licence():
    rows = [line.split("\t") for line in read_lines(CORPUS / "SOURCES.tsv")]
    assert rows[0] == ["package", "version", "pairs", "license", "copyright_of"]
    assert all(len(row) == 5 and all(row) for row in rows[1:])
    assert sum(int(row[2]) for row in rows[1:]) == sum(SIZES.values())
    copyright_texts = lzma.decompress((CORPUS / "COPYRIGHT.xz").read_bytes()).decode("utf-8")
    for package, version, *_, owner in rows[1:]:
        assert f"==> {package} {version}: /usr/share/doc/{owner}/copyright <==" in copyright_texts


def test_the_demo_configs_load():
    demo = load_config(str(ROOT / "configs" / "demo.toml"))
    assert demo.data.dataset == "runs/demo-data" and demo.data.task is None
    assert (demo.model.d_model, demo.model.encoder_layers, demo.train.steps) == (128, 2, 1200)
    reverse = load_config(str(ROOT / "configs" / "reverse.toml"))
    assert reverse.data.task == "reverse" and reverse.data.dataset is None


def test_the_sample_sentences_are_not_training_sentences():
    samples = read_lines(ROOT / "demo" / "samples.en")
    assert samples and all(samples)
    assert not set(samples) & set(read_lines(side("train", "en")))


COPYRIGHT_DEP5 = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: app

Files: *
Copyright: 2020 Someone
License: GPL-2+

Files: po/*
Copyright: 2021 The translators
License: LGPL-2.1+
 The translations are under the LGPL.

Files: po?de.pot
License: Expat

License: GPL-2+
 On Debian systems, see /usr/share/common-licenses/GPL-2.
"""


def test_the_licence_of_the_catalogs_is_the_last_files_paragraph_that_covers_them():
    assert declared_license(COPYRIGHT_DEP5) == "LGPL-2.1+"  # po/* after *; po?de.pot does not match
    assert declared_license(COPYRIGHT_DEP5, "src/main.c") == "GPL-2+"
    assert dep5_matches("po/de.po", "*") and dep5_matches("po/de.po", "po/??.po")
    assert not dep5_matches("po/de.po", "[p]o/*")  # brackets are literal in DEP-5


def test_a_free_form_copyright_file_is_named_so_with_the_licences_it_points_to():
    text = "GPL; see /usr/share/common-licenses/GPL-2.\nLGPL: /usr/share/common-licenses/LGPL-2.1\n"
    assert declared_license(text) == "free-form (refers to GPL-2, LGPL-2.1)"
    assert declared_license("Public domain.\n") == "free-form"
