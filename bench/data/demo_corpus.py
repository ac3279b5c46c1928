"""Build the English->German corpus that ships in demo/en-de/ for `make demo`: the l10n builder
(bench/data/l10n/) with a 30 MB .deb budget (the first packages of package_rank.tsv), a dev set
of 500 pairs and a test set of 1,000, written where the demo reads it, with the sources and
their licences beside it.

    python -m bench.data.demo_corpus [--out demo/en-de]

Writes OUT/train.{en,de}.xz (xz: the demo needs no more than `transduce prepare` reads) and
OUT/{dev,test}.{en,de} (plain: `evaluate --src` reads them too), less the few pairs with a
control character (`prepare` would skip them); OUT/SOURCES.tsv (each package: version, the pairs
it is the first source of, the licence of its catalogs as its Debian copyright file declares it)
and OUT/COPYRIGHT.xz (those copyright files, whole). The same .debs give the same files byte for
byte. Needs what the builder needs (apt-file, lz4, dpkg-deb); the .debs are cached in
bench/out/debs.
"""

from __future__ import annotations

import argparse
import lzma
import re
import shutil
import subprocess
import tarfile
from collections import Counter
from pathlib import Path

from bench.data.l10n.build import Options, build
from bench.data.l10n.debian import apt_show
from bench.data.l10n_corpus import ensure_tools
from bench.records import OUT, ROOT
from transduce.data.corpus import CONTROL

DEMO = ROOT / "demo" / "en-de"
BUDGET_MB = 30
DEV_SIZE, TEST_SIZE = 500, 1000
# The path the licence is looked up for in a machine-readable copyright file: a catalog's usual
# source, so a `Files: po/*` paragraph wins over `Files: *`.
CATALOG_SOURCE = "po/de.po"
COMMON_LICENSE = re.compile(r"/usr/share/common-licenses/([A-Za-z0-9.+-]*[A-Za-z0-9+])")


def paragraphs(text: str) -> list[dict[str, str]]:
    """The paragraphs of a deb822 file (field -> value; continuation lines joined with newlines)."""
    found = []
    for block in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key is not None:
                fields[key] += "\n" + line.strip()
            elif ":" in line and not line.startswith("#"):
                key, value = line.split(":", 1)
                fields[key.strip()] = value.strip()
        if fields:
            found.append(fields)
    return found


def dep5_matches(path: str, pattern: str) -> bool:
    """Whether a DEP-5 `Files` pattern matches `path`: '*' any characters ('/' too), '?' one,
    nothing else special."""
    regex = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(regex, path) is not None


def declared_license(copyright_text: str, path: str = CATALOG_SOURCE) -> str:
    """The licence a Debian copyright file gives `path`. Machine-readable (DEP-5, a `Format:`
    header): the short name of the last `Files` paragraph whose patterns match it, as DEP-5 reads
    them; else a standalone License paragraph's name. Free-form: 'free-form', with the licences
    under /usr/share/common-licenses that the text points to, if any."""
    if not copyright_text.lstrip().startswith("Format:"):
        named = sorted(set(COMMON_LICENSE.findall(copyright_text)))
        return "free-form" + (f" (refers to {', '.join(named)})" if named else "")
    license = ""
    for fields in paragraphs(copyright_text):
        patterns = fields.get("Files", "").split()
        if "License" in fields and any(dep5_matches(path, p) for p in patterns):
            license = fields["License"].split("\n", 1)[0]
    return license or "machine-readable, no Files paragraph for " + path


def deb_member(deb: Path, wanted: str) -> tuple[bytes | None, str | None]:
    """A file of a .deb's tree (its bytes), or where it links to when it is a symbolic link."""
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    found: tuple[bytes | None, str | None] = (None, None)
    with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
        for member in archive:
            if member.name.removeprefix("./") != wanted:
                continue
            if member.issym():
                found = (None, member.linkname)
            elif member.isfile():
                data = archive.extractfile(member)
                assert data is not None
                found = (data.read(), None)
    proc.wait()
    return found


