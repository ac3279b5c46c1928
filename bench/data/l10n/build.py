"""The whole build: choose and fetch the packages, read their catalogs (in worker processes),
clean and count the pairs, split them and write the corpus with its provenance and statistics."""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .catalogs import DebMessages, read_deb
from .clean import clean_pair
from .debian import Deb, Log, apt_show, discover, download, load_rank, select_packages
from .split import Splits, most_frequent_translations, near_duplicate_key, split_sources

SRC = "en"  # gettext msgids are the programs' English
LENGTH_BINS = ((3, "2-3"), (6, "4-6"), (10, "7-10"), (20, "11-20"), (40, "21-40"), (100, "41-100"))


@dataclass
class Options:
    """What to build (the command line's options; `python -m bench.data.l10n --help`)."""

    lang: str
    out: Path
    cache_dir: Path
    packages_file: Path | None = None  # package names, one a line: no discovery, no budget
    budget_mb: float = 1500.0
    max_unranked_mb: float = 2.0
    download: bool = True  # False: only the .debs already cached
    dry_run: bool = False
    dev_size: int = 2000
    test_size: int = 2000
    min_words: int = 2
    max_words: int = 100
    jobs: int = field(default_factory=lambda: os.cpu_count() or 2)
    reserve: list[Path] = field(default_factory=list)


@dataclass
class Collected:
    """The cleaned pairs of every package: counts[src][tgt] = occurrences, provenance[(src, tgt)] =
    the first (package, catalog) that gave it, and what each package and catalog contributed."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    provenance: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    reasons: Counter[str] = field(default_factory=Counter)
    readers: Counter[str] = field(default_factory=Counter)
    per_package: dict[str, dict[str, Any]] = field(default_factory=dict)
    catalogs: int = 0
    raw_entries: int = 0

    def add(self, deb: DebMessages, info: Deb, min_words: int, max_words: int) -> None:
        """One package's messages, cleaned and counted."""
        kept = 0
        for msgid, msgstr, context, catalog in deb.messages:
            pair, reason = clean_pair(msgid, msgstr, context, min_words, max_words)
            self.reasons[reason] += 1
            if pair is None:
                continue
            kept += 1
            self.counts.setdefault(pair[0], Counter())[pair[1]] += 1
            self.provenance.setdefault(pair, (deb.package, catalog))
        self.catalogs += deb.catalogs
        self.readers.update(deb.readers)
        self.raw_entries += len(deb.messages)
        row = {"version": info.version, "deb_bytes": info.size, "catalogs": deb.catalogs}
        self.per_package[deb.package] = row | {"raw_entries": len(deb.messages), "clean_pairs": kept}
        if deb.error is not None:
            self.per_package[deb.package]["error"] = deb.error


def choose(options: Options, log: Log) -> tuple[list[str], dict[str, Deb]]:
    """The packages to read (--packages, or discovery and selection) and their .debs."""
    if options.packages_file is not None:
        lines = options.packages_file.read_text(encoding="utf-8").splitlines()
        names = [
            line.split()[0].replace("{lang}", options.lang)
            for line in lines
            if line.strip() and not line.startswith("#")
        ]
        debs = apt_show(names)
        missing = [p for p in names if p not in debs]
        if missing:
            log("not in apt cache (skipped): " + " ".join(missing))
        return [p for p in names if p in debs], debs
    found = discover(options.lang, log)
    log(f"discovery: {len(found)} packages ship a '{options.lang}' catalog")
    debs = apt_show(found)
    rank = load_rank(options.lang)
    if not rank:
        log("no package rank table; ranking by .deb size")
    return select_packages(found, debs, rank, options.budget_mb, options.max_unranked_mb, log), debs


