"""Build an English->German corpus of Debian package descriptions (the DDTP translations).

    python -m bench.data.ddtp_corpus [--out bench/out/ddtp] [--dev-size 500] [--test-size 1000]

Debian's package descriptions are translated by people (the Debian Description Translation
Project) and shipped as apt index files (`Translation-en`, `Translation-de`). The image's apt
fetches no translations, so this script fetches them with a private apt configuration and lists
folder under --out (`apt-get -c OUT/apt.conf update`; nothing system-wide changes) and reuses them
when they are there (--refetch fetches again). Then:

1. English and German records are joined on `Description-md5`.
2. Each description is split into segments: the short first line, then the paragraphs of the
   long description (separated by lines holding only ` .`; the lines of a paragraph are joined
   with single spaces). The short lines always pair up; the paragraphs are paired one to one only
   where both sides have the same number of paragraphs (descriptions whose counts differ give
   their short line only).
3. Pairs are grouped by Debian *source* package (from the `Packages` index apt fetches alongside;
   a binary package without a `Source` field is its own source), so that e.g. `libfoo1`,
   `libfoo-dev` and `libfoo-doc`, whose descriptions are near-copies, stay together.
4. Source packages are ordered by a hash of their name; test takes whole packages until it has
   --test-size segments of its own, then dev until --dev-size, the rest is training data. No
   package spans two splits.
5. Deduplication by the English side (case, spacing and punctuation ignored): each distinct
   segment is kept once. Boilerplate shared by packages in different splits (``This package
   contains the documentation.'') goes to train if any of its packages is there, else to dev, so
   no English segment (or near-copy differing only in case or punctuation) is in two splits, and
   test holds no segment seen in training.

Writes OUT/{train,dev,test}.{en,de} (one segment per line) and OUT/counts.json, and prints the
counts. Deterministic for given index files; Debian updates the files, so a later fetch can
give slightly different data.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path

from bench.records import OUT

APT_CONF = '#clear Acquire::Languages;\nAcquire::Languages {{ "en"; "de"; }};\nDir::State::Lists "{lists}";\n'


def fetch(out: Path, refetch: bool) -> Path:
    """The apt lists folder under `out`, with the en/de Translation files (fetched when missing)."""
    lists = (out / "lists").resolve()
    if not refetch and list(lists.glob("*_i18n_Translation-de.lz4")):
        return lists
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    conf = out / "apt.conf"
    conf.write_text(APT_CONF.format(lists=lists), encoding="utf-8")
    subprocess.run(
        ["apt-get", "-q", "-c", str(conf.resolve()), "update"], check=True, stdout=subprocess.DEVNULL
    )
    if not list(lists.glob("*_i18n_Translation-de.lz4")):
        raise SystemExit(f"{lists}: apt fetched no Translation-de file")
    return lists


def records(path: Path):
    """The records (field -> value, continuation lines kept with their leading space) of an
    lz4-compressed deb822 index file."""
    text = subprocess.run(["lz4cat", str(path)], check=True, capture_output=True).stdout.decode("utf-8")
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for line in block.split("\n"):
            if line.startswith(" ") and key is not None:
                fields[key] += "\n" + line
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if fields:
            yield fields


def segments(description: str) -> tuple[str, list[str]]:
    """The short line and the paragraphs of a description, each on one line."""
    short, *body = description.split("\n")
    paragraphs, current = [], []
    for line in body:
        if line.strip() == ".":
            paragraphs.append(current)
            current = []
        else:
            current.append(line.strip())
    paragraphs.append(current)
    joined = [" ".join(p for p in para if p) for para in paragraphs]
    return clean(short), [clean(p) for p in joined if p]


def clean(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def dedup_key(text: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def source_packages(lists: Path) -> dict[str, str]:
    """Binary package -> source package, from the Packages indexes."""
    source: dict[str, str] = {}
    for path in sorted(lists.glob("*_Packages.lz4")):
        for rec in records(path):
            if "Package" in rec:
                source.setdefault(rec["Package"], rec.get("Source", rec["Package"]).split(" ")[0])
    return source


def build(out: Path, dev_size: int, test_size: int, refetch: bool) -> dict:
    lists = fetch(out, refetch)
    english: dict[str, str] = {}
    for path in sorted(lists.glob("*_i18n_Translation-en.lz4")):
        for rec in records(path):
            if "Description-en" in rec:
                english.setdefault(rec["Description-md5"], rec["Description-en"])
    source = source_packages(lists)
    counts = defaultdict(int)
    pairs_of: dict[str, list[tuple[str, str]]] = defaultdict(list)  # source package -> pairs
    seen_md5 = set()
    for path in sorted(lists.glob("*_i18n_Translation-de.lz4")):
        for rec in records(path):
            md5 = rec.get("Description-md5")
            if md5 is None or "Description-de" not in rec or md5 in seen_md5:
                continue
            seen_md5.add(md5)
            counts["descriptions_de"] += 1
            if md5 not in english:
                counts["descriptions_without_english"] += 1
                continue
            counts["descriptions_joined"] += 1
            en_short, en_paras = segments(english[md5])
            de_short, de_paras = segments(rec["Description-de"])
            group = source.get(rec["Package"], rec["Package"])
            pairs = [(en_short, de_short)]
            counts["short_pairs"] += 1
            if len(en_paras) == len(de_paras):
                pairs += zip(en_paras, de_paras, strict=True)
                counts["descriptions_aligned"] += 1
                counts["paragraph_pairs"] += len(en_paras)
            else:
                counts["descriptions_paragraph_count_differs"] += 1
            pairs_of[group] += [(en, de) for en, de in pairs if en and de]
    counts["segment_pairs_before_dedup"] = sum(len(p) for p in pairs_of.values())

    # Whole source packages to splits, in hash order: test, then dev, then train.
    groups = sorted(pairs_of, key=lambda g: hashlib.sha1(g.encode()).hexdigest())
    packages_with = defaultdict(set)
    for group in groups:
        for en, _ in pairs_of[group]:
            packages_with[dedup_key(en)].add(group)
    split_of: dict[str, str] = {}
    own = {"test": 0, "dev": 0}
    for group in groups:
        split = "test" if own["test"] < test_size else "dev" if own["dev"] < dev_size else "train"
        split_of[group] = split
        if split != "train":
            keys = {dedup_key(en) for en, _ in pairs_of[group]}
            own[split] += sum(1 for k in keys if len(packages_with[k]) == 1)

    # Each distinct English segment once, in the earliest split of train, dev, test it occurs in.
    order = {"train": 0, "dev": 1, "test": 2}
    home = {k: min((split_of[g] for g in gs), key=order.get) for k, gs in packages_with.items()}
    written: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    kept = set()
    for group in groups:
        for en, de in pairs_of[group]:
            key = dedup_key(en)
            if key in kept or home[key] != split_of[group]:
                continue
            kept.add(key)
            written[split_of[group]].append((en, de))
    for split, pairs in written.items():
        for side, index in (("en", 0), ("de", 1)):
            lines = "".join(pair[index] + "\n" for pair in pairs)
            (out / f"{split}.{side}").write_text(lines, encoding="utf-8")
        counts[f"{split}_pairs"] = len(pairs)
        counts[f"{split}_packages"] = sum(1 for g in groups if split_of[g] == split)
        counts[f"{split}_en_words"] = sum(len(en.split()) for en, _ in pairs)
    counts["segment_pairs_after_dedup"] = len(kept)
    result = dict(counts)
    (out / "counts.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, default=OUT / "ddtp", help="data folder (apt lists and the corpus)"
    )
    parser.add_argument("--dev-size", type=int, default=500, help="about this many dev segments")
    parser.add_argument("--test-size", type=int, default=1000, help="about this many test segments")
    parser.add_argument("--refetch", action="store_true", help="fetch the index files again")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    counts = build(args.out, args.dev_size, args.test_size, args.refetch)
    for key, value in counts.items():
        print(f"{key}: {value}")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