def copyright_file(package: str, deb: Path, cache: Path) -> tuple[str, str]:
    """(the package whose copyright file covers `package`, its text). A package whose doc folder
    links to another's (gcc-12-locales to gcc-12-base) has that package's file, whose .deb is
    fetched into `cache` when missing."""
    data, _ = deb_member(deb, f"usr/share/doc/{package}/copyright")
    if data is not None:
        return package, data.decode("utf-8", errors="replace")
    _, link = deb_member(deb, f"usr/share/doc/{package}")
    if link is None or "/" in link:
        raise SystemExit(f"{deb}: no usr/share/doc/{package}/copyright and no link to another package's")
    owner = apt_show([link])[link]
    owner_deb = cache / owner.filename
    if not owner_deb.exists():
        subprocess.run(["apt-get", "download", "-q", link], cwd=cache, check=True, stdout=subprocess.DEVNULL)
    data, _ = deb_member(owner_deb, f"usr/share/doc/{link}/copyright")
    if data is None:
        raise SystemExit(f"{owner_deb}: no usr/share/doc/{link}/copyright")
    return link, data.decode("utf-8", errors="replace")


def xz(data: bytes) -> bytes:
    """`data` xz-compressed, deterministically (the same bytes give the same file)."""
    return lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)


def write_splits(corpus: Path, out: Path) -> Counter[str]:
    """The corpus's splits into `out` (train as .xz), without the pairs holding a control
    character, which `prepare` would skip with a warning (the builder drops C0 controls only; a
    few German strings hold U+0096, an en dash misdecoded from cp1252); how many pairs each
    package is the first source of, in what is written."""
    first_source: Counter[str] = Counter()
    for split in ("train", "dev", "test"):
        columns = [
            (corpus / f"{split}.{x}").read_text(encoding="utf-8").splitlines() for x in ("en", "de", "meta")
        ]
        kept = [row for row in zip(*columns, strict=True) if not CONTROL.search(row[0] + row[1])]
        if len(kept) < len(columns[0]):
            print(f"{split}: {len(columns[0]) - len(kept)} pairs with a control character left out")
        for side, lang in enumerate(("en", "de")):
            text = "".join(row[side] + "\n" for row in kept).encode("utf-8")
            if split == "train":
                (out / f"train.{lang}.xz").write_bytes(xz(text))
            else:
                (out / f"{split}.{lang}").write_bytes(text)
        first_source.update(row[2].split("\t", 1)[0] for row in kept)
    return first_source


def write_sources(corpus: Path, out: Path, cache: Path, first_source: Counter[str]) -> None:
    """SOURCES.tsv and COPYRIGHT.xz for the packages the corpus was read from (its packages.tsv)."""
    lines = (corpus / "packages.tsv").read_text(encoding="utf-8").splitlines()[1:]
    debs = {p.name.split("_", 1)[0]: p for p in cache.glob("*.deb")}
    table = ["package\tversion\tpairs\tlicense\tcopyright_of"]
    texts = []
    for package, version, *_ in (line.split("\t") for line in lines):
        owner, text = copyright_file(package, debs[package], cache)
        table.append(f"{package}\t{version}\t{first_source[package]}\t{declared_license(text)}\t{owner}")
        texts.append(f"==> {package} {version}: /usr/share/doc/{owner}/copyright <==\n{text.rstrip()}\n")
    (out / "SOURCES.tsv").write_text("\n".join(table) + "\n", encoding="utf-8")
    (out / "COPYRIGHT.xz").write_bytes(xz("\n".join(texts).encode("utf-8")))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DEMO)
    args = parser.parse_args()
    ensure_tools()
    corpus, cache = OUT / f"l10n-de-demo-{BUDGET_MB}mb", OUT / "debs"
    shutil.rmtree(corpus, ignore_errors=True)
    options = Options(
        lang="de",
        out=corpus,
        cache_dir=cache,
        budget_mb=BUDGET_MB,
        dev_size=DEV_SIZE,
        test_size=TEST_SIZE,
    )
    build(options)
    args.out.mkdir(parents=True, exist_ok=True)
    write_sources(corpus, args.out, cache, write_splits(corpus, args.out))
    for path in sorted(args.out.iterdir()):
        print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