def read_all(packages: list[str], debs: dict[str, Deb], options: Options) -> Iterator[DebMessages]:
    """Each package's messages, the largest .debs first (they take longest, so the workers end
    together); in this process when `options.jobs` is 1."""
    jobs = sorted(
        ((p, options.cache_dir / debs[p].filename, options.lang) for p in packages),
        key=lambda job: -debs[job[0]].size,
    )
    if options.jobs == 1:
        yield from map(read_deb, jobs)
        return
    with ProcessPoolExecutor(max_workers=options.jobs) as pool:
        yield from pool.map(read_deb, jobs, chunksize=4)


def reserved_keys(files: Iterable[Path]) -> frozenset[str]:
    """The near-duplicate keys of the non-empty lines of `files`."""
    keys: set[str] = set()
    for path in files:
        with path.open(encoding="utf-8") as lines:
            keys |= {near_duplicate_key(line.rstrip("\n")) for line in lines if line.strip()}
    return frozenset(keys)


def write_split(
    out: Path, name: str, lang: str, sources: list[str], pairs: dict[str, str], collected: Collected
) -> None:
    """name.en and name.LANG (one segment a line) and name.meta (package, catalog and number of
    occurrences of each line's source)."""
    with (
        (out / f"{name}.{SRC}").open("w", encoding="utf-8") as src_file,
        (out / f"{name}.{lang}").open("w", encoding="utf-8") as tgt_file,
        (out / f"{name}.meta").open("w", encoding="utf-8") as meta_file,
    ):
        for src in sources:
            tgt = pairs[src]
            assert "\n" not in src + tgt and "\t" not in src + tgt  # normalise_space removed them
            src_file.write(src + "\n")
            tgt_file.write(tgt + "\n")
            package, catalog = collected.provenance[(src, tgt)]
            meta_file.write(f"{package}\t{catalog}\t{sum(collected.counts[src].values())}\n")


def words(text: str) -> int:
    return len(text.split(" "))


def split_stats(sources: list[str], pairs: dict[str, str]) -> dict[str, Any]:
    """Pairs, words and mean lengths of one split."""
    n = len(sources)
    src_words = sum(words(s) for s in sources)
    tgt_words = sum(words(pairs[s]) for s in sources)

    def mean(total: float, digits: int) -> float:
        return round(total / n, digits) if n else 0

    return {
        "pairs": n,
        "src_words": src_words,
        "tgt_words": tgt_words,
        "avg_src_words": mean(src_words, 2),
        "avg_tgt_words": mean(tgt_words, 2),
        "avg_src_chars": mean(sum(len(s) for s in sources), 1),
        "avg_tgt_chars": mean(sum(len(pairs[s]) for s in sources), 1),
    }


def length_histogram(sources: Iterable[str]) -> dict[str, int]:
    """Sources by word count, in the bins of LENGTH_BINS (ascending; the last also takes longer
    sources, which only a --max-words over 100 lets in)."""
    last = LENGTH_BINS[-1][1]
    counts = Counter(next((label for top, label in LENGTH_BINS if words(s) <= top), last) for s in sources)
    return {label: counts[label] for _, label in LENGTH_BINS if label in counts}


def corpus_stats(
    options: Options, packages: list[str], debs: dict[str, Deb], collected: Collected, pairs: dict[str, str]
) -> dict[str, Any]:
    """stats.json's fields up to its splits (filled in as they are written)."""
    return {
        "lang": options.lang,
        "src_lang": SRC,
        "packages_used": len(packages),
        "deb_bytes_total": sum(debs[p].size for p in packages),
        "catalogs": collected.catalogs,
        "catalog_parsers": dict(collected.readers),
        "raw_entries": collected.raw_entries,
        "filter_reasons": dict(collected.reasons),
        "distinct_clean_sources": len(pairs),
    }


