"""What Debian offers: the packages that ship a language's catalogs (from apt's Contents indices),
their candidate versions and .deb sizes (apt-cache), which of them to take within a download
budget (package_rank.tsv, beside this file), and fetching the .debs (apt-get download, cached)."""

from __future__ import annotations

import gzip
import io
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .catalogs import catalog_pattern, is_catalog

Log = Callable[[str], None]

APT_LISTS = Path("/var/lib/apt/lists")
RANK_TABLE = Path(__file__).with_name("package_rank.tsv")
# Packages that never help (test data, examples) or copy other packages' catalogs.
EXCLUDED_PACKAGES = frozenset({"golang-github-chai2010-gettext-go-dev", "castle-game-engine-doc"})
CATALOG_LINE = re.compile(r"\.g?mo\s")  # a quick test before the full pattern


@dataclass(frozen=True)
class Deb:
    """A package's candidate version, its .deb's size in bytes and the file name `apt-get
    download` gives it (an epoch's ':' written '%3a')."""

    version: str
    size: int
    filename: str


def load_rank(lang: str, table: Path = RANK_TABLE) -> dict[str, int]:
    """Package -> rank in the table's download order ('{lang}' in a name stands for `lang`:
    libreoffice-l10n-{lang}); empty when the table is missing."""
    rank = {}
    if table.exists():
        for line in table.read_text(encoding="utf-8").splitlines():
            if line.startswith("#") or not line.strip():
                continue
            position, name = line.split("\t")[:2]
            rank[name.replace("{lang}", lang)] = int(position)
    return rank


def contents_files(lists: Path = APT_LISTS) -> list[Path]:
    """apt's Contents indices (those `apt-file update` fetches), for all architectures and amd64."""
    found = [*lists.glob("*_Contents-all*"), *lists.glob("*_Contents-amd64*")]
    return sorted(f for f in found if not f.name.endswith(".diff_Index"))


def contents_lines(path: Path) -> Iterator[str]:
    """The lines of a Contents index, lz4- or gzip-compressed or plain."""
    if path.suffix == ".lz4":
        proc = subprocess.Popen(["lz4cat", str(path)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        yield from io.TextIOWrapper(proc.stdout, encoding="utf-8", errors="replace")
        proc.wait()
    elif path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as lines:
            yield from lines
    else:
        with path.open(encoding="utf-8", errors="replace") as lines:
            yield from lines


def packages_with_catalogs(lines: Iterable[str], lang: str) -> dict[str, list[str]]:
    """Package -> its `lang` catalog paths, from Contents lines ('path  section/pkg,section/pkg')."""
    pattern = catalog_pattern(lang)
    packages: dict[str, set[str]] = {}
    for line in lines:
        if not CATALOG_LINE.search(line):
            continue
        parts = line.rstrip("\n").rsplit(None, 1)
        if len(parts) != 2:
            continue
        path, owners = parts[0].strip(), parts[1]
        if not is_catalog(path, pattern):
            continue
        for owner in owners.split(","):
            packages.setdefault(owner.rsplit("/", 1)[-1], set()).add(path)
    return {p: sorted(paths) for p, paths in packages.items() if p not in EXCLUDED_PACKAGES}


def discover(lang: str, log: Log) -> dict[str, list[str]]:
    """Every package of the configured archive that ships a `lang` catalog, with their paths;
    runs `apt-file update` first when no Contents index is there."""
    files = contents_files()
    if not files and shutil.which("apt-file"):
        log("no Contents index found; running apt-file update")
        subprocess.run(["apt-file", "update"], check=True, stdout=subprocess.DEVNULL)
        files = contents_files()
    if not files:
        raise SystemExit("No apt Contents indices. Run: apt-get install apt-file && apt-file update")
    return packages_with_catalogs((line for f in files for line in contents_lines(f)), lang)


def parse_apt_show(text: str) -> dict[str, Deb]:
    """The packages of `apt-cache show` output (records separated by blank lines)."""
    debs = {}
    for record in text.split("\n\n"):
        fields = {}
        for line in record.splitlines():
            if ":" in line and not line.startswith(" "):
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if "Package" in fields and "Size" in fields:
            version = fields.get("Version", "")
            arch = fields.get("Architecture", "all")
            filename = f"{fields['Package']}_{version.replace(':', '%3a')}_{arch}.deb"
            debs[fields["Package"]] = Deb(version, int(fields["Size"]), filename)
    return debs


def apt_show(packages: Iterable[str]) -> dict[str, Deb]:
    """The candidate version's .deb of each package apt knows (200 names per apt-cache call)."""
    names = sorted(packages)
    debs = {}
    for i in range(0, len(names), 200):
        command = ["apt-cache", "show", "--no-all-versions", *names[i : i + 200]]
        debs |= parse_apt_show(subprocess.run(command, capture_output=True, text=True).stdout)
    return debs


def select_packages(
    candidates: Iterable[str],
    debs: dict[str, Deb],
    rank: dict[str, int],
    budget_mb: float,
    max_unranked_mb: float,
    log: Log,
) -> list[str]:
    """The packages to download, sorted by name: first those the rank table lacks whose .deb is at
    most `max_unranked_mb` (smallest first), then the ranked ones in the table's order, up to
    `budget_mb` of .debs in all (0: no cap). The ranked part is a prefix of the table: it stops at
    the first package that does not fit, so a budget always takes the same best-first packages."""
    known = [p for p in candidates if p in debs]
    unranked = sorted(
        (p for p in known if p not in rank and debs[p].size <= max_unranked_mb * 1e6),
        key=lambda p: (debs[p].size, p),
    )
    ranked = sorted((p for p in known if p in rank), key=lambda p: rank[p])
    chosen, total = [], 0
    for package in unranked + ranked:
        if budget_mb and total + debs[package].size > budget_mb * 1e6:
            if package in rank:
                break
            continue
        chosen.append(package)
        total += debs[package].size
    log(
        f"selected {len(chosen)} packages ({sum(p not in rank for p in chosen)} not in rank table), "
        f"{total / 1e6:.1f} MB of .debs; left out {len(known) - len(chosen)}"
    )
    return sorted(chosen)


def download(
    packages: list[str], debs: dict[str, Deb], cache: Path, log: Log, parallel: int = 4
) -> list[str]:
    """Fetch the .debs `cache` lacks (batches of 25 names, `parallel` apt-get processes; a failed
    batch is retried name by name so one bad name does not sink it); the packages whose .deb is
    then there."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [p for p in packages if not (cache / debs[p].filename).exists()]
    log(f"download: {len(missing)} of {len(packages)} .debs not cached")

    def fetch(names: list[str]) -> bool:
        command = ["apt-get", "download", "-q", *names]
        return (
            subprocess.run(command, cwd=cache, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
            == 0
        )

    def fetch_batch(batch: list[str]) -> list[str]:
        if fetch(batch):
            return []
        return [p for p in batch if not (cache / debs[p].filename).exists() and not fetch([p])]

    batches = [missing[i : i + 25] for i in range(0, len(missing), 25)]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        failed = [p for batch_failed in pool.map(fetch_batch, batches) for p in batch_failed]
    if failed:
        log("download failed for: " + " ".join(failed))
    return [p for p in packages if (cache / debs[p].filename).exists()]