def write_packages(path: Path, per_package: dict[str, dict[str, Any]]) -> None:
    """packages.tsv: each package's version, .deb size, catalogs, messages and pairs kept."""
    with path.open("w", encoding="utf-8") as table:
        table.write("package\tversion\tdeb_bytes\tcatalogs\traw_entries\tclean_pairs\n")
        for package in sorted(per_package):
            d = per_package[package]
            table.write(
                f"{package}\t{d['version']}\t{d['deb_bytes']}\t{d['catalogs']}\t{d['raw_entries']}\t{d['clean_pairs']}\n"
            )


def logger(log_file: TextIO, started: float) -> Log:
    """A log to stderr and build.log, each line with the seconds since `started`."""

    def log(message: str) -> None:
        line = f"[{time.time() - started:7.1f}s] {message}"
        print(line, file=sys.stderr, flush=True)
        print(line, file=log_file, flush=True)

    return log


def build(options: Options) -> Splits | None:
    """Build the corpus into options.out: {train,dev,test}.{en,LANG}, their .meta, stats.json,
    packages.tsv and build.log. With dry_run, print the selection (package, version, bytes) and
    build nothing (None)."""
    started = time.time()
    options.out.mkdir(parents=True, exist_ok=True)
    with (options.out / "build.log").open("w", encoding="utf-8") as log_file:
        log = logger(log_file, started)
        packages, debs = choose(options, log)
        if options.dry_run:
            for p in packages:
                print(f"{p}\t{debs[p].version}\t{debs[p].size}")
            log(f"dry run: {len(packages)} packages, {sum(debs[p].size for p in packages) / 1e6:.1f} MB")
            return None
        if options.download:
            packages = download(packages, debs, options.cache_dir, log)
        else:
            packages = [p for p in packages if (options.cache_dir / debs[p].filename).exists()]
        log(f"using {len(packages)} packages, {sum(debs[p].size for p in packages) / 1e6:.1f} MB of .debs")
        download_seconds = time.time() - started

        collected = Collected()
        for i, deb in enumerate(read_all(packages, debs, options), 1):
            collected.add(deb, debs[deb.package], options.min_words, options.max_words)
            if i % 200 == 0:
                log(f"parsed {i}/{len(packages)} packages, {len(collected.counts)} distinct sources")
        log(
            f"parsed {collected.catalogs} catalogs, {collected.raw_entries} raw entries, "
            f"{len(collected.counts)} distinct clean sources"
        )

        pairs, conflicting = most_frequent_translations(collected.counts)
        occurrences = {src: sum(c.values()) for src, c in collected.counts.items()}
        splits = split_sources(
            pairs, occurrences, options.test_size, options.dev_size, reserved_keys(options.reserve)
        )
        stats = corpus_stats(options, packages, debs, collected, pairs)
        stats |= {
            "sources_with_conflicting_translations": conflicting,
            "near_duplicate_groups": splits.groups,
            "dev_test_group_mates_dropped": splits.group_mates_dropped,
            "reserved_sources_dropped": splits.reserved_dropped,
            "splits": {},
        }
        for name in ("test", "dev", "train"):
            sources = getattr(splits, name)
            write_split(options.out, name, options.lang, sources, pairs, collected)
            stats["splits"][name] = split_stats(sources, pairs)
        stats["src_length_histogram_words"] = length_histogram(pairs)
        top = sorted(collected.per_package.items(), key=lambda item: -item[1]["clean_pairs"])[:40]
        stats["top_packages_by_clean_pairs"] = [(p, d["clean_pairs"]) for p, d in top]
        stats["packages"] = sorted(packages)
        stats["wall_seconds"] = round(time.time() - started, 1)
        stats["download_phase_seconds"] = round(download_seconds, 1)
        text = json.dumps(stats, indent=1, ensure_ascii=False)
        (options.out / "stats.json").write_text(text, encoding="utf-8")
        write_packages(options.out / "packages.tsv", collected.per_package)
        log(
            f"done: train {len(splits.train)} dev {len(splits.dev)} test {len(splits.test)} "
            f"(distinct sources {len(pairs)}) in {time.time() - started:.0f}s"
        )
    return splits
